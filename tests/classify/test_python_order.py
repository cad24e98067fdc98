"""Python's order, on a real wheel: parent packages first, the first failing import named.

SGLang 0.5.5.post2 with pybase64 missing: `python -m sglang.launch_server` runs
sglang/__init__.py before launch_server.py (runpy imports the parent package first), and
dies at sglang/utils.py:23, reached from sglang/__init__.py:5 through the `sglang.lang`
frontend. envsync must name that statement, not sglang/srt/utils/common.py:77, which
Python would reach only later (from launch_server.py:7). The chain is asserted from the
wheel's own source, and a real run of the target decides the truth.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from envsync.cli import main
from tests.corpus import table
from tests.helpers import fetch, make_venv, pip_install, site_packages

pytestmark = pytest.mark.slow

SGLANG = "sglang==0.5.5.post2"
COMMON = ("numpy==2.4.6", "tqdm==4.70.1")
PYBASE64 = "pybase64==1.4.2"

# The chain Python runs, as the wheel has it: (file, line, statement).
CHAIN = (
    ("sglang/__init__.py", 5, "from sglang.lang.api import ("),
    ("sglang/lang/api.py", 7, "from sglang.lang.backend.base_backend import BaseBackend"),
    (
        "sglang/lang/backend/base_backend.py",
        5,
        "from sglang.lang.interpreter import StreamExecutor",
    ),
    ("sglang/lang/interpreter.py", 35, "from sglang.utils import ("),
    ("sglang/utils.py", 23, "import pybase64"),
)
LATER = ("sglang/srt/utils/common.py", 77, "import pybase64")


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory, wheel_cache: Path) -> Path:
    root = tmp_path_factory.mktemp("order")
    wheels = [fetch(wheel_cache, r) for r in (SGLANG, *COMMON)]
    pip_install(make_venv(root / "ref"), *wheels, fetch(wheel_cache, PYBASE64))
    pip_install(make_venv(root / "tgt"), *wheels)
    return root


def test_the_wheel_says_what_python_runs_first(pair: Path) -> None:
    site = site_packages(pair / "tgt" / "bin" / "python")
    for file, line, statement in (*CHAIN, LATER):
        assert (site / file).read_text().splitlines()[line - 1].strip() == statement, file
    # the real import decides: Python dies at the first statement of the chain's end
    out = subprocess.run(
        [str(pair / "tgt" / "bin" / "python"), "-m", "sglang.launch_server", "--help"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert "ModuleNotFoundError: No module named 'pybase64'" in out.stderr
    raised = [ln for ln in out.stderr.splitlines() if ln.startswith("ModuleNotFoundError: ")]
    table.part(
        "sglang-0.5.5-pybase64-missing",
        report="sglang==0.5.5.post2 without pybase64: Python's order of imports",
        culprit="pybase64",
        reference="not started (the target alone is started)",
        target=table.outcome(raised[-1]),
        expected="fatal",
        test="tests/classify/test_python_order.py",
    )
    frames = [line.strip() for line in out.stderr.splitlines() if line.strip().startswith("File")]
    tail = [f for f in frames if "/sglang/" in f]
    assert tail[0].endswith('sglang/__init__.py", line 5, in <module>'), tail
    assert tail[-1].endswith('sglang/utils.py", line 23, in <module>'), tail
    assert not any("common.py" in f for f in frames)


def test_envsync_names_the_first_failing_import_in_pythons_order(
    pair: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    inv = tmp_path / "envsync.toml"
    command = ["{python}", "-m", "sglang.launch_server", "--model-path", "/m"]
    inv.write_text(
        f'[defaults]\nreference = "ref"\ntarget = "tgt"\nwatch = ["sglang"]\n'
        f"[service]\ncommand = {json.dumps(command)}\n"
        f'[hosts.ref]\npython = "{pair / "ref" / "bin" / "python"}"\n'
        f'[hosts.tgt]\npython = "{pair / "tgt" / "bin" / "python"}"\n'
    )
    capsys.readouterr()
    assert main(["--inventory", str(inv), "-q", "diff", "--format", "json"]) == 1
    findings = {f["subject"]: f for f in json.loads(capsys.readouterr().out)["findings"]}
    culprit = findings["pybase64"]
    table.part("sglang-0.5.5-pybase64-missing", static=culprit["severity"], import_check=None)
    assert culprit["severity"] == "fatal", culprit["reason"]
    reason = culprit["reason"]
    assert "sglang.utils imports pybase64 at module level (sglang/utils.py:23)" in reason
    assert "startup reaches it from sglang/__init__.py:5: sglang -> " in reason, reason
    assert "common.py" not in reason
    # the path in the evidence is the chain Python runs, every module of it
    first = culprit["evidence"][0]
    assert first["file"].endswith("sglang/utils.py") and first["line"] == 23
    chain = "sglang -> sglang.lang.api -> sglang.lang.backend.base_backend -> "
    chain += "sglang.lang.interpreter -> sglang.utils"
    assert first["context"] == f"module; startup path: {chain}"
    # every failing import is evidence, in the order Python would meet them
    lines = [(e["file"] or "").rpartition("site-packages/")[2] for e in culprit["evidence"]]
    assert LATER[0] in lines and lines.index("sglang/utils.py") < lines.index(LATER[0])
