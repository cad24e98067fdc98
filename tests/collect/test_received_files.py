"""envsync's received copies (`~/.cache/envsync/received/`) are read as every file of its
state and cache folders: never through a link in its last part (envsync often runs as
root, and a link there could name any file), never from a FIFO (it would block). Such a
file reads as absent: the part is sent again and kept anew."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from envsync.collect import wire
from envsync.hostside.shared import text_digest
from tests.figures import held
from tests.helpers import within

ITEM = "14 state and cache files: no link followed, no FIFO waited on"


def kept(tmp_path: Path) -> tuple[str, Path]:
    text = b'{"modules":{"a":{"kind":"source"}}}'
    digest = text_digest(text)
    wire.keep("req", {"graph": digest}, {"graph": text})
    wire._MEMO.clear()
    return digest, wire.folder()


@pytest.mark.parametrize("kind", ["link", "fifo"])
@pytest.mark.parametrize("which", ["known", "index", "chunk"])
def test_a_received_file_that_is_a_link_or_a_fifo_reads_as_absent(
    tmp_path: Path, kind: str, which: str
) -> None:
    digest, where = kept(tmp_path)
    path = {
        "known": where / "known-req",
        "index": where / f"modules-{digest}.json",
        "chunk": next(iter(sorted(where.glob("chunk-*.json")))),
    }[which]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_bytes(path.read_bytes())  # the same bytes: only the link is wrong
    path.unlink()
    if kind == "link":
        path.symlink_to(elsewhere)
    else:
        os.mkfifo(path)
    if which == "known":
        assert within(10, lambda: wire.known("req")) == {}
    else:

        def load() -> str:
            try:
                wire.load(digest)
            except wire.Stale:
                return "stale"
            return "read"

        assert within(10, load) == "stale"
    held(ITEM)
