"""One change at a time per target: two real envsync processes against one target venv.

The lock lives in the environment (the agent's flock'ed file PREFIX/.envsync/lock), so the
same venv reached over SSH and locally, from another HOME or through a bind mount (a
container's view of it), is one lock.
"""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

import pytest

from tests.repair.conftest import (
    APPLY,
    envsync,
    inventory,
    lock_files,
    run,
    state,
    versions,
    wait_held,
    wait_journal,
)
from tests.sshd import SSHD

pytestmark = pytest.mark.slow


def test_a_second_change_is_refused_at_once_naming_the_holder(
    bed: dict[str, Path], target: Path, tmp_path: Path
) -> None:
    inv = inventory(bed, target, tmp_path / "inv.toml")
    first = envsync(inv, *APPLY)
    lock = wait_held()
    assert lock["who"]["pid"] == first.pid
    started = time.monotonic()
    for argv in (APPLY, ("rollback", "tgt")):
        second = envsync(inv, *argv)
        _, err = second.communicate(timeout=60)
        assert second.returncode == 6, err
        line = err.strip().splitlines()[-1]
        assert line.startswith(
            f"envsync: tgt: locked by another envsync: pid {first.pid} on {socket.gethostname()} "
            "(envsync repair --apply tgt) since 20"
        ), line
        assert "(Tip: wait for it to finish, or pass --wait SECONDS" in line
    assert time.monotonic() - started < 20  # refused at once, not after the first's steps
    _, err = first.communicate(timeout=300)
    assert first.returncode == 0, err
    assert versions(target)["xgrammar"] == "0.1.32"  # the first one's work stands whole
    assert lock_files() == []  # released on the way out


def test_wait_queues_behind_the_holder(bed: dict[str, Path], target: Path, tmp_path: Path) -> None:
    inv = inventory(bed, target, tmp_path / "inv.toml")
    before = state(target)
    first = envsync(inv, *APPLY)
    wait_held()
    second = envsync(inv, "-q", "rollback", "tgt", "--wait", "300")
    _, err = first.communicate(timeout=300)
    assert first.returncode == 0, err
    _, err = second.communicate(timeout=300)
    assert second.returncode == 0, err  # it ran after the first: it undid a whole apply
    assert state(target) == before
    assert lock_files() == []


def test_a_stale_lock_of_a_dead_process_is_taken_over_with_a_message(
    capsys: pytest.CaptureFixture[str], bed: dict[str, Path], target: Path, tmp_path: Path
) -> None:
    inv = inventory(bed, target, tmp_path / "inv.toml")
    before = state(target)
    first = envsync(inv, *APPLY)
    lock = wait_held()
    holder = lock["pid"]  # the hold process, on the host
    journal = wait_journal("step 1 started", target)
    first.kill()  # the command and its holder die together (a host crash, an OOM kill)
    os.kill(holder, 9)
    first.wait()
    assert lock_files()  # the dead holder's lock is still there
    # its step (pip, under the lock) may still run: rollback queues behind it, then takes over
    code, _, err = run(capsys, "--inventory", str(inv), "rollback", "tgt", "--wait", "120")
    assert code == 0, err
    assert state(target) == before
    assert "step 1 started" in journal.read_text()
    assert (
        f"tgt: took over a stale lock of pid {first.pid} on {socket.gethostname()} "
        "(envsync repair --apply tgt) since 20"
    ) in err
    assert "its holder is gone" in err
    assert lock_files() == []


def test_the_lock_is_released_when_the_command_fails(
    capsys: pytest.CaptureFixture[str], bed: dict[str, Path], target: Path, tmp_path: Path
) -> None:
    inv = inventory(bed, target, tmp_path / "inv.toml")
    req = tmp_path / "reference.txt"
    req.write_text("xgrammar==9.9.9\n")  # exists nowhere: the step fails, apply rolls back
    code, _, err = run(
        capsys, "--inventory", str(inv), "repair", str(req), "tgt", "--prefer", "fix", "--apply"
    )
    assert code == 4, err
    assert lock_files() == []
    code, _, err = run(capsys, "--inventory", str(inv), "rollback", "tgt")
    assert code == 0, err  # nobody holds it
    assert lock_files() == []


def test_the_lock_works_over_ssh(
    bed: dict[str, Path], target: Path, tmp_path: Path, sshd_bed: SSHD
) -> None:
    over_ssh = inventory(bed, target, tmp_path / "ssh.toml", ssh=sshd_bed)
    first = envsync(over_ssh, *APPLY)
    lock = wait_held()
    assert lock["who"]["pid"] == first.pid
    second = envsync(over_ssh, *APPLY)
    _, err = second.communicate(timeout=60)
    assert second.returncode == 6, err
    assert f"tgt: locked by another envsync: pid {first.pid} on {socket.gethostname()}" in err
    _, err = first.communicate(timeout=300)
    assert first.returncode == 0, err
    assert versions(target)["xgrammar"] == "0.1.32"
    assert lock_files() == []
