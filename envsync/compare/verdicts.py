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

import contextlib
import hashlib
import json
from collections.abc import Callable, Mapping
from functools import cache
from pathlib import Path
from typing import Any

from envsync.collect import wire
from envsync.collect.identity import verdict_input
from envsync.documents import read_plain, write_atomic
from envsync.errors import DecodeError, OutputError
from envsync.hostside.shared import sweep_temps
from envsync.model.codec import from_data, to_data
from envsync.model.environment import Snapshot
from envsync.model.findings import Report
from envsync.seal import mac, secret, verifies


@cache
def code_key() -> str:
    """envsync's own code (its package folder, the rule packs in it included: every
    subpackage, the classifier's above all)."""
    import envsync

    return files_key(Path(envsync.__file__).resolve().parent)


def files_key(root: Path) -> str:
    """Each source file under `root`: its path, size and modification time."""
    rows = []
    for path in sorted(root.rglob("*")):
        if path.suffix in (".py", ".toml", ".json") and "__pycache__" not in path.parts:
            st = path.stat()
            rows.append([str(path.relative_to(root)), st.st_size, st.st_mtime_ns])
    return hashlib.sha256(json.dumps(rows).encode()).hexdigest()[:24]


def key(*parts: Any) -> str | None:
    """The key of a classification's inputs (None: one of them cannot be keyed)."""
    data: list[Any] = [code_key()]
    for part in parts:
        if isinstance(part, Snapshot):
            found = verdict_input(part)
            if found is None:
                return None
            data.append(found)
        elif isinstance(part, Mapping):  # providers: keyed by (load, symbol)
            data.append(sorted([repr(k), to_data(v)] for k, v in part.items()))
        else:
            data.append(to_data(part))
    text = json.dumps(data, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


# A kept report is bound to its inputs: its file names the key of its inputs, and holds
# that key, the report, and an HMAC of both with this machine's own secret (in envsync's
# state folder, never the cache folder). An entry that does not verify (edited, written by
# another machine or job whose cache was restored here) is dropped and computed again, so
# that no kept entry can lower a verdict. Where both folders may be shared, --no-cache (or
# a cache per job) is the safe setting.
ENTRY_SCHEMA = 1


def _path(found: str) -> Path:
    return wire.folder() / f"verdict-{found}.json"


def recall(found: str) -> Report | None:
    """The report kept for the inputs `found`, if its entry verifies; an entry that does
    not is dropped."""
    path = _path(found)
    key = secret()
    if key is None:
        return None
    try:
        entry = json.loads(read_plain(path))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, RecursionError):
        _drop(path)
        return None
    try:
        if not isinstance(entry, dict) or entry.get("schema") != ENTRY_SCHEMA:
            raise ValueError("not an entry")
        report = json.dumps(entry["report"], sort_keys=True, separators=(",", ":")).encode()
        if entry.get("inputs") != found or not verifies(key, found, report, entry.get("mac")):
            raise ValueError("does not verify")
        return from_data(Report, entry["report"], "verdict")
    except (KeyError, TypeError, ValueError, DecodeError, RecursionError):
        _drop(path)
        return None


def _drop(path: Path) -> None:
    with contextlib.suppress(OSError):
        path.unlink()


def remember(found: str, report: Report) -> None:
    key = secret()
    if key is None:
        return
    data = to_data(report)
    text = json.dumps(data, sort_keys=True, separators=(",", ":")).encode()
    entry = {"schema": ENTRY_SCHEMA, "inputs": found, "report": data}
    entry["mac"] = mac(key, found, text)
    where = wire.folder()
    try:
        where.mkdir(parents=True, exist_ok=True)
        write_atomic(_path(found), json.dumps(entry))
        wire.prune(where, "verdict-")
    except (OSError, OutputError):
        pass  # write_atomic left no temporary file
    sweep_temps(str(where))


def once(inputs: tuple[Any, ...] | None, compute: Callable[[], tuple[Report, bool]]) -> Report:
    """The report of `inputs` as kept, or `compute()`d and kept (inputs None: not kept;
    compute's second item False: this report is not to be kept, something it asked a host
    went unanswered)."""
    found = key(*inputs) if inputs is not None else None
    if found is not None:
        kept = recall(found)
        if kept is not None:
            return kept
    report, keep = compute()
    if found is not None and keep:
        remember(found, report)
    return report
