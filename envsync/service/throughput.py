"""The tokens/s each host last reached when ready, kept on this machine to compare hosts.

The store is `$XDG_STATE_HOME/envsync/throughput.json` (default `~/.local/state`): one
entry per host, written atomically; a store that cannot be read or written is no error.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from envsync.documents import read_plain, write_atomic
from envsync.errors import OutputError
from envsync.seal import state_home


@dataclass(frozen=True, slots=True, kw_only=True)
class Figure:
    """A host's tokens/s, and when it was measured (UTC, ISO 8601)."""

    host: str
    tokens_per_s: float
    at: str


def default_store(environ: Mapping[str, str]) -> Path:
    return state_home(environ) / "throughput.json"


def record(store: Path, host: str, rate: float, reference: str | None) -> Figure | None:
    """Keep `host`'s figure; the reference's last one to compare it with (None: unknown,
    or the host is the reference)."""
    try:
        known = json.loads(read_plain(store))
    except (OSError, ValueError):
        known = {}
    if not isinstance(known, dict):
        known = {}
    known[host] = {"tokens_per_s": rate, "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    with contextlib.suppress(OSError, OutputError):
        store.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(store, json.dumps(known, indent=1) + "\n")
    if not reference or reference == host:
        return None
    theirs = known.get(reference)
    if not isinstance(theirs, dict) or not isinstance(theirs.get("tokens_per_s"), int | float):
        return None
    return Figure(
        host=reference, tokens_per_s=float(theirs["tokens_per_s"]), at=str(theirs.get("at"))
    )
