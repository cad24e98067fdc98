"""The kill matrix: envsync, the host agent, the lock's holder and the installer (pip), each
SIGKILLed at several moments of an apply and of a rollback, on real venvs, wheels, pip and
processes; then a full disk under the environment while pip writes.

Every case ends byte-identical to before (every path of the venv: type, mode, content or
link target): at once where envsync said "rolled back", else after the user's next
`rollback`, which must succeed. A rollback runs no installer, so pip has no moments there
(one still alive when a rollback starts is ended first: test_kills.py).
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.helpers import make_venv, pip_install, site_packages, state_dir
from tests.repair.conftest import env_listing, envsync
from tests.repair.kill_bed import (
    APPLY,
    DISK_FULL,
    KILL_MATRIX,
    agent,
    cli,
    counted,
    in_pkg,
    inventory,
    kill,
    ktgt,
    kwheels,
    local_index,
    pip,
    quiet,
    requirements,
    rolled_back_to,
    tmpfs,
    wait_for,
)
from tests.repair.restore_bed import assert_same, last_line

__all__ = ["ktgt", "kwheels"]  # fixtures

pytestmark = pytest.mark.slow


def journal_says(target: Path, event: str) -> Callable[[], bool]:
    def found() -> bool:
        for journal in (state_dir(target) / "backups").glob("*/journal.jsonl"):
            if event in journal.read_text():
                return True
        return False

    return found


def apply_moment(target: Path, moment: str) -> Callable[[], object]:
    sp = site_packages(target)

    def alive(also: Callable[[], bool]) -> Callable[[], object]:
        return lambda: pip(target) is not None and also()

    match moment:
        case "backed up":
            return journal_says(target, "step 1 started")
        case "pip resolving":
            return alive(lambda: True)
        case "pip uninstalling":
            return alive(lambda: not (sp / "pkg-1.0.dist-info" / "METADATA").exists())
        case "pip writing":
            return alive(in_pkg(target, "pkg/m100.py"))
        case "pip compiling":
            return alive(lambda: any((sp / "pkg" / "__pycache__").glob("m*.pyc")))
        case "step 2":
            return alive(journal_says(target, "step 2 started"))
    raise AssertionError(moment)


PIP_MOMENTS = ["pip resolving", "pip uninstalling", "pip writing", "pip compiling", "step 2"]
APPLY_CASES = [
    *(("envsync", m) for m in ["backed up", *PIP_MOMENTS]),
    *(("agent", m) for m in PIP_MOMENTS),
    *(("pip", m) for m in PIP_MOMENTS),
    *(("holder", m) for m in ["backed up", "pip writing"]),
]


def victim(who: str, target: Path, proc: subprocess.Popen[str]) -> int | None:
    match who:
        case "envsync":
            return proc.pid
        case "agent":
            return agent(target, "run")
        case "pip":
            return pip(target)
        case "holder":
            return agent(target, "hold")
    raise AssertionError(who)


# One moment per process in every run (the whole matrix takes about half an hour on two
# cores: `pytest -m matrix` runs the rest, pyproject's addopts leave it out of the default).
EVERY_RUN = {
    ("envsync", "pip writing"),
    ("agent", "pip uninstalling"),
    ("pip", "pip writing"),
    ("holder", "backed up"),
    ("envsync", "swapping"),
    ("agent", "staging"),
    ("holder", "at once"),
}


def cases(table: list[tuple[str, str]]) -> list[object]:
    return [
        pytest.param(*case, marks=() if case in EVERY_RUN else pytest.mark.matrix) for case in table
    ]


@pytest.mark.parametrize(("who", "moment"), cases(APPLY_CASES))
def test_a_kill_during_an_apply(
    kwheels: dict[str, Path], ktgt: Path, tmp_path: Path, who: str, moment: str
) -> None:
    inv = inventory(tmp_path / "inv.toml", ktgt, local_index(kwheels))
    ref = requirements(tmp_path / "ref.txt", "newpkg==1.0", "pkg==2.0")
    before = env_listing(ktgt)
    proc = envsync(inv, *APPLY[:1], str(ref), "tgt", *APPLY[1:])
    wait_for(apply_moment(ktgt, moment), moment)
    kill(victim(who, ktgt, proc))
    _, err = proc.communicate(timeout=300)
    quiet(ktgt)
    if who != "envsync":
        assert proc.returncode == 4, err
        line = last_line(err)
        if "ALSO failed" not in line:
            assert "everything done before it was rolled back" in line, line
            assert_same(ktgt, before)  # what it said is true
    rolled_back_to(ktgt, inv, before)
    counted(KILL_MATRIX, f"apply: {who} at {moment}")


def rollback_moment(target: Path, moment: str) -> Callable[[], object]:
    sp = site_packages(target)
    data = sp / "pkg" / "d"
    match moment:
        case "at once":
            return lambda: agent(target, "restore")
        case "comparing":
            seen: list[float] = []

            def later() -> bool:
                if agent(target, "restore") and not seen:
                    seen.append(time.monotonic())
                return bool(seen) and time.monotonic() - seen[0] > 0.05

            return later
        case "staging":
            return lambda: data.is_dir() and any(data.glob("*.envsync-*.tmp"))
        case "swapping":
            return lambda: (data / "f000.txt").exists()
        case "removing":
            return lambda: (data / "f000.txt").exists() and not (sp / "pkg" / "m000.py").exists()
    raise AssertionError(moment)


ROLLBACK_MOMENTS = ["at once", "comparing", "staging", "swapping", "removing"]
ROLLBACK_CASES = [
    *(("envsync", m) for m in ROLLBACK_MOMENTS),
    *(("agent", m) for m in ROLLBACK_MOMENTS),
    *(("holder", m) for m in ["at once", "swapping"]),
]


@pytest.mark.parametrize(("who", "moment"), cases(ROLLBACK_CASES))
def test_a_kill_during_a_rollback(
    kwheels: dict[str, Path], ktgt: Path, tmp_path: Path, who: str, moment: str
) -> None:
    inv = inventory(tmp_path / "inv.toml", ktgt, local_index(kwheels))
    ref = requirements(tmp_path / "ref.txt", "newpkg==1.0", "pkg==2.0")
    before = env_listing(ktgt)
    code, err = cli(inv, *APPLY[:1], str(ref), "tgt", *APPLY[1:])
    assert code == 0, err
    proc = envsync(inv, "rollback", "tgt")
    wait_for(rollback_moment(ktgt, moment), moment)
    pid = {"envsync": proc.pid, "agent": agent(ktgt, "restore"), "holder": agent(ktgt, "hold")}
    kill(pid[who])
    _, err = proc.communicate(timeout=300)
    quiet(ktgt)
    if proc.returncode == 0:
        assert_same(ktgt, before)
    elif who == "agent":
        assert proc.returncode == 4, err
        assert "rerun" in last_line(err), err
    rolled_back_to(ktgt, inv, before)
    counted(KILL_MATRIX, f"rollback: {who} at {moment}")


# -- a full disk under the environment -------------------------------------------------------


def full_disk_target(kwheels: dict[str, Path], disk: Path, room: int) -> Path:
    python = make_venv(disk / "tgt", with_pip=True)
    pip_install(python, kwheels["pkg1"], kwheels["zzz"])
    used = shutil.disk_usage(disk).used
    subprocess.run(["mount", "-o", f"remount,size={used + room}", str(disk)], check=True)
    return python


def test_a_full_disk_while_pip_writes_inside_a_folder_is_rolled_back(
    kwheels: dict[str, Path], tmp_path: Path
) -> None:
    with tmpfs(tmp_path / "disk", "96m") as disk:
        python = make_venv(disk / "tgt", with_pip=True)
        pip_install(python, kwheels["pkg1"], kwheels["zzz"])
        (tmp_path / "state").mkdir()
        state_dir(python).symlink_to(tmp_path / "state")  # the backup on another disk
        used = shutil.disk_usage(disk).used
        subprocess.run(["mount", "-o", f"remount,size={used + (1 << 20)}", str(disk)], check=True)
        inv = inventory(tmp_path / "inv.toml", python, local_index(kwheels))
        ref = requirements(tmp_path / "ref.txt", "pkg==2.0")
        before = env_listing(python)
        code, err = cli(inv, *APPLY[:1], str(ref), "tgt", *APPLY[1:])
        assert code == 4, err
        assert "everything done before it was rolled back" in last_line(err), err
        assert_same(python, before)
    counted(DISK_FULL, "the environment's disk full while pip writes (state elsewhere)")


def test_a_full_disk_under_the_environment_and_its_state(
    kwheels: dict[str, Path], tmp_path: Path
) -> None:
    with tmpfs(tmp_path / "disk", "96m") as disk:
        python = full_disk_target(kwheels, disk, 2 << 20)
        inv = inventory(tmp_path / "inv.toml", python, local_index(kwheels))
        ref = requirements(tmp_path / "ref.txt", "newpkg==1.0", "pkg==2.0")
        before = env_listing(python)
        code, err = cli(inv, *APPLY[:1], str(ref), "tgt", *APPLY[1:])
        assert code == 4, err
        line = last_line(err)
        quiet(python)
        if "the backup failed" in line:
            assert "nothing was changed" in line, line  # refused before any change
            assert_same(python, before)
        else:
            if "ALSO failed" not in line:  # refused to finish: made room, rollback completes
                assert "everything done before it was rolled back" in line, line
                assert_same(python, before)
            subprocess.run(["mount", "-o", "remount,size=96m", str(disk)], check=True)
            rolled_back_to(python, inv, before)
    counted(DISK_FULL, "the disk under the environment and its state full while pip writes")
