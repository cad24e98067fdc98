"""benchmarks/gpu_check.py, the script for a GPU host, run here on the CPU runtime: the parts
that need no GPU (the probe's verdicts against a real import, the precision in import
order), and its skip where there is no nvidia-smi."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.helpers import REPO

pytestmark = pytest.mark.slow

SCRIPT = REPO / "benchmarks" / "gpu_check.py"


@pytest.fixture(scope="module")
def runtime_python() -> Path:
    from examples.build_hosts import build_runtime

    runtime = REPO / "examples" / ".hosts" / "runtime"
    build_runtime(runtime)
    return runtime / "bin" / "python"


def test_it_skips_where_there_is_no_nvidia_smi(runtime_python: Path, tmp_path: Path) -> None:
    if shutil.which("nvidia-smi"):
        pytest.skip("this host has nvidia-smi")
    env = {**os.environ, "OUT": str(tmp_path)}
    out = subprocess.run(
        [str(runtime_python), str(SCRIPT)], env=env, capture_output=True, text=True
    )
    assert out.returncode == 0 and "skipped" in out.stdout
    assert (
        "nvidia-smi not found" in json.loads((tmp_path / "gpu_check.json").read_text())["skipped"]
    )


def test_the_parts_that_need_no_gpu_on_the_cpu_runtime(
    runtime_python: Path, tmp_path: Path
) -> None:
    env = {**os.environ, "OUT": str(tmp_path)}
    env.pop("PYTHONPATH", None)
    out = subprocess.run(
        [str(runtime_python), str(SCRIPT), "--allow-no-gpu", "--quick"],
        env=env,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    result = json.loads((tmp_path / "gpu_check.json").read_text())
    keys = {load["key"] for load in result["native"]["loads"]}
    assert {"torch/lib/libtorch_global_deps.so", "torch/_C.cpython-311-x86_64-linux-gnu.so"} <= keys
    assert result["loads"]["agree"] >= 2 and result["loads"]["disagree"] == []
    assert result["facts"] == [] and "arch" in result["envsync"]
    order = result["precision"]["import order"]
    assert order["shared objects"] > 50
    assert order["false fatal"] == [] and order["missed fatal"] == []
