"""SIGTERM ends every command within a second, whatever it waits on: a host's probe, its
import check, its pip configuration (the plan of a repair). A command that changes
nothing is ended at once; one line, exit 143. Real processes, a real venv whose
interpreter hangs in the one program the case names."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.figures import held
from tests.helpers import REPO, children, make_venv, make_wheel, pip_install

pytestmark = pytest.mark.slow


def sleeping(pid: int) -> bool:
    """Whether a process under `pid` is the hanging program's `sleep`."""
    todo = [pid]
    while todo:
        here = todo.pop()
        with contextlib.suppress(OSError):
            if Path(f"/proc/{here}/cmdline").read_bytes().startswith(b"sleep\0"):
                return True
        todo += children(here)
    return False


def svc(tmp_path: Path) -> Path:
    """The service, which needs `dep` (on the reference alone: a fatal finding to plan)."""
    return make_wheel(tmp_path / "w", "svc", "1.0", {"svc/__init__.py": "import dep\n"})


def hanging_python(tmp_path: Path, program: str) -> Path:
    """The venv's interpreter, but for the host-side program `program`: that one hangs."""
    real = make_venv(tmp_path / "venv")
    pip_install(real, svc(tmp_path))
    wrapper = tmp_path / "venv" / "bin" / "hanging"
    wrapper.write_text(
        "#!/bin/sh\n"
        f'case "$*" in *\'"program":"{program}"\'*) exec sleep 60;; esac\n'
        f'exec {real} "$@"\n'
    )
    wrapper.chmod(0o755)
    return wrapper


CASES = {
    "diff --import-check (the import check)": ("importcheck", ["diff", "--import-check"]),
    "lock --format pylock (the host's pip configuration)": (
        "pipconfig",
        ["lock", "tgt", "--format", "pylock"],
    ),
}


@pytest.mark.parametrize("case", CASES)
def test_sigterm_ends_a_command_waiting_on_a_host_within_a_second(
    tmp_path: Path, case: str
) -> None:
    program, argv = CASES[case]
    python = hanging_python(tmp_path, program)
    ref = make_venv(tmp_path / "ref")
    pip_install(ref, svc(tmp_path), make_wheel(tmp_path / "w2", "dep", "1.0", {"dep.py": ""}))
    inv = tmp_path / "envsync.toml"
    inv.write_text(
        '[defaults]\nreference = "ref"\ntarget = "tgt"\nwatch = []\n'
        '[service]\ncommand = ["{python}", "-m", "svc"]\n'
        f'[hosts.ref]\npython = "{ref}"\n[hosts.tgt]\npython = "{python}"\n'
    )
    env = {**os.environ, "PYTHONPATH": str(REPO), "ENVSYNC_STATE_DIR": str(tmp_path / "states")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "envsync", "--inventory", str(inv), *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not sleeping(proc.pid) and proc.poll() is None:
        time.sleep(0.05)
    assert proc.poll() is None, proc.communicate()
    assert sleeping(proc.pid), "the program never started"
    time.sleep(0.3)
    sent = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    try:
        _, err = proc.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        pytest.fail("envsync did not end within 20 s of SIGTERM")
    took = time.monotonic() - sent
    assert proc.returncode == 143 and "envsync: terminated" in err, err
    assert "Traceback" not in err, err
    assert took < 1.0, f"{took:.2f}s"
    assert not sleeping(proc.pid)
    held("14 SIGTERM ends a command within a second")
