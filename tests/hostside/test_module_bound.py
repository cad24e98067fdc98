"""One hostile module costs the probe a bounded amount (facts/files.py's MODULE_BOUND and
TOKEN_BOUND): a 2 GB file, a 10 MB one-line literal and a long `and` chain on the startup
path are each reported as not read, with why, and stay doors (never benign), while the
probe's peak memory stays under the documented bound."""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

import pytest

from envsync.classify.doors import open_doors
from envsync.classify.graph import GraphIndex
from envsync.classify.rules import Root
from envsync.collect import ProbeOptions, parse_probe_output, probe_argv, probe_source
from envsync.sources.inventory import HostSpec
from tests.figures import add, round_four
from tests.helpers import make_venv, site_packages

PEAK_MB = 600  # the probe's whole peak with every hostile module refused (its own: ~60 MB)


@pytest.fixture(scope="module")
def python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    python = make_venv(tmp_path_factory.mktemp("bound") / "venv")
    site = site_packages(python)
    svc = site / "svc"
    svc.mkdir()
    (svc / "__init__.py").write_text("")
    (svc / "main.py").write_text(
        "import svc.huge\nimport svc.dense\nimport svc.chain\nimport svc.fine\n"
    )
    with open(svc / "huge.py", "wb") as f:  # sparse: 2 GB of zeros, no disk
        f.truncate(2 << 30)
    (svc / "dense.py").write_text("x = [" + "1," * (5 << 20) + "]\n")  # 10 MB, one line
    (svc / "chain.py").write_text("x = (" + " and ".join(["a"] * 1_200_000) + ")\n")
    (svc / "fine.py").write_text("import json\nVALUE = 1\n")
    return python


def test_a_hostile_module_is_not_read_and_stays_a_door(python: Path) -> None:
    spec = HostSpec(name="t", python=str(python))
    options = ProbeOptions(roots=("svc.main",), internal=("svc",), cache_dir="")
    with tempfile.NamedTemporaryFile("r") as peak:
        done = subprocess.run(
            ["/usr/bin/time", "-f", "%M", "-o", peak.name, *probe_argv(spec, options)],
            input=probe_source(),
            capture_output=True,
            check=False,
            timeout=300,
        )
        peak_kb = int(peak.read().split()[-1])
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    graph = parse_probe_output("t", done.stdout).startup
    assert graph is not None
    modules = graph.modules
    assert modules["svc.fine"].kind == "source"
    errors = {name: modules[name].error or "" for name in ("svc.huge", "svc.dense", "svc.chain")}
    assert all(modules[n].kind == "error" for n in errors), errors
    assert errors["svc.huge"] == "not read: 2147483648 bytes, over the 16 MiB bound for one module"
    assert errors["svc.dense"].startswith("not read: ") and "marks of syntax" in errors["svc.dense"]
    assert "marks of syntax" in errors["svc.chain"]
    files = {n: modules[n].file or "" for n in errors}  # each said with its path
    assert all(files[n].endswith(n.split(".")[1] + ".py") for n in errors), files
    # each stays where envsync stops reading: what it might import is never called benign
    index = GraphIndex(graph)
    reached = index.reach([Root(module="svc.main", reason="the service", label="entry")])
    doors = {d.module: d.what for d in open_doors(graph, reached)}
    assert set(errors) <= set(doors) and "not read" in doors["svc.huge"]
    assert peak_kb < PEAK_MB * 1024, f"the probe peaked at {peak_kb // 1024} MB"
    add("hostile input", "modules past the bound on one module's cost, not read", len(errors))
    round_four("4 one hostile module: not read, the probe's peak bounded", len(errors))
