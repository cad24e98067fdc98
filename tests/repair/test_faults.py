"""Faults during an apply, each on real parts, each ending with the target as it was before
or fully applied, never between: signals at step boundaries and during pip, a full disk, a
broken or unreachable package index, the SSH connection cut, the reference gone, a damaged
backup. "As it was" is the package set and every watched file's hash, read afresh.
"""

from __future__ import annotations

import contextlib
import http.server
import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.figures import add
from tests.helpers import make_venv, pip_install, state_dir
from tests.project.test_secrets import leaked
from tests.repair.conftest import (
    APPLY,
    backups_of,
    env_hash,
    envsync,
    inventory,
    lock_files,
    run,
    state,
    versions,
    wait_held,
    wait_journal,
    wait_unlocked,
)
from tests.sshd import SSHD

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def applied(bed: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> object:
    """The state a full apply leaves a target in (measured once on a target of its own)."""
    root = tmp_path_factory.mktemp("applied")
    python = make_venv(root / "target venv", with_pip=True)
    pip_install(python, bed["svc"], bed["old"], bed["local"])
    inv = inventory(bed, python, root / "inv.toml")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HOME", str(root / "home"))
        proc = envsync(inv, *APPLY)
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        wait_unlocked()
    return state(python)


def survived(fault: str) -> None:
    add("faults injected and survived", fault)


def pip_running(target: Path) -> bool:
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        with contextlib.suppress(OSError):
            text = cmdline.read_bytes()
            if str(target).encode() in text and b"pip\x00install" in text:
                return True
    return False


@pytest.mark.parametrize(
    ("sig", "moment"),
    [
        (signal.SIGINT, "pip"),
        (signal.SIGTERM, "pip"),
        (signal.SIGINT, "step 1 done"),
        (signal.SIGTERM, "step 2 done"),
        (signal.SIGINT, "step 3 started"),
        (signal.SIGTERM, "step 3 done"),
    ],
)
def test_a_signal_at_a_step_boundary_or_during_pip_leaves_before_or_applied(
    bed: dict[str, Path],
    target: Path,
    tmp_path: Path,
    applied: object,
    sig: signal.Signals,
    moment: str,
) -> None:
    inv = inventory(bed, target, tmp_path / "inv.toml")
    before = state(target)
    proc = envsync(inv, *APPLY)
    if moment == "pip":
        deadline = time.monotonic() + 60
        while not pip_running(target) and time.monotonic() < deadline:
            time.sleep(0.005)
        assert pip_running(target)
    else:
        wait_journal(moment, target)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=300)
    wait_unlocked()
    after = state(target)
    if after == applied:  # the signal came after the last step: fully applied
        assert proc.returncode in (0, 130, 143), err
    else:
        # an interrupted apply rolls back and says so: exit 4 like any failed apply
        assert proc.returncode == 4, err
        line = err.strip().splitlines()[-1]
        assert "was interrupted; everything done before it was rolled back" in line, err
        assert after == before, err
        (backup,) = backups_of(target)
        assert "rolled back" in (backup / "journal.jsonl").read_text()
    assert lock_files() == []
    survived(f"{sig.name} at {moment}")


def test_sigkill_mid_step_then_rollback(bed: dict[str, Path], target: Path, tmp_path: Path) -> None:
    inv = inventory(bed, target, tmp_path / "inv.toml")
    before = state(target)
    proc = envsync(inv, *APPLY)
    wait_journal("step 2 started", target)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    code, _, err = run_rollback(inv)
    assert code == 0, err
    assert state(target) == before
    survived("SIGKILL mid-step, then rollback")


def run_rollback(inv: Path, *extra: str) -> tuple[int, str, str]:
    proc = envsync(inv, "-q", "rollback", "tgt", "--wait", "120", *extra)
    out, err = proc.communicate(timeout=300)
    return proc.returncode, out, err


# -- a full disk (a small tmpfs, as root) ---------------------------------------------------


@contextlib.contextmanager
def tmpfs(path: Path, size: str) -> Iterator[Path]:
    if os.geteuid() != 0 or not shutil.which("mount"):
        pytest.skip("a real full disk needs root to mount a tmpfs")
    path.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        if os.environ.get("CI"):
            pytest.fail(f"cannot mount a tmpfs: {done.stderr.strip()}")
        pytest.skip(f"cannot mount a tmpfs: {done.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def test_a_full_disk_while_backing_up_refuses_before_changing_anything(
    capsys: pytest.CaptureFixture[str], bed: dict[str, Path], target: Path, tmp_path: Path
) -> None:
    inv = inventory(bed, target, tmp_path / "inv.toml")
    before = state(target), env_hash(target)
    with tmpfs(state_dir(target) / "backups", "256k"):
        code, _, err = run(capsys, "--inventory", str(inv), "-q", *APPLY[1:])
        assert code == 4, err
        assert "no space for the backup" in err and "nothing was changed" in err
        assert backups_of(target) == []
    assert (state(target), env_hash(target)) == before
    assert lock_files() == []
    survived("disk full while backing up")


def test_a_full_disk_while_a_step_writes_is_restored(
    capsys: pytest.CaptureFixture[str], bed: dict[str, Path], tmp_path: Path
) -> None:
    with tmpfs(tmp_path / "disk", "64m") as disk:
        python = make_venv(disk / "target venv", with_pip=True)
        pip_install(python, bed["svc"], bed["old"], bed["local"])
        # envsync's state (the backup) on another disk: the environment's own is full
        (tmp_path / "state").mkdir()
        state_dir(python).symlink_to(tmp_path / "state")
        used = shutil.disk_usage(disk).used
        # room for a few hundred KB more: the new xgrammar (MBs) cannot be written
        subprocess.run(["mount", "-o", f"remount,size={used + 512 * 1024}", str(disk)], check=True)
        inv = inventory(bed, python, tmp_path / "inv.toml")
        before = state(python), env_hash(python)
        code, _, err = run(capsys, "--inventory", str(inv), "-q", *APPLY[1:])
        assert code == 4, err
        assert "rolled back" in err and "No space left on device" in err, err
        assert (state(python), env_hash(python)) == before
    assert lock_files() == []
    survived("disk full while a step writes")


# -- the package index: broken, unreachable ------------------------------------------------


@contextlib.contextmanager
def index(folder: Path) -> Iterator[int]:
    """A real HTTP server serving a simple-index folder on a free loopback port."""

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, directory=str(folder), **kwargs)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def simple_index(folder: Path, files: dict[str, Path | bytes]) -> Path:
    """folder/simple/<project>/index.html linking each wheel (bytes: a file of that content)."""
    for filename, content in files.items():
        project = filename.split("-")[0].replace("_", "-").lower()
        page = folder / "simple" / project
        page.mkdir(parents=True, exist_ok=True)
        wheel = page / filename
        if isinstance(content, bytes):
            wheel.write_bytes(content)
        else:
            shutil.copy(content, wheel)
        (page / "index.html").write_text(
            f'<html><body><a href="{filename}">{filename}</a></body></html>\n'
        )
    return folder


def with_index(inv: Path, bed: dict[str, Path], url: str) -> None:
    inv.write_text(
        inv.read_text().replace(
            f'pip_options = ["--no-index", "--find-links", "{bed["wheels"]}"]',
            f'pip_options = ["--index-url", "{url}", "--retries", "0", "--timeout", "3"]',
        )
    )


def test_an_index_serving_a_broken_wheel_is_rolled_back(
    capsys: pytest.CaptureFixture[str],
    bed: dict[str, Path],
    target: Path,
    tmp_path: Path,
    wheel_cache: Path,
) -> None:
    from tests.classify.test_sglang_wheels import fetch

    good = fetch(wheel_cache, "soundfile==0.13.1")
    broken = fetch(wheel_cache, "xgrammar==0.1.32")
    folder = simple_index(
        tmp_path / "index",
        {good.name: good, broken.name: broken.read_bytes()[: broken.stat().st_size // 3]},
    )
    inv = inventory(bed, target, tmp_path / "inv.toml")
    before = state(target)
    token = "ghp_0123456789abcdefghijABCDEFGHIJ0123"  # credentials in the index URL
    with index(folder) as port:
        with_index(inv, bed, f"http://envsync:{token}@127.0.0.1:{port}/simple")
        code, out, err = run(capsys, "--inventory", str(inv), *APPLY[1:])
    assert code == 4, err
    assert leaked([token], [state_dir(target)], out, err) == []
    line = err.strip().splitlines()[-1]
    assert "step 2 (pin: pin xgrammar==0.1.32" in line and "rolled back" in line
    assert state(target) == before  # step 1's soundfile, from the index, is gone again
    assert lock_files() == []
    survived("package index serving a broken wheel")


def test_an_unreachable_index_falls_back_to_the_reference_or_changes_nothing(
    capsys: pytest.CaptureFixture[str],
    bed: dict[str, Path],
    target: Path,
    tmp_path: Path,
    applied: object,
) -> None:
    with index(tmp_path) as port:
        pass  # the port is closed again: nothing listens there
    inv = inventory(bed, target, tmp_path / "inv.toml")
    with_index(inv, bed, f"http://127.0.0.1:{port}/simple")
    code, _, err = run(capsys, "--inventory", str(inv), "-q", *APPLY[1:])
    # the pins fall back to copying the reference's installed files: fully applied
    assert code == 0, err
    assert versions(target)["xgrammar"] == "0.1.32"
    assert lock_files() == []
    survived("package index unreachable")


# -- SSH: the connection cut; the reference gone --------------------------------------------


def sshd_processes(server: SSHD) -> list[int]:
    """The sshd listener and every sshd process under it (one per connection)."""
    assert server.proc is not None
    found, frontier = [server.proc.pid], [server.proc.pid]
    while frontier:
        parent = frontier.pop()
        for stat in Path("/proc").glob("[0-9]*/stat"):
            with contextlib.suppress(OSError, IndexError, ValueError):
                fields = stat.read_text().rsplit(")", 1)
                name = fields[0].split("(", 1)[1]
                ppid = int(fields[1].split()[1])
                pid = int(stat.parent.name)
                if ppid == parent and name.startswith("sshd"):
                    found.append(pid)
                    frontier.append(pid)
    return found


def cut(server: SSHD) -> None:
    for pid in reversed(sshd_processes(server)):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    assert server.proc is not None
    server.proc.wait()
    server.proc = None


@pytest.fixture
def own_sshd(tmp_path: Path) -> Iterator[SSHD]:
    from tests.sshd import available

    why = available()
    if why:
        if os.environ.get("CI"):
            pytest.fail(f"the SSH test bed must run in CI: {why}")
        pytest.skip(why)
    server = SSHD(tmp_path / "sshd").start()
    yield server
    server.stop()


def test_the_ssh_connection_cut_mid_apply_and_mid_rollback(
    bed: dict[str, Path], target: Path, tmp_path: Path, own_sshd: SSHD, applied: object
) -> None:
    inv = inventory(bed, target, tmp_path / "inv.toml", ssh=own_sshd)
    before = state(target)
    proc = envsync(inv, *APPLY)
    # the SSH user's home holds the journal: wait for the second pin to be under way
    deadline = time.monotonic() + 120
    while not pip_running(target) and time.monotonic() < deadline:
        time.sleep(0.005)
    time.sleep(0.2)
    cut(own_sshd)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 4, err
    assert "connection" in err and "rolling back ALSO failed" in err
    assert "restores an unfinished apply by itself" in err
    # the host, left alone, restored the unfinished apply itself
    wait_unlocked_everywhere()
    assert state(target) == before
    survived("SSH connection cut mid-apply")
    # now a full apply, and a rollback whose connection is cut as it runs
    own_sshd.start(own_sshd.port)
    proc = envsync(inv, *APPLY)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    assert state(target) == applied
    proc = envsync(inv, "-q", "rollback", "tgt")
    wait_held()
    cut(own_sshd)
    proc.communicate(timeout=300)
    wait_unlocked_everywhere()
    assert state(target) in (before, applied)  # the restore ran whole, or not at all
    own_sshd.start(own_sshd.port)
    code, _, err = run_rollback(inv)
    assert code == 0, err
    assert state(target) == before
    survived("SSH connection cut mid-rollback")


def wait_unlocked_everywhere(timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while lock_files() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert lock_files() == []


def test_the_reference_gone_during_sync_file_is_rolled_back(
    bed: dict[str, Path], target: Path, tmp_path: Path, own_sshd: SSHD
) -> None:
    inv = inventory(bed, target, tmp_path / "inv.toml")
    # the reference is reached over SSH; the target is local
    ref = f'[hosts.ref]\npython = "{bed["ref"]}"\n'
    lines = own_sshd.host_lines(tmp_path / "ref_known_hosts")
    inv.write_text(inv.read_text().replace(ref, ref + lines))
    before = state(target)
    proc = envsync(inv, *APPLY)
    wait_journal("step 1 started", target)  # collected already: the reference is needed at step 3
    cut(own_sshd)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 4, err
    line = err.strip().splitlines()[-1]
    assert "step 3 (sync-file" in line and "ref:" in line and "rolled back" in line
    assert state(target) == before
    assert lock_files() == []
    survived("reference gone during sync-file")


# -- a damaged backup ------------------------------------------------------------------------


def test_a_damaged_backup_is_refused_with_the_reason_and_nothing_touched(
    capsys: pytest.CaptureFixture[str], bed: dict[str, Path], target: Path, tmp_path: Path
) -> None:
    from tests.repair.conftest import tree_hash

    inv = inventory(bed, target, tmp_path / "inv.toml")
    code, _, err = run(capsys, "--inventory", str(inv), "-q", *APPLY[1:])
    assert code == 0, err
    (backup,) = backups_of(target)
    pristine = {p.name: p.read_bytes() for p in backup.iterdir()}
    applied_tree = tree_hash(target)

    def truncate(name: str) -> None:
        (backup / name).write_bytes(pristine[name][: len(pristine[name]) // 2])

    damages = {
        "files.tar is missing": lambda: (backup / "files.tar").unlink(),
        "files.tar differs from the manifest's sha256": lambda: truncate("files.tar"),
        "manifest.json is unreadable": lambda: truncate("manifest.json"),
    }
    for reason, damage in damages.items():
        damage()
        code, _, err = run(
            capsys, "--inventory", str(inv), "rollback", "tgt", "--backup", backup.name
        )
        assert code == 4, err
        line = err.strip().splitlines()[-1]
        assert f"backup {backup} is damaged: {reason}" in line, line
        assert "nothing was restored" in line
        assert tree_hash(target) == applied_tree
        assert lock_files() == []
        for name, data in pristine.items():
            (backup / name).write_bytes(data)
        survived(f"damaged backup ({reason})")
    # undamaged again, it restores
    code, _, err = run(capsys, "--inventory", str(inv), "-q", "rollback", "tgt")
    assert code == 0, err
    assert versions(target)["xgrammar"] == "0.1.10"
