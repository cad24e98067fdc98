"""The probe's caches on the host: file hashes, import facts, startup graphs, native verdicts.

Its only writes, so that a second run skips ast and hashing. They live in the cache
folder (boot.cache_base) and are keyed by what makes them valid: file hashes by stat (one
file per environment), parsed facts by content hash and this host side's digest, graphs
by everything that shapes them. Best effort: a read-only home just means no cache.
"""

from __future__ import annotations

import json
import os
import sys

from .files import open_regular
from .shared import env_key
from .store import write_file

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def cache_path(base: str | None, kind: str, digest: str) -> str | None:
    """Where the cache of `kind` lives in the folder `base` (None: caching is off).

    Parsed import facts and graphs are only as good as the code that made them: keyed by
    the host side's digest, so that another envsync version on the host never reads them.
    """
    if not base:
        return None
    if kind == "hashes":
        # One file per environment: a probe loads the hashes of its own files only.
        return os.path.join(base, f"hashes-v1-{env_key(sys.prefix)}.json")
    if kind == "native":  # the native layer's verdicts, per environment and host side
        return os.path.join(base, f"native-{digest}-{env_key(sys.prefix)}.json")
    if kind == "chunks":  # the graphs' modules text, in chunks by digest (chunks.py)
        return os.path.join(base, f"chunks-{digest}")
    if kind == "graph":  # one file per graph key (%s), written whole, read line by line
        return os.path.join(base, f"graph-{digest}-%s.json")
    # parsed facts: a folder of entries by content (store.py)
    return os.path.join(base, f"facts-{digest}-py{sys.version_info[0]}{sys.version_info[1]}")


def load_cache(path: str | None) -> dict[str, Any]:
    if not path:
        return {}
    try:
        with os.fdopen(open_regular(path, follow=False), "rb") as f:
            data = json.loads(f.read().decode("utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def save_cache(path: str, data: dict[str, Any]) -> None:
    save_text(path, json.dumps(data, separators=(",", ":")))


def save_text(path: str, text: str) -> None:
    """Write a cache file whole (through a temporary file), or not at all."""
    write_file(path, text.encode("utf-8"))
