"""A full disk under envsync's caches (here and on the host) or its state folder, on a real
tmpfs: the command's verdict is the one of a run without caches, a state that cannot be
recorded is said in one note, and no temporary file is left behind."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.figures import add
from tests.helpers import make_venv, make_wheel, pip_install
from tests.helpers import run_cli as run
from tests.repair.kill_bed import DISK_FULL, tmpfs

pytestmark = pytest.mark.slow


def fill(disk: Path) -> None:
    """Every byte of the disk taken (a file written until ENOSPC)."""
    with (disk / "filler").open("wb") as f:
        try:
            while True:
                f.write(b"\0" * (1 << 16))
                f.flush()
        except OSError as e:
            assert e.errno == 28, e


def leftovers(disk: Path) -> list[str]:
    return sorted(
        str(p.relative_to(disk))
        for p in disk.rglob("*")
        if p.name.endswith((".tmp", ".part", ".damaged")) or ".envsync-" in p.name
    )


@pytest.fixture
def hosts(tmp_path: Path) -> Path:
    for side, version in (("ref", "1.0"), ("tgt", "2.0")):
        wheel = make_wheel(tmp_path / f"w{side}", "svc", version, {"svc/__init__.py": ""})
        pip_install(make_venv(tmp_path / side), wheel)
    inv = tmp_path / "envsync.toml"
    inv.write_text(
        '[defaults]\nreference = "ref"\ntarget = "tgt"\nwatch = ["svc"]\n'
        f'[hosts.ref]\npython = "{tmp_path / "ref" / "bin" / "python"}"\n'
        f'[hosts.tgt]\npython = "{tmp_path / "tgt" / "bin" / "python"}"\n'
    )
    return inv


def test_a_full_disk_under_the_caches_changes_no_verdict(
    tmp_path: Path,
    hosts: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    diff = ("--inventory", str(hosts), "-q", "diff", "--format", "json")
    code, clean, err = run(capsys, *diff, "--no-cache")
    assert code == 1, err
    with tmpfs(tmp_path / "disk", "4m") as disk:
        monkeypatch.setenv("XDG_CACHE_HOME", str(disk))  # here, and on the (local) hosts
        fill(disk)
        for _ in range(2):  # the second run finds what the first could not write
            code, out, err = run(capsys, *diff)
            assert code == 1, err
            assert json.loads(out)["findings"] == json.loads(clean)["findings"]
            assert "Traceback" not in err
            assert leftovers(disk) == []
    add(DISK_FULL, "the caches' disk full (here and on the host): the same verdict, no temp")


def test_a_full_disk_under_the_state_folder_records_nothing_and_says_so(
    tmp_path: Path, hosts: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with tmpfs(tmp_path / "disk", "4m") as disk:
        (disk / "states").mkdir()
        fill(disk)
        lock = tmp_path / "tgt.lock"
        code, _, err = run(
            capsys,
            "--inventory",
            str(hosts),
            "lock",
            "tgt",
            "-o",
            str(lock),
            "--state-dir",
            str(disk / "states"),
        )
        assert code == 0, err
        assert lock.is_file()
        notes = [ln for ln in err.splitlines() if "its state was not recorded" in ln]
        assert len(notes) == 1 and "No space left on device" in notes[0], err
        assert leftovers(disk) == []
    add(DISK_FULL, "the state folder's disk full: the lock written, one note, no temp")
