"""A cache that others may have written (a CI cache restored from another job): with
`--no-cache`, the safe setting the docs name for it, nothing of it is read or written, and
a verdict is what it is with a clean cache, however the cache was poisoned."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from envsync.collect import wire
from tests.figures import held
from tests.helpers import REPO
from tests.helpers import run_cli as run

pytestmark = pytest.mark.slow


def poison_everything(home: Path) -> dict[Path, bytes]:
    """Every file of envsync's caches made to mislead: the host side's learned facts
    rewritten empty with a digest that matches (only a damaged entry is found by it), every
    kept verdict's findings emptied, every received graph emptied."""
    poisoned = {}
    for path in sorted((home / ".cache" / "envsync").rglob("*.json")):
        if "/host-" in str(path):
            continue  # the host side's own copy: checked file by file (test_bundle_cache)
        head, sep, _ = path.read_bytes().partition(b"\n")
        if path.parent.parent.name.startswith("facts-") and sep:
            key, _digest = json.loads(head)
            text = b"{}"
            data = json.dumps([key, hashlib.sha256(text).hexdigest()]).encode() + b"\n" + text
        elif path.name.startswith("verdict-"):
            entry = json.loads(path.read_text())
            entry["report"]["findings"] = []
            data = json.dumps(entry).encode()
        else:
            data = b"[]"
        path.write_bytes(data)
        poisoned[path] = data
    return poisoned


def test_under_no_cache_a_poisoned_cache_never_lowers_a_verdict(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, example_hosts: Path
) -> None:
    text = (REPO / "examples" / "envsync.toml").read_text()
    inv = tmp_path / "envsync.toml"
    inv.write_text(
        text.replace('".hosts/', f'"{example_hosts}/').replace(
            "{inventory_dir}", str(REPO / "examples")
        )
    )
    lock = tmp_path / "ct129.lock"
    code, _, err = run(capsys, "--inventory", str(inv), "-q", "lock", "ct129", "-o", str(lock))
    assert code == 0, err
    for command in (["diff"], ["check", "--lock", str(lock), "ct200"]):
        shutil.rmtree(Path.home() / ".cache" / "envsync")  # each command from a clean cache
        code, clean, err = run(capsys, "--inventory", str(inv), "-q", *command, "--format", "json")
        assert code == 1, err
        assert list(wire.folder().glob("verdict-*.json"))  # kept: the cache was used
        poisoned = poison_everything(Path.home())
        assert any(p.parent.parent.name.startswith("facts-") for p in poisoned)
        code, out, err = run(
            capsys, "--inventory", str(inv), "-q", *command, "--format", "json", "--no-cache"
        )
        assert code == 1, (out, err)
        assert json.loads(out)["findings"] == json.loads(clean)["findings"]
        assert {p: p.read_bytes() for p in poisoned} == poisoned  # not read back, not rewritten
        held("7 kept verdicts bound to their inputs")
