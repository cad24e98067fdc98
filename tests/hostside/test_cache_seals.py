"""Nothing a host keeps can lower a verdict: every file a host's caches keep is sealed.

envsync hands the host side a key for the run (derived from its machine's own, never on
the host's disk); each cache file ends with an HMAC of its text under it. A forger on the
host can make any inner digest again, but not the seal: whatever they write is dropped and
learned again, and the answer is the one a run without caches gives. A real venv with the
real rich wheel; the probe runs for real, through the bootstrap, as on any host.
"""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

import pytest

from envsync.hostside.caches.store import entry_text
from envsync.hostside.shared import SEAL_MARK, SEAL_SIZE
from tests.collect.test_store import OPTIONS, _graph, _rich_venv
from tests.figures import round_four
from tests.helpers import OLD_NS, site_packages

pytestmark = pytest.mark.slow


@pytest.fixture
def venv(tmp_path: Path, wheel_cache: Path) -> Path:
    return _rich_venv(tmp_path / "venv", wheel_cache)  # rich, and svc.main importing it


def _kept() -> list[Path]:
    """Every file the host's caches keep (not the host side's copy, not envsync's own)."""
    base = Path.home() / ".cache" / "envsync"
    return sorted(
        p
        for p in base.rglob("*")
        if p.is_file()
        and not p.relative_to(base).parts[0].startswith(("host-", "received"))
        and "__pycache__" not in p.parts
    )


def _kind(path: Path) -> str:
    parts = path.relative_to(Path.home() / ".cache" / "envsync").parts
    return parts[0].split("-")[0] + ("/packs" if "packs" in parts else "")


def test_every_kept_file_is_sealed_and_one_unsealed_is_never_used(venv: Path) -> None:
    clean = _graph(venv, replace(OPTIONS, cache_dir=""))  # no cache: the truth
    first = _graph(venv)
    kept = _kept()
    kinds = {_kind(p) for p in kept}
    assert {"facts", "graph", "chunks", "hashes", "native"} <= kinds, kinds
    for path in kept:
        data = path.read_bytes()
        if _kind(path) == "chunks":  # named by its text's digest, only by sealed files
            path.write_bytes(data.replace(b'"kind"', b'"kinD"', 1))  # no longer its digest
            continue
        assert data[-SEAL_SIZE:].startswith(SEAL_MARK), path
        # the forger's best: the text as it was, each inner digest right, no seal they can make
        path.write_bytes(data[:-SEAL_SIZE])
    again = _graph(venv)
    assert again.modules == clean.modules == first.modules
    assert (again.parsed, again.cached) == (clean.parsed, 0)  # every module learned again
    assert _graph(venv).modules == clean.modules
    unsealed = [
        p
        for p in _kept()
        if _kind(p) != "chunks" and not p.read_bytes()[-SEAL_SIZE:].startswith(SEAL_MARK)
    ]
    assert unsealed == [], unsealed
    round_four("3 host cache files unsealed: dropped, learned again", len(kept))


def test_a_forged_entry_with_its_digest_made_again_is_never_used(venv: Path) -> None:
    """The issue's forgery: svc.main's facts say it imports nothing, the entry's digest of
    its own text made again, the seal of the real entry kept (a forger cannot make it)."""
    first = _graph(venv)
    assert "rich.table" in first.modules
    forged = 0
    for path in _kept():
        data = path.read_bytes()
        text = data[:-SEAL_SIZE]
        head, _, body = text.partition(b"\n")
        if not head.startswith(b"[") or b'"imports"' not in body:
            continue
        key = json.loads(head)[0]
        if ":svc.main:" not in key:  # the key: the content's sha256, the module, how it runs
            continue
        value = json.loads(body)
        value["imports"] = []
        path.write_bytes(entry_text(key, value) + data[-SEAL_SIZE:])
        forged += 1
    assert forged >= 1
    for path in _kept():  # the graph kept would answer first: gone, as after a prune
        if _kind(path) in ("graph", "chunks"):
            path.unlink()
    again = _graph(venv)
    assert "rich.table" in again.modules and again.modules == first.modules
    round_four("3 a forged facts entry, its digest made again: dropped", forged)


def test_a_forged_hash_hides_no_patched_file(venv: Path) -> None:
    """The file-hash cache says a patched module still has its old content (its stat as it
    is now, its sha256 as it was, the file's seal absent): the patch is seen all the same."""
    first = _graph(venv)
    table = site_packages(venv) / "rich" / "table.py"
    old_sha = first.modules["rich.table"].sha256
    text = table.read_text()
    table.write_text(text.replace("Table", "Tabel", 1))  # same size: a local patch
    os.utime(table, ns=(OLD_NS, OLD_NS))
    (hashes,) = [p for p in _kept() if _kind(p) == "hashes"]
    kept = json.loads(hashes.read_bytes()[:-SEAL_SIZE])
    st = table.stat()
    (row,) = [k for k in kept if k.endswith("rich/table.py")]
    kept[row] = [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, old_sha]
    hashes.write_bytes(json.dumps(kept).encode())
    again = _graph(venv)
    assert again.modules["rich.table"].sha256 != old_sha
    assert again.modules == _graph(venv, replace(OPTIONS, cache_dir="")).modules
    round_four("3 a forged file hash: the patched file seen", 1)
