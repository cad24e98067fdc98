"""Restores are transactions: real venvs, real pip, real signals, a real full disk.

Each case replays a way a repair used to do harm and checks the whole environment (every
path under the venv: its type, mode, content or link target) before and after:

- RECORD lines that name a folder (`./`, `pkg/`): the pin fails, and its rollback, or the
  copy from the reference, touches no file but the distribution's own;
- a patched file that is a link, a stale second .dist-info and the file it owns;
- a package the apply brought: its rollback leaves no empty folder that would import;
- the agent's restore killed (SIGKILL) at several moments, envsync terminated mid-rollback,
  a disk that fills between apply and rollback, an immutable file: each ends restored, or
  with nothing restored and one line that says so, and a rerun of `rollback` completes it;
- a 1.5 GB file restored by an agent that may use 512 MB of memory.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.helpers import make_venv, make_wheel, pip_install, site_packages
from tests.repair.conftest import env_hash, env_listing, envsync
from tests.repair.restore_bed import (
    APPLY,
    add_record_lines,
    applied,
    assert_same,
    cli,
    inventory,
    last_line,
    replayed,
    requirements,
    tgt,
    wheels,
)

__all__ = ["tgt", "wheels"]  # fixtures

pytestmark = pytest.mark.slow

# -- RECORD lines that name folders -----------------------------------------------------


def test_a_pin_over_a_record_that_names_folders_fails_and_rolls_back_to_the_byte(
    wheels: dict[str, Path], tgt: Path, tmp_path: Path
) -> None:
    add_record_lines(tgt, "pkg-1.0.dist-info", "./", "pkg/", "pkg/data/")
    inv = inventory(tmp_path / "inv.toml", tgt, wheels["index"])
    ref = requirements(tmp_path / "ref.txt", "pkg==2.0", "newpkg==1.0")
    before = env_listing(tgt)
    code, err = cli(inv, *APPLY[:1], str(ref), "tgt", *APPLY[1:])
    assert code == 4, err
    line = last_line(err)
    assert "pin pkg==2.0" in line and "everything done before it was rolled back" in line
    assert_same(tgt, before)  # pip, setuptools, every other entry of site-packages kept
    replayed("RECORD naming ./ and pkg/: failed pin rolled back")


def test_a_copy_from_the_reference_over_records_that_name_folders_moves_only_files(
    wheels: dict[str, Path], tgt: Path, tmp_path: Path
) -> None:
    ref = make_venv(tmp_path / "ref", with_pip=True)
    pip_install(ref, wheels["pkg2"], wheels["zzz"])
    add_record_lines(ref, "pkg-2.0.dist-info", "./", "pkg/")
    add_record_lines(tgt, "pkg-1.0.dist-info", "pkg/", "./")
    local = site_packages(tgt) / "pkg" / "local_notes.txt"  # in the folder, in no RECORD
    local.write_text("kept\n")
    # the index has no pkg 2.0: the pin falls back to the reference's installed files
    inv = inventory(tmp_path / "inv.toml", tgt, wheels["empty"], reference=ref)
    before = env_listing(tgt)
    entries = sorted(p.name for p in site_packages(tgt).iterdir())
    code, err = cli(inv, *APPLY)
    assert code == 0, err
    sp = site_packages(tgt)
    assert sorted(p.name for p in sp.iterdir()) == sorted(
        [e for e in entries if e != "pkg-1.0.dist-info"] + ["pkg-2.0.dist-info"]
    )
    files = sorted(
        str(p.relative_to(sp))
        for p in (sp / "pkg").rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    )
    assert files == ["pkg/__init__.py", "pkg/b.py", "pkg/local_notes.txt", "pkg/sub/__init__.py"]
    code, err = cli(inv, "rollback", "tgt")
    assert code == 0, err
    assert_same(tgt, before)
    replayed("RECORD naming ./ and pkg/: copy from the reference, then rollback")


# -- links, stale metadata, folders made ---------------------------------------------------


def test_a_patched_file_that_is_a_link_comes_back_as_the_link(
    wheels: dict[str, Path], tgt: Path, tmp_path: Path
) -> None:
    ref = make_venv(tmp_path / "ref", with_pip=True)
    pip_install(ref, wheels["pkg1"], wheels["zzz"])
    (site_packages(ref) / "pkg" / "a.py").write_text("A = 2  # the reference's patch\n")
    link = site_packages(tgt) / "pkg" / "a.py"
    link.unlink()
    link.symlink_to("data/f0001.txt")  # a link inside the package, in place of the file
    inv = inventory(tmp_path / "inv.toml", tgt, wheels["index"], reference=ref)
    inv.write_text(inv.read_text().replace('target = "tgt"\n', 'target = "tgt"\nwatch = ["pkg"]\n'))
    before = env_listing(tgt)
    assert before[str(link.relative_to(tgt.parent.parent))] == "-> data/f0001.txt"
    code, err = cli(inv, *APPLY)
    assert code == 0, err
    assert not link.is_symlink() and "the reference's patch" in link.read_text()
    code, err = cli(inv, "rollback", "tgt")
    assert code == 0, err
    assert_same(tgt, before)
    replayed("a patched file that is a link")


def test_a_stale_second_dist_info_and_its_file_survive_apply_and_rollback(
    wheels: dict[str, Path], tgt: Path, tmp_path: Path
) -> None:
    sp = site_packages(tgt)
    stale = sp / "pkg-0.9.dist-info"
    stale.mkdir()
    (stale / "METADATA").write_text("Metadata-Version: 2.1\nName: pkg\nVersion: 0.9\n")
    (sp / "pkg_old.py").write_text("OLD = 1\n")
    (stale / "RECORD").write_text("pkg_old.py,,\npkg-0.9.dist-info/METADATA,,\n")
    inv = inventory(tmp_path / "inv.toml", tgt, wheels["index"])
    ref = requirements(tmp_path / "ref.txt", "pkg==2.0")
    before = env_listing(tgt)
    code, err = cli(inv, *APPLY[:1], str(ref), "tgt", *APPLY[1:])
    assert code == 0, err
    code, err = cli(inv, "rollback", "tgt")
    assert code == 0, err
    assert_same(tgt, before)
    assert (sp / "pkg_old.py").read_text() == "OLD = 1\n"
    replayed("a stale second .dist-info and its file")


def test_a_package_the_apply_brought_leaves_no_folder_that_would_import(
    wheels: dict[str, Path], tgt: Path, tmp_path: Path
) -> None:
    inv = inventory(tmp_path / "inv.toml", tgt, wheels["index"])
    ref = requirements(tmp_path / "ref.txt", "newpkg==1.0", "pkg==2.0", "zzz==9.9")
    before = env_listing(tgt)

    def imports() -> int:
        return subprocess.run(
            [str(tgt), "-c", "import newpkg.core"], capture_output=True
        ).returncode

    assert imports() != 0
    code, err = cli(inv, *APPLY[:1], str(ref), "tgt", *APPLY[1:])  # zzz 9.9: nowhere
    assert code == 4, err
    assert "pin zzz==9.9" in last_line(err) and "rolled back" in last_line(err)
    assert_same(tgt, before)
    assert not (site_packages(tgt) / "newpkg").exists()
    assert imports() != 0  # no empty namespace package left behind
    # and once applied whole, then rolled back (the folders pip made, with their bytecode)
    ref.write_text("newpkg==1.0\npkg==2.0\n")
    code, err = cli(inv, *APPLY[:1], str(ref), "tgt", *APPLY[1:])
    assert code == 0, err
    assert imports() == 0
    code, err = cli(inv, "rollback", "tgt")
    assert code == 0, err
    assert_same(tgt, before)
    assert imports() != 0
    replayed("folders an apply made (no namespace skeleton)")


# -- the restore interrupted -----------------------------------------------------------------


def restoring_agent(tgt: Path, timeout: float = 60) -> int:
    """The pid of the agent process running a restore on `tgt` (this test's own: the
    suite runs on several workers, and another test's restore is not this one's to kill)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
            with contextlib.suppress(OSError):
                text = cmdline.read_bytes()
                if b'"op": "restore"' in text and str(tgt).encode() in text:
                    return int(cmdline.parent.name)
        time.sleep(0.002)
    raise AssertionError("no agent ran a restore")


def wait_for(found: Callable[[], object], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not found() and time.monotonic() < deadline:
        time.sleep(0.001)


@pytest.mark.parametrize("moment", ["at once", "comparing", "staging", "swapping"])
def test_the_agents_restore_killed_at_any_moment_is_completed_by_a_rerun(
    wheels: dict[str, Path], tgt: Path, tmp_path: Path, moment: str
) -> None:
    inv = inventory(tmp_path / "inv.toml", tgt, wheels["index"])
    ref = requirements(tmp_path / "ref.txt", "newpkg==1.0", "pkg==2.0")
    before = env_listing(tgt)
    applied(inv, ref)
    after = env_listing(tgt)
    data = site_packages(tgt) / "pkg" / "data"  # pkg 1.0's 1500 files, gone since the apply
    proc = envsync(inv, "rollback", "tgt")
    pid = restoring_agent(tgt)
    if moment == "comparing":
        time.sleep(0.3)
    elif moment == "staging":
        wait_for(lambda: data.is_dir() and any(data.glob("*.envsync-*.tmp")))
    elif moment == "swapping":
        wait_for(lambda: (data / "f0000.txt").exists())
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    _, err = proc.communicate(timeout=300)
    between = env_listing(tgt) not in (before, after)
    if proc.returncode == 0:  # it had finished before the kill
        assert_same(tgt, before)
    else:
        assert proc.returncode == 4, err
        line = last_line(err)
        assert "the restore ended before it finished" in line and "rerun" in line, line
    code, err = cli(inv, "rollback", "tgt")
    assert code == 0, err
    assert_same(tgt, before)
    assert list(tgt.parent.parent.rglob("*.envsync-*.tmp")) == []
    replayed(f"agent's restore SIGKILLed ({moment}{', mid-change' if between else ''}), rerun")


def test_a_manifest_write_a_killed_agent_left_is_swept_by_the_rollback(
    wheels: dict[str, Path], tgt: Path, tmp_path: Path
) -> None:
    """The agent killed while it wrote the backup's manifest (as the run above can kill
    it: CI did) leaves the manifest's temporary file; the rollback removes it, since its
    process is gone, and a live one's it leaves alone."""
    inv = inventory(tmp_path / "inv.toml", tgt, wheels["index"])
    ref = requirements(tmp_path / "ref.txt", "newpkg==1.0", "pkg==2.0")
    before = env_listing(tgt)
    applied(inv, ref)
    (backup,) = (tgt.parent.parent / ".envsync" / "backups").iterdir()
    dead = subprocess.Popen(["true"])
    dead.wait()
    left = backup / f"manifest.json.envsync-{dead.pid}.tmp"
    left.write_text('{"state": "restor')
    alive = backup / f"manifest.json.envsync-{os.getpid()}.tmp"  # this test's: alive
    alive.write_text("{}")
    code, err = cli(inv, "rollback", "tgt")
    assert code == 0, err
    assert_same(tgt, before)
    assert not left.exists() and alive.exists()
    alive.unlink()


def test_envsync_terminated_mid_rollback_then_rerun(
    wheels: dict[str, Path], tgt: Path, tmp_path: Path
) -> None:
    inv = inventory(tmp_path / "inv.toml", tgt, wheels["index"])
    ref = requirements(tmp_path / "ref.txt", "newpkg==1.0", "pkg==2.0")
    before = env_listing(tgt)
    applied(inv, ref)
    proc = envsync(inv, "rollback", "tgt")
    restoring_agent(tgt)
    time.sleep(0.5)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode in (0, 143), err
    assert "Traceback" not in err
    code, err = cli(inv, "rollback", "tgt")
    assert code == 0, err
    assert_same(tgt, before)
    replayed("envsync SIGTERMed mid-rollback, then rerun")


@contextlib.contextmanager
def tmpfs(path: Path, size: str) -> Iterator[Path]:
    if os.geteuid() != 0 or not shutil.which("mount"):
        pytest.skip("a real full disk needs root to mount a tmpfs")
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], check=True)
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def test_a_disk_that_fills_between_apply_and_rollback(
    wheels: dict[str, Path], tmp_path: Path
) -> None:
    with tmpfs(tmp_path / "disk", "96m") as disk:
        python = make_venv(disk / "tgt", with_pip=True)
        pip_install(python, wheels["pkg1"], wheels["zzz"])
        inv = inventory(tmp_path / "inv.toml", python, wheels["index"])
        ref = requirements(tmp_path / "ref.txt", "newpkg==1.0", "pkg==2.0")
        before = env_listing(python)
        applied(inv, ref)
        after = env_listing(python)
        filler = disk / "filler"
        with filler.open("wb") as f, contextlib.suppress(OSError):
            while True:
                f.write(b"\0" * (1 << 16))
                f.flush()
        # full to the last byte: not even the lock can be taken; nothing changes
        code, err = cli(inv, "rollback", "tgt")
        assert code == 4, err
        line = last_line(err)
        assert "No space left on device" in line and "nothing was changed" in line, line
        assert_same(python, after)
        # room for the lock and the journal, not for the files: refused before staging
        os.truncate(filler, filler.stat().st_size - (256 << 10))
        code, err = cli(inv, "rollback", "tgt")
        assert code == 4, err
        line = last_line(err)
        assert "no space to restore" in line and "nothing was restored" in line, line
        assert_same(python, after)
        filler.unlink()
        code, err = cli(inv, "rollback", "tgt")
        assert code == 0, err
        assert_same(python, before)
    replayed("disk full between apply and rollback: nothing restored, then rerun")


def test_an_immutable_file_refuses_the_restore_before_anything_changes(
    wheels: dict[str, Path], tgt: Path, tmp_path: Path
) -> None:
    if os.geteuid() != 0 or not shutil.which("chattr"):
        pytest.skip("chattr +i needs root")
    inv = inventory(tmp_path / "inv.toml", tgt, wheels["index"])
    ref = requirements(tmp_path / "ref.txt", "newpkg==1.0", "pkg==2.0")
    before = env_listing(tgt)
    applied(inv, ref)
    after = env_listing(tgt)
    frozen = site_packages(tgt) / "pkg" / "b.py"  # made by the apply: the restore removes it
    if subprocess.run(["chattr", "+i", str(frozen)], capture_output=True).returncode != 0:
        pytest.skip("this file system has no immutable flag")
    try:
        code, err = cli(inv, "rollback", "tgt")
        assert code == 4, err
        line = last_line(err)
        assert f"{frozen} is immutable" in line and "nothing was restored" in line, line
        assert_same(tgt, after)
    finally:
        subprocess.run(["chattr", "-i", str(frozen)], check=True)
    code, err = cli(inv, "rollback", "tgt")
    assert code == 0, err
    assert_same(tgt, before)
    replayed("an immutable file: nothing restored, then rerun")


# -- bounded memory ---------------------------------------------------------------------------


def test_a_large_file_is_restored_in_bounded_memory(tmp_path: Path) -> None:
    """A 1.5 GB file, backed up and restored by an agent whose address space is 512 MB."""
    from envsync.runner.agent import Agent
    from envsync.runner.local import LocalRunner
    from envsync.sources.inventory import HostSpec

    size = 1536 << 20
    if shutil.disk_usage(tmp_path).free < 3 * size + (1 << 30):
        pytest.skip("needs 5.5 GB of free disk")
    python = make_venv(tmp_path / "venv")
    pip_install(python, make_wheel(tmp_path / "w", "big", "1.0", {"big/__init__.py": ""}))
    blob = site_packages(python) / "big" / "weights.bin"
    with blob.open("wb") as f:  # sparse on disk; every byte of it read and written below
        f.seek(size - 1)
        f.write(b"\1")
    limited = tmp_path / "python-512m"
    limited.write_text(f'#!/bin/sh\nulimit -v {512 * 1024}\nexec "{python}" "$@"\n')
    limited.chmod(0o755)
    agent = Agent(HostSpec(name="t", python=str(limited)), LocalRunner("t"))
    before = env_hash(python)
    try:
        agent.backup("big1", dists=["big"], files=[str(blob)])
        blob.write_bytes(b"a new version of the weights\n")
        agent.journal("big1", "applied", state="applied")
        done = agent.restore("big1")
        assert done.changed >= 1
        assert blob.stat().st_size == size
        assert env_hash(python) == before
    finally:  # 3 GB written (the restored file and the backup's tar are not sparse)
        blob.unlink(missing_ok=True)
        shutil.rmtree(tmp_path / "venv" / ".envsync", ignore_errors=True)
    replayed("a 1.5 GB file restored under a 512 MB address-space limit")
