"""The bed of the kill tests: wheels whose install takes long enough to be killed in its
middle, a fresh target venv per case, and the processes of an apply found in /proc.

pkg 1.0 holds 400 data files in pkg/d/; pkg 2.0 writes 400 modules into the same pkg/
folder (pip compiles each), so that "pip is writing inside an existing folder" is a moment
a test can wait for; newpkg 1.0 is a package the apply brings.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.figures import MATRIX_SECTIONS, add
from tests.helpers import make_venv, make_wheel, pip_install, site_packages
from tests.repair.conftest import env_listing, envsync
from tests.repair.restore_bed import NEW, assert_same

FILES = 400
PKG1 = {
    "pkg/__init__.py": "V = 1\n",
    **{f"pkg/d/f{i:03d}.txt": f"{i}\n" * 40 for i in range(FILES)},
}
PKG2 = {
    "pkg/__init__.py": "V = 2\n",
    **{f"pkg/m{i:03d}.py": f"X = {i}\n" + "def f(x):\n    return x\n" * 40 for i in range(FILES)},
}
APPLY = ("repair", "--only", "all", "--prefer", "fix", "--apply", "--no-deploy")


@pytest.fixture(scope="module")
def kwheels(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("kill-wheels")
    index = root / "index"
    return {
        "index": index,
        "pkg1": make_wheel(root / "w", "pkg", "1.0", PKG1),
        "pkg2": make_wheel(index, "pkg", "2.0", PKG2),
        "new": make_wheel(index, "newpkg", "1.0", NEW),
        "zzz": make_wheel(root / "w", "zzz", "1.0", {"zzz.py": ""}),
        "six": make_wheel(root / "hand", "six", "1.16.0", {"six.py": "PY3 = True\n"}),
        "host": make_wheel(
            root / "w",
            "host",
            "1.0",
            {"host/__init__.py": "", **{f"host/layers/l{i:02d}.py": "" for i in range(50)}},
        ),
    }


@pytest.fixture
def ktgt(kwheels: dict[str, Path], tmp_path: Path) -> Path:
    python = make_venv(tmp_path / "tgt", with_pip=True)
    pip_install(python, kwheels["pkg1"], kwheels["zzz"])
    return python


def inventory(path: Path, target: Path, pip_options: list[str]) -> Path:
    import json

    path.write_text(
        f'[defaults]\ntarget = "tgt"\n[hosts.tgt]\npython = "{target}"\n'
        f"pip_options = {json.dumps(pip_options)}\n"
    )
    return path


def local_index(kwheels: dict[str, Path]) -> list[str]:
    return ["--no-index", "--find-links", str(kwheels["index"])]


def requirements(path: Path, *lines: str) -> Path:
    path.write_text("".join(line + "\n" for line in lines))
    return path


def counted(section: str, case: str) -> None:
    add(section, case)


# Their figures: a whole run counts the cases of the default run, and adds those of the
# last `pytest -m matrix` run (tests/figures.py, docs/generated/kill-matrix.json).
KILL_MATRIX = MATRIX_SECTIONS[0]
DISK_FULL = MATRIX_SECTIONS[1]


# -- processes ----------------------------------------------------------------------------


def processes(target: Path) -> dict[int, bytes]:
    """{pid: cmdline} of every live process that names the target's venv (its agents, its
    pip); zombies are dead."""
    want = str(target.parent.parent).encode()
    out = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        with contextlib.suppress(OSError, IndexError):
            if (entry / "stat").read_bytes().rsplit(b")", 1)[1].split()[0] == b"Z":
                continue
            cmdline = (entry / "cmdline").read_bytes()
            if want in cmdline:
                out[int(entry.name)] = cmdline
    return out


def agent(target: Path, op: str) -> int | None:
    for pid, cmdline in processes(target).items():
        if f'"op": "{op}"'.encode() in cmdline:
            return pid
    return None


def pip(target: Path) -> int | None:
    for pid, cmdline in processes(target).items():
        if b"pip\0install" in cmdline:
            return pid
    return None


def wait_for(found: Callable[[], object], what: str, timeout: float = 120) -> object:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = found()
        if value:
            return value
        time.sleep(0.002)
    raise AssertionError(f"never saw {what}")


def quiet(target: Path, timeout: float = 120) -> None:
    """Until no process names the target (its agents and installers have all ended)."""
    wait_for(lambda: not processes(target), "the target's processes end", timeout)


def kill(pid: int | None) -> None:
    assert pid is not None
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


def cli(inv: Path, *argv: str, timeout: float = 600) -> tuple[int, str]:
    proc = envsync(inv, *argv)
    _, err = proc.communicate(timeout=timeout)
    return proc.returncode, err


def rolled_back_to(target: Path, inv: Path, before: dict[str, str]) -> str:
    """`rollback tgt` (a user's next command): it must end with the target as it was."""
    code, err = cli(inv, "rollback", "tgt", "--wait", "60")
    assert code == 0, err
    quiet(target)
    assert_same(target, before)
    assert list(target.parent.parent.rglob("*.envsync-*.tmp")) == []
    return err


@contextlib.contextmanager
def tmpfs(path: Path, size: str) -> Iterator[Path]:
    if os.geteuid() != 0:
        pytest.skip("a real full disk needs root to mount a tmpfs")
    path.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs: {done.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def in_pkg(target: Path, rel: str) -> Callable[[], bool]:
    sp = site_packages(target)
    return lambda: (sp / rel).exists()


__all__ = ["env_listing"]
