"""The host's own caches (the facts store, the hash and graph caches, the graphs' chunks)
are read as every file of envsync's state and cache folders: never through a link in its
last part, never from a FIFO (it would block the probe forever). Such a file reads as
absent: the facts are learned again."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from envsync.hostside.caches import chunks, graphcache, store
from envsync.hostside.caches import folder as caches
from envsync.hostside.shared import text_digest
from tests.figures import held
from tests.helpers import within

ITEM = "14 state and cache files: no link followed, no FIFO waited on"


def planted(path: Path, kind: str, text: bytes, tmp_path: Path) -> None:
    """A link to a file of the right content elsewhere, or a FIFO, where a cache file is."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "link":
        elsewhere = tmp_path / "elsewhere"
        elsewhere.write_bytes(text)
        path.symlink_to(elsewhere)
    else:
        os.mkfifo(path)


@pytest.mark.parametrize("kind", ["link", "fifo"])
@pytest.mark.parametrize("cache", ["facts store", "hash cache", "graph cache", "chunk"])
def test_a_cache_file_that_is_a_link_or_a_fifo_reads_as_absent(
    tmp_path: Path, kind: str, cache: str
) -> None:
    folder = tmp_path / "cache"
    if cache == "facts store":
        kept = store.Store(str(folder))
        path = Path(str(kept.path("k")))
        planted(path, kind, store.entry_text("k", {"defines": []}), tmp_path)
        assert within(10, lambda: store.Store(str(folder)).get("k")) is None
    elif cache == "hash cache":
        path = folder / "files.json"
        planted(path, kind, b'{"/x": [1, 2, 3, 4, "ab"]}', tmp_path)
        assert within(10, lambda: caches.load_cache(str(path))) == {}
    elif cache == "graph cache":
        path = folder / "graph.json"
        planted(path, kind, b"[]\nheader\n[]\n", tmp_path)
        assert within(10, lambda: graphcache.still_valid(str(path), str(folder))) is None
    else:
        text = b'"pkg.mod":{"kind":"source"}'
        digest = text_digest(text)
        path = Path(chunks.chunk_path(str(folder), digest))
        planted(path, kind, text, tmp_path)
        assert within(10, lambda: chunks.load_chunks(str(folder), [digest])) is None
    held(ITEM)
