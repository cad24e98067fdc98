"""Lock files: golden output, round trips, determinism and bad input."""

from __future__ import annotations

import os
import sys
from dataclasses import replace
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from envsync.errors import LockError
from envsync.model.codec import to_data
from envsync.model.environment import GitState, Interpreter
from envsync.sources.locks.lockfile import dumps_lock, loads_lock
from envsync.sources.snapshot import load_snapshot

DATA = Path(__file__).resolve().parent.parent / "data"
SNAPSHOT = DATA / "snapshots" / "ct129.json"
GOLDEN = DATA / "golden" / "ct129.lock"


def test_lock_matches_the_golden_file() -> None:
    text = dumps_lock(load_snapshot(SNAPSHOT))
    if os.environ.get("UPDATE_GOLDEN"):
        GOLDEN.write_text(text)
    assert text == GOLDEN.read_text()


def test_lock_uses_pep751_keys() -> None:
    doc = tomllib.loads(GOLDEN.read_text())
    assert doc["lock-version"] == "1.0"
    assert doc["created-by"] == "envsync"
    by_name = {p["name"]: p for p in doc["packages"]}
    assert by_name["torch"]["version"] == "2.11.0+cu130"
    # A local wheel file is a path of the host, not a source: it stands with the machine's facts.
    assert "archive" not in by_name["torch"]
    paths = doc["tool"]["envsync"]["machine"]
    assert paths["distributions"]["torch"]["url"].startswith("file:///")
    assert by_name["xgrammar"]["vcs"] == {
        "type": "git",
        "url": "https://<redacted>@git.example/mlc-ai/xgrammar.git",
        "requested-revision": "v0.1.32",
        "commit-id": "4b3e9a1c0d2f",
    }
    assert set(by_name["sglang"]) == {"name", "version", "tool"}


def test_lock_round_trips_every_fact_but_transport() -> None:
    snap = load_snapshot(SNAPSHOT)
    back = loads_lock(dumps_lock(snap), "mem")
    assert back.source == "lock"
    expected = replace(snap, collected_at=None, duration_s=None, source="lock")
    assert to_data(back) == to_data(expected)


def test_lock_is_deterministic_whatever_the_collection_time() -> None:
    snap = load_snapshot(SNAPSHOT)
    later = replace(snap, collected_at="2027-01-01T00:00:00Z", duration_s=9.9)
    assert dumps_lock(snap) == dumps_lock(later)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('lock-version = "1.0"\n[[packages]\n', "corrupt lock file: .*line 2"),
        ("\x00\x01garbage", "corrupt lock file"),
        ('name = "x"\n', "not an envsync lock \\(no lock-version key\\)"),
        ('lock-version = "2.0"\n', "lock-version 2.0 is not supported .*reads 1.x"),
        ('lock-version = "1.0"\n', "the lock names no package with a version"),
        ('lock-version = "1.0"\n[tool]\nenvsync = 3\n', "\\[tool.envsync\\] must be a table"),
        (
            'lock-version = "1.0"\n[[packages]]\nname = "x"\n[tool.envsync]\nschema_version = 1\n',
            "packages\\[0\\] needs a name and a version",
        ),
        (
            'lock-version = "1.0"\n[tool.envsync]\nschema_version = 1\nhost = 3\n',
            "corrupt lock file: lock.host: expected a string",
        ),
        (
            'lock-version = "1.0"\n[tool.envsync]\nschema_version = 1\nhost = "h"\n',
            "missing key 'interpreter'",
        ),
    ],
)
def test_bad_locks_are_clear_errors(text: str, message: str) -> None:
    with pytest.raises(LockError, match=message):
        loads_lock(text, "env.lock")


def test_machine_facts_stand_apart_and_portable_leaves_them_out() -> None:
    from envsync.model.changes import differences

    snap = load_snapshot(SNAPSHOT)
    doc = tomllib.loads(dumps_lock(snap))
    # Every path of the host is in one table; nothing else in the lock names one.
    outside = dict(doc, tool={"envsync": {**doc["tool"]["envsync"], "machine": {}}})
    assert "/opt/" not in str(outside) and "file://" not in str(outside)
    portable = dumps_lock(snap, portable=True)
    assert "/opt/" not in portable and "/usr" not in portable and "file:///" not in portable
    back = loads_lock(portable, "portable.lock")
    assert isinstance(back.interpreter, Interpreter), back.interpreter
    assert back.interpreter.executable == ""
    assert back.distribution("torch").custom_build  # type: ignore[union-attr]  # distribution() is None for a name not installed; torch is (else the test fails here)
    # A portable lock compares with the snapshot it came from without a difference.
    assert differences(back, snap) == []


def test_a_standard_pylock_is_a_partial_reference() -> None:
    text = (
        'lock-version = "1.0"\ncreated-by = "uv"\n'
        '[[packages]]\nname = "Six"\nversion = "1.17.0"\nindex = "http://127.0.0.1/simple"\n'
        '[[packages]]\nname = "local-thing"\n[packages.directory]\npath = "."\n'
    )
    snap = loads_lock(text, "pylock.toml")
    assert snap.partial and snap.source == "lock"
    assert [(d.name, d.version) for d in snap.distributions] == [("six", "1.17.0")]


def test_checkouts_and_installers_are_facts_of_the_machine() -> None:
    from envsync.model.codec import from_data
    from envsync.model.environment import Snapshot

    data = to_data(load_snapshot(SNAPSHOT))
    for dist in data["distributions"]:
        if dist["name"] == "sglang":
            dist["source"] = {
                "mode": "editable-finder",
                "packages": {"sglang": "/home/me/sglang/python/sglang"},
                "git": {"root": "/home/me/sglang", "commit": "abc123", "modified": ["sglang/x.py"]},
            }
    data["installers"] = {"pip": "/opt/venv/lib/python3.11/site-packages/pip", "uv": "/usr/bin/uv"}
    snap = from_data(Snapshot, data)
    text = dumps_lock(snap)
    doc = tomllib.loads(text)
    outside = dict(doc, tool={"envsync": {**doc["tool"]["envsync"], "machine": {}}})
    assert "/home/me" not in str(outside) and "/usr/bin" not in str(outside)
    back = loads_lock(text, "env.lock")
    assert to_data(back) == to_data(
        replace(snap, collected_at=None, duration_s=None, source="lock")
    )
    portable = loads_lock(dumps_lock(snap, portable=True), "env.lock")
    sglang = portable.distribution("sglang")
    assert sglang is not None and sglang.source is not None
    assert dict(sglang.source.packages) == {}
    assert isinstance(sglang.source.git, GitState) and sglang.source.git.commit == "abc123"
    assert portable.installers is None
