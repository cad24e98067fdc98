"""`envsync cache info|prune|clear`: envsync's caches on this machine, seen and bounded."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from envsync.collect import wire
from tests.figures import round_four
from tests.helpers import run_cli


def _fill(count: int, size: int) -> None:
    where = wire.folder()
    where.mkdir(parents=True, exist_ok=True)
    for i in range(count):
        (where / f"chunk-{i:032x}.json").write_bytes(b"x" * size)
    host = where.parent / "facts-0123456789abcdef-py311" / "ab"
    host.mkdir(parents=True)
    for i in range(count):
        (host / f"{i:038x}.json").write_bytes(b"y" * size)


def test_info_says_where_what_and_how_much(capsys: pytest.CaptureFixture[str]) -> None:
    _fill(4, 1000)
    code, out, _ = run_cli(capsys, "cache", "info", "--format", "json")
    assert code == 0
    caches = {c["name"]: c for c in json.loads(out)["caches"]}
    assert caches["received"]["path"] == str(wire.folder())
    assert (caches["received"]["entries"], caches["received"]["bytes"]) == (4, 4000)
    assert caches["host"]["kinds"] == [{"kind": "facts", "entries": 4, "bytes": 4000}]
    code, out, _ = run_cli(capsys, "cache", "info")
    assert code == 0 and f"received: {wire.folder()}: 4 entries" in out


def test_prune_keeps_the_newest_under_the_size(capsys: pytest.CaptureFixture[str]) -> None:
    _fill(10, 200_000)  # 2 MB each side
    code, _, err = run_cli(capsys, "cache", "prune", "--max-size", "1")
    assert code == 0 and "pruned" in err
    received = sum(p.stat().st_size for p in wire.folder().rglob("*") if p.is_file())
    everything = sum(p.stat().st_size for p in wire.folder().parent.rglob("*") if p.is_file())
    assert 0 < received <= 1 << 20 and 0 < everything - received <= 1 << 20


def test_clear_removes_the_caches_not_the_states(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    states = tmp_path / "states"
    states.mkdir()
    (states / "kept").write_text("a host's past")
    monkeypatch.setenv("ENVSYNC_STATE_DIR", str(states))
    _fill(3, 100)
    code, _, err = run_cli(capsys, "cache", "clear")
    assert code == 0 and "cleared" in err
    assert not wire.folder().parent.exists() and (states / "kept").exists()


def test_a_bad_action_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        run_cli(capsys, "cache", "purge")
    assert exit_.value.code == 2 and "purge" in capsys.readouterr().err


def test_a_cache_folder_that_is_a_link_is_never_cleared_through(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Another user's link at the cache's name: clear refuses in one line, and what the
    link points to stays whole."""
    elsewhere = tmp_path / "someone-elses"
    elsewhere.mkdir()
    (elsewhere / "precious").write_bytes(b"z" * 5000)
    root = wire.folder().parent
    root.parent.mkdir(parents=True, exist_ok=True)
    root.symlink_to(elsewhere)
    code, _, err = run_cli(capsys, "cache", "clear")
    assert code == 2 and err.count("\n") == 1, err
    assert f"{root} is a link to {elsewhere}" in err and "never clears through a link" in err
    assert (elsewhere / "precious").read_bytes() == b"z" * 5000
    round_four("1 prune and clear never follow a link out of the cache")


def test_a_received_folder_that_is_a_link_is_never_pruned_nor_counted(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    elsewhere = tmp_path / "root-only"
    elsewhere.mkdir()
    for i in range(5):
        (elsewhere / f"file{i}").write_bytes(b"r" * 100_000)
    _fill(3, 100_000)
    received = wire.folder()
    for entry in received.iterdir():
        entry.unlink()
    received.rmdir()
    received.symlink_to(elsewhere)
    code, _, err = run_cli(capsys, "cache", "prune", "--max-size", "0")
    assert code == 0 and "pruned 0.0 MB from received/" in err
    assert sorted(p.name for p in elsewhere.iterdir()) == [f"file{i}" for i in range(5)]
    kept = received.parent / "facts-0123456789abcdef-py311" / "cd"
    kept.mkdir(parents=True)
    (kept / "entry.json").write_bytes(b"y" * 200_000)
    code, _, err = run_cli(capsys, "cache", "clear")  # those facts, and the link itself
    assert code == 0 and "cleared 0.2 MB" in err, err  # never what the link points to
    assert not received.is_symlink() and len(list(elsewhere.iterdir())) == 5
    round_four("1 prune and clear never follow a link out of the cache", 2)
