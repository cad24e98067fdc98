"""The gate of one multi-node server: its nodes must agree on torch, NCCL, the net plugin,
the driver, Python, the engine and NCCL_*/GLOO_*/CUDA_* variables, whatever the lock says.

NCCL here is a real shared library built with gcc (soname libnccl.so.2, NCCL's own version
string in its read-only data), shipped in a real wheel as nvidia-nccl-cu12 ships it, and
read by the probe without loading it.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from envsync.compare.gate import node_facts, server_report
from envsync.model.codec import from_data
from envsync.model.environment import Snapshot, Torch
from tests.helpers import make_venv, make_wheel, pip_install, site_packages
from tests.helpers import run_cli as run

DATA = Path(__file__).resolve().parent.parent / "data" / "snapshots" / "ct129.json"


def libnccl(folder: Path, version: str, extra: str = "") -> Path:
    """A real ELF shared object that carries NCCL's version string as NCCL builds it."""
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.skip("gcc is not installed")
    folder.mkdir(parents=True, exist_ok=True)
    source = folder / "nccl.c"
    source.write_text(
        f'const char *ncclVersionString = "NCCL version {version}";\n'
        f"int ncclGetVersion(int *v) {{ *v = 22105; return 0; }}\n{extra}"
    )
    out = folder / f"libnccl.so.{version.split('+')[0]}"
    subprocess.run(
        [gcc, "-shared", "-fPIC", "-Wl,-soname,libnccl.so.2", "-o", str(out), str(source)],
        check=True,
        capture_output=True,
    )
    return out


@pytest.fixture(scope="module")
def nodes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """node1..node3 with the same nvidia-nccl-cu12 wheel; node3's libnccl was replaced by
    another build (version 2.20.3), node2 has a net plugin beside it."""
    root = tmp_path_factory.mktemp("gate")
    good = libnccl(root / "good", "2.21.5+cuda12.4").read_bytes()
    files: dict[str, str | bytes] = {
        "nvidia/nccl/__init__.py": "",
        "nvidia/nccl/lib/libnccl.so.2": good,
    }
    wheel = make_wheel(
        root / "w",
        "nvidia-nccl-cu12",
        "2.21.5",
        files,
        top_level=("nvidia",),
    )
    out = {}
    for name in ("node1", "node2", "node3"):
        python = make_venv(root / name)
        pip_install(python, wheel)
        out[name] = python
    lib = site_packages(out["node3"]) / "nvidia" / "nccl" / "lib"
    (lib / "libnccl.so.2").write_bytes(libnccl(root / "old", "2.20.3+cuda12.4").read_bytes())
    plugin = site_packages(out["node2"]) / "nvidia" / "nccl" / "lib" / "libnccl-net.so"
    plugin.write_bytes(libnccl(root / "net", "2.21.5+cuda12.4", "int ncclNet_v8;\n").read_bytes())
    return out


def inventory(tmp_path: Path, nodes: dict[str, Path], members: str, server: bool) -> Path:
    text = '[defaults]\nwatch = []\nenv = ["NCCL_*", "GLOO_*", "CUDA_*"]\n'
    for name, python in nodes.items():
        text += f'[hosts.{name}]\npython = "{python}"\n'
    text += f'[groups.srv]\nhosts = "{members}"\nserver = {"true" if server else "false"}\n'
    path = tmp_path / "envsync.toml"
    path.write_text(text)
    return path


@pytest.mark.slow
def test_the_probe_reads_nccl_without_loading_it(
    capsys: pytest.CaptureFixture[str], nodes: dict[str, Path], tmp_path: Path
) -> None:
    inv = inventory(tmp_path, nodes, "node[1-3]", True)
    code, out, err = run(capsys, "--inventory", str(inv), "-q", "snapshot", "node[1-3]")
    assert code == 0, err
    snaps = {s["host"]: s for s in json.loads(out)["snapshots"]}
    lib = site_packages(nodes["node1"]) / "nvidia" / "nccl" / "lib" / "libnccl.so.2"
    assert snaps["node1"]["nccl"]["library"] == str(lib)
    assert snaps["node1"]["nccl"]["version"] == "2.21.5+cuda12.4"
    assert snaps["node1"]["nccl"]["soname"] == "libnccl.so.2"
    assert snaps["node3"]["nccl"]["version"] == "2.20.3+cuda12.4"
    assert snaps["node1"]["nccl"]["sha256"] != snaps["node3"]["nccl"]["sha256"]
    assert [p["name"] for p in snaps["node2"]["nccl"]["net_plugins"]] == ["libnccl-net.so"]
    assert snaps["node1"]["nccl"]["net_plugins"] == []


@pytest.mark.slow
def test_check_fails_a_server_whose_nodes_differ_though_each_passes_alone(
    capsys: pytest.CaptureFixture[str], nodes: dict[str, Path], tmp_path: Path
) -> None:
    lock = tmp_path / "node1.lock"
    inv = inventory(tmp_path, nodes, "node[1-3]", False)
    assert run(capsys, "--inventory", str(inv), "-q", "lock", "node1", "-o", str(lock))[0] == 0
    # not one server: each node against the lock is fine (NCCL's facts differ, not fatal)
    code, out, err = run(capsys, "--inventory", str(inv), "check", "--lock", str(lock), "srv")
    assert code == 0, out + err
    # one server: the nodes against one another
    inv = inventory(tmp_path, nodes, "node[1-3]", True)
    code, out, err = run(
        capsys, "--inventory", str(inv), "check", "--lock", str(lock), "srv", "--format", "json"
    )
    assert code == 1, err
    reports = json.loads(out)["reports"]
    gate = next(r for r in reports if r["target"] == "server srv")
    found = {f["subject"]: f for f in gate["findings"]}
    assert set(found) == {"srv: NCCL (version and library)", "srv: the NCCL net plugin"}
    nccl = found["srv: NCCL (version and library)"]
    assert nccl["severity"] == "fatal"
    assert (
        "node[1-2]: 2.21.5+cuda12.4" in nccl["reason"]
        and "node3: 2.20.3+cuda12.4" in nccl["reason"]
    )
    assert "hang" in nccl["reason"]
    assert "node2: libnccl-net.so" in found["srv: the NCCL net plugin"]["reason"]
    assert "server srv against one another (node[1-3]): 2 fatal" in err
    # one node of the server checked alone: nothing to compare it with, no gate
    code, _, err = run(capsys, "--inventory", str(inv), "-q", "check", "--lock", str(lock), "node3")
    assert code == 0, err


@pytest.mark.slow
def test_the_gate_in_prometheus_metrics(
    capsys: pytest.CaptureFixture[str], nodes: dict[str, Path], tmp_path: Path
) -> None:
    from prometheus_client.parser import text_string_to_metric_families

    lock = tmp_path / "node1.lock"
    inv = inventory(tmp_path, nodes, "node[1-3]", True)
    assert run(capsys, "--inventory", str(inv), "-q", "lock", "node1", "-o", str(lock))[0] == 0
    prom = tmp_path / "envsync.prom"
    code, out, err = run(
        capsys, "--inventory", str(inv), "-q", "check", "--lock", str(lock), "srv",
        "--format", "prometheus", "-o", str(prom),
    )  # fmt: skip
    assert code == 1 and out == "", err
    families = {f.name: f for f in text_string_to_metric_families(prom.read_text())}
    gate = {s.labels["severity"]: s.value for s in families["envsync_server_findings"].samples}
    assert gate["fatal"] == 2
    digests = {s.labels["host"]: s.labels["digest"] for s in families["envsync_host_info"].samples}
    assert len(set(digests.values())) == 3 and all(len(d) == 16 for d in digests.values())


def _snapshot(**changes: Any) -> Snapshot:
    snap = from_data(Snapshot, json.loads(DATA.read_text()))
    return replace(snap, **changes)


def test_torch_builds_drivers_and_variables_that_differ_are_fatal_for_the_server() -> None:
    base = _snapshot(env={"NCCL_SOCKET_IFNAME": "eth0", "CUDA_VISIBLE_DEVICES": "0,1"})
    assert isinstance(base.torch, Torch)
    other_build = replace(base.torch, git_version="0123456789ab")
    nodes = [
        node_facts("gpu001", base),
        node_facts("gpu002", base),
        node_facts("gpu003", replace(base, torch=other_build, env={"CUDA_VISIBLE_DEVICES": "0,1"})),
    ]
    report = server_report("sglang_a", nodes)
    found = {f.subject: f for f in report.findings}
    assert set(found) == {"sglang_a: torch (version and build)", "sglang_a: NCCL_SOCKET_IFNAME"}
    assert all(f.severity == "fatal" for f in report.findings)
    torch = found["sglang_a: torch (version and build)"]
    assert torch.reference == "2.11.0+cu130 (cuda 13.0, git 70d99e998b7d)"
    assert "gpu003: 2.11.0+cu130 (cuda 13.0, git 0123456789ab)" in torch.reason
    assert "gpu[001-002]: eth0; gpu003: unset" in found["sglang_a: NCCL_SOCKET_IFNAME"].reason
    # nodes that agree: nothing; one node alone: a note, no finding
    assert server_report("b", nodes[:2]).findings == ()
    assert server_report("c", nodes[:1]).notes


def test_python_and_the_engines_patch_set() -> None:
    base = _snapshot()
    sglang = base.distribution("sglang")
    assert sglang is not None and sglang.files is not None
    patched = replace(
        sglang,
        files={**sglang.files, "sglang/srt/server_args.py": "0" * 64},
        patched=("sglang/srt/server_args.py",),
    )
    other = replace(
        base, distributions=tuple(patched if d.name == "sglang" else d for d in base.distributions)
    )
    report = server_report("s", [node_facts("a", base), node_facts("b", other)])
    (finding,) = report.findings
    assert finding.subject == "s: the serving engine (version and patch set)"
    assert finding.kind == "version" and finding.reference != finding.target
    assert finding.target is not None and "sglang 0.5.11" in finding.target
    assert "(patch set " in finding.target and "a: sglang 0.5.11" in finding.reason
