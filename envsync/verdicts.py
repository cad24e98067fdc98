"""A verdict computed once per input: the report of a classification kept by its inputs.

The classification is a pure function of the two snapshots, the startup it is judged by
(the service command and its flags, the launch roots, the rule packs), the providers the
live reference named, and envsync's own code. The key is the digest of all of them: a
snapshot by its facts (when it was collected and how long it took do not count) with its
startup graph's modules by the digest of their text (collect/wire.py), the rest as JSON,
the code by the size and time of each of envsync's source files. Any change of any input
is another key, so a report is recomputed; a report that does not read back is too.
Import checks are live runs, never kept.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import replace
from functools import cache
from pathlib import Path
from typing import Any

from envsync.codec import from_data, to_data
from envsync.collect import wire
from envsync.errors import DecodeError
from envsync.findings import Report
from envsync.model import Snapshot


@cache
def code_key() -> str:
    """envsync's own code (its package folder, the rule packs in it included)."""
    return files_key(Path(__file__).resolve().parent)


def files_key(root: Path) -> str:
    """Each source file under `root`: its path, size and modification time."""
    rows = []
    for path in sorted(root.rglob("*")):
        if path.suffix in (".py", ".toml", ".json") and "__pycache__" not in path.parts:
            st = path.stat()
            rows.append([str(path.relative_to(root)), st.st_size, st.st_mtime_ns])
    return hashlib.sha256(json.dumps(rows).encode()).hexdigest()[:24]


def snapshot_key(snap: Snapshot) -> str | None:
    """A snapshot by its facts (None: its graph's modules have no digest to key them by)."""
    graph = snap.startup
    digest = None
    if graph is not None:
        digest = getattr(graph.modules, "digest", None)
        if digest is None and graph.modules:
            return None
    bare = replace(
        snap,
        collected_at=None,
        duration_s=None,
        startup=None if graph is None else replace(graph, modules={}, parsed=0, cached=0),
    )
    text = json.dumps([to_data(bare), digest], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def key(*parts: Any) -> str | None:
    """The key of a classification's inputs (None: one of them cannot be keyed)."""
    data: list[Any] = [code_key()]
    for part in parts:
        if isinstance(part, Snapshot):
            found = snapshot_key(part)
            if found is None:
                return None
            data.append(found)
        elif isinstance(part, Mapping):  # providers: keyed by (load, symbol)
            data.append(sorted([repr(k), to_data(v)] for k, v in part.items()))
        else:
            data.append(to_data(part))
    text = json.dumps(data, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def recall(found: str) -> Report | None:
    try:
        data = json.loads((wire.folder() / f"verdict-{found}.json").read_bytes())
        return from_data(Report, data, "verdict")
    except (OSError, ValueError, DecodeError, RecursionError):
        return None


def remember(found: str, report: Report) -> None:
    where = wire.folder()
    try:
        wire.write(where / f"verdict-{found}.json", json.dumps(to_data(report)).encode())
        wire.prune(where, "verdict-")
    except OSError:
        return


def once(inputs: tuple[Any, ...] | None, compute: Callable[[], Report]) -> Report:
    """The report of `inputs` as kept, or `compute()`d and kept (inputs None: not kept)."""
    found = key(*inputs) if inputs is not None else None
    if found is not None:
        kept = recall(found)
        if kept is not None:
            return kept
    report = compute()
    if found is not None:
        remember(found, report)
    return report
