"""The host side on the oldest Python envsync supports on hosts: a real 3.8 interpreter.

The probe and the agent run from the bundle under Python 3.8, as on a host that has only
that: a venv made with 3.8, a real wheel installed in it, a snapshot, a backup, a change,
and the restore that undoes it.
"""

from __future__ import annotations

import glob
import hashlib
import os
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from envsync.collect import ProbeOptions, collect
from envsync.collect.importcheck import check_imports
from envsync.model.environment import Interpreter
from envsync.runner.agent import Agent
from envsync.runner.local import LocalRunner
from envsync.sources.inventory import HostSpec
from tests.helpers import make_wheel, pip_install, site_packages

PKG = {"tiny/__init__.py": "from .mod import X\n", "tiny/mod.py": "X = 1\n"}
OPTIONS = ProbeOptions(roots=("tiny",), internal=("tiny",))


def python38() -> str:
    found = sorted(glob.glob(os.path.expanduser("~root/.pyenv/versions/3.8.*/bin/python3.8")))
    found += [p for p in ("/usr/bin/python3.8",) if os.path.exists(p)]
    if not found:
        pytest.skip("no Python 3.8 interpreter on this machine")
    return found[0]


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("py38")
    subprocess.run([python38(), "-m", "venv", "--without-pip", str(root / "venv")], check=True)
    python = root / "venv" / "bin" / "python"
    pip_install(python, make_wheel(root / "wheels", "tiny", "1.0", PKG))
    return python


def host(python: Path) -> HostSpec:
    return HostSpec(name="old", python=str(python), watch=("tiny",))


@pytest.mark.parametrize("cache_dir", [None, ""], ids=["cached copy", "from memory"])
def test_the_probe_runs_on_python_3_8(venv: Path, cache_dir: str | None) -> None:
    for _ in range(2):  # the second run reads the cached copy's bytecode, when there is one
        snap = collect(host(venv), LocalRunner("old"), replace(OPTIONS, cache_dir=cache_dir))
        assert isinstance(snap.interpreter, Interpreter), snap.interpreter
        assert snap.interpreter.version.startswith("3.8.")
        tiny = snap.distribution("tiny")
        assert tiny is not None and tiny.files is not None
        assert set(PKG) <= set(tiny.files)
        assert tiny.patched == ()
        assert snap.startup is not None and sorted(snap.startup.modules) == ["tiny", "tiny.mod"]
    bytecode = list(Path.home().glob(".cache/envsync/host-*/envsync_host/__pycache__/*-38.pyc"))
    assert bool(bytecode) is (cache_dir is None)


def test_the_agent_backs_up_and_restores_on_python_3_8(venv: Path) -> None:
    agent = Agent(host(venv), LocalRunner("old"))
    mod = site_packages(venv) / "tiny" / "mod.py"
    original = hashlib.sha256(mod.read_bytes()).hexdigest()
    made = agent.backup("py38-1", dists=["tiny"], files=[str(mod)])
    assert made.saved >= 3 and Path(made.path).is_dir()
    agent.journal("py38-1", "step 1 started: a local patch")
    mod.write_text("X = 2\n")
    patched = collect(host(venv), LocalRunner("old"), ProbeOptions(cache_dir=""))
    assert patched.distribution("tiny").patched == ("tiny/mod.py",)  # type: ignore[union-attr]  # distribution() is None for a name not installed; tiny is (else the test fails here)
    restored = agent.restore("py38-1")
    assert restored.dists == ("tiny",)
    assert hashlib.sha256(mod.read_bytes()).hexdigest() == original


def test_the_import_check_runs_on_python_3_8(venv: Path) -> None:
    outcome = check_imports(host(venv), LocalRunner("old"), ["tiny", "tiny.missing"])
    assert [(o.module, o.ok) for o in outcome] == [("tiny", True), ("tiny.missing", False)]
    assert outcome[1].exception == "ModuleNotFoundError"
