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
import hmac
import json
import os
import secrets
from collections.abc import Callable, Mapping
from dataclasses import replace
from functools import cache
from pathlib import Path
from typing import Any

from envsync.codec import from_data, to_data
from envsync.collect import wire
from envsync.documents import read_plain, write_atomic
from envsync.errors import DecodeError, OutputError
from envsync.findings import Report
from envsync.hostside.shared import sweep_temps
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


# A kept report is bound to its inputs: its file names the key of its inputs, and holds
# that key, the report, and an HMAC of both with this machine's own secret (in envsync's
# state folder, never the cache folder). An entry that does not verify (edited, written by
# another machine or job whose cache was restored here) is dropped and computed again, so
# that no kept entry can lower a verdict. Where both folders may be shared, --no-cache (or
# a cache per job) is the safe setting.
ENTRY_SCHEMA = 1
SECRET_NAME = "verdict-key"


def _secret_path() -> Path:
    from envsync.states import state_home

    return state_home(os.environ) / SECRET_NAME


def secret() -> bytes | None:
    """This machine's key for kept verdicts, made once (random, 0600); None where it can
    be neither read nor made (then nothing is kept)."""
    path = _secret_path()
    try:
        key = read_plain(path, 256)
        if len(key) >= 32:
            return key
    except OSError:
        pass
    key = secrets.token_hex(32).encode()
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = path.with_name(f".{SECRET_NAME}.{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            os.write(fd, key)
        finally:
            os.close(fd)
        try:
            os.link(tmp, path)  # the first to make it wins; the others read it
        finally:
            os.unlink(tmp)
    except FileExistsError:
        pass
    except OSError:
        return None
    try:
        key = read_plain(path, 256)
    except OSError:
        return None
    return key if len(key) >= 32 else None


def _mac(key: bytes, found: str, report: bytes) -> str:
    return hmac.new(key, found.encode() + b"\n" + report, hashlib.sha256).hexdigest()


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
        if entry.get("inputs") != found or not hmac.compare_digest(
            str(entry.get("mac")), _mac(key, found, report)
        ):
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
    entry["mac"] = _mac(key, found, text)
    where = wire.folder()
    try:
        where.mkdir(parents=True, exist_ok=True)
        write_atomic(_path(found), json.dumps(entry))
        wire.prune(where, "verdict-")
    except (OSError, OutputError):
        pass  # write_atomic left no temporary file
    sweep_temps(str(where))


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
