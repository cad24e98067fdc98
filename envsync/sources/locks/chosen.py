"""The index files a pylock chose, kept for a day: a second lock of the same host asks no
index again.

A file an index serves under a name and a hash does not change, so a choice is kept by
everything that made it: the host's indexes (redacted) and wheel tags, the project, its
version and the hash its RECORD gives. It is kept for CHOSEN_TTL_S only (an index may
remove or yank a file: a day-old choice is asked for again), in one file of envsync's
received/ cache folder per indexes and tags (what `envsync cache` shows, prunes and
clears). A file that does not read back is ignored and written anew.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import time
from pathlib import Path
from typing import Any

from envsync.collect import wire
from envsync.documents import read_plain, write_atomic
from envsync.errors import DecodeError, OutputError
from envsync.model.codec import from_data, to_data
from envsync.sources.locks.index import IndexConfig, IndexFile, redact

CHOSEN_TTL_S = 86400


class Chosen:
    """The files chosen for one host's indexes and tags: `get`, `put`, then `save`."""

    def __init__(self, config: IndexConfig, now: float | None = None) -> None:
        identity = json.dumps([[redact(i) for i in config.indexes], list(config.tags)])
        digest = hashlib.sha256(identity.encode()).hexdigest()[:24]
        self.path: Path = wire.folder() / f"chosen-{digest}.json"
        self.now = time.time() if now is None else now
        self.entries: dict[str, list[Any]] = {}  # key -> [chosen at, the file's data]
        self.changed = False
        with contextlib.suppress(OSError, ValueError, RecursionError):
            data = json.loads(read_plain(self.path))
            if isinstance(data, dict):
                self.entries = {
                    k: v
                    for k, v in data.items()
                    if isinstance(v, list)
                    and len(v) == 2
                    and isinstance(v[0], (int, float))
                    and 0 <= self.now - v[0] < CHOSEN_TTL_S
                }

    @staticmethod
    def key(name: str, version: str, sha256: str | None) -> str:
        return json.dumps([name, version, sha256])

    def get(self, name: str, version: str, sha256: str | None) -> IndexFile | None:
        found = self.entries.get(self.key(name, version, sha256))
        if found is None:
            return None
        try:
            return from_data(IndexFile, found[1], "chosen index file")
        except (DecodeError, TypeError, ValueError):
            return None

    def put(self, name: str, version: str, sha256: str | None, chosen: IndexFile) -> None:
        self.entries[self.key(name, version, sha256)] = [self.now, to_data(chosen)]
        self.changed = True

    def save(self) -> None:
        if not self.changed:
            return
        with contextlib.suppress(OSError, OutputError):
            self.path.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(self.path, json.dumps(self.entries, sort_keys=True))
