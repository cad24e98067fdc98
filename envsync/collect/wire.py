"""What envsync keeps of what hosts sent, so that nothing unchanged is sent twice.

A host sends a startup graph's modules (most of a snapshot: megabytes) with the digest of
their text. envsync keeps that text in its own cache folder by digest, and notes which
digest each request got; the next probe of the same request names it ("known"), and a
host whose graph has that digest answers with the digest alone (hostside/collect.py).

Nothing kept is trusted without its digest: a copy is read back and checked before a
snapshot uses it, and one that is missing, damaged or replaced makes the probe run again,
asking for everything (`Stale`). The digest is of the content, so a host that lost its
cache and built the same graph again still matches, and hosts with one graph share one
copy. Best effort, like the host's caches: where nothing can be written, nothing is kept.

    $XDG_CACHE_HOME/envsync/received/   (default ~/.cache/envsync/received)
        modules-DIGEST.json             a graph's modules as a host sent them
        known-REQUEST                   the digest the last answer to a request had
        verdict-KEY.json                a report (envsync/verdicts.py)
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import threading
from collections import OrderedDict
from pathlib import Path

from envsync.hostside.shared import temp_name

KEEP = 64  # copies of modules kept (the newest); verdicts likewise
_MEMO: OrderedDict[str, bytes] = OrderedDict()  # digest -> text, checked (a fleet's hosts
_MEMO_SIZE = 4  # mostly share one graph: read and checked once per process)
_LOCK = threading.Lock()


class Stale(Exception):
    """A host said its graph is the one envsync holds, and envsync does not hold it."""


def folder() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "envsync" / "received"


def digest_of(text: bytes) -> str:
    """As the host side computes it (hostside/graphcache.modules_digest)."""
    return hashlib.sha256(text).hexdigest()[:32]


def request_key(argv: list[str]) -> str:
    """A request: the probe's command without what envsync holds (the host's interpreter,
    the options, the host side's digest). Only a hint: an answer is taken by its digest."""
    return hashlib.sha256(json.dumps(argv).encode()).hexdigest()[:24]


def known(request: str) -> str | None:
    """The digest of the modules the last answer to `request` had, while envsync holds
    a copy of them."""
    try:
        digest = (folder() / f"known-{request}").read_text().strip()
    except (OSError, UnicodeDecodeError):
        return None
    if len(digest) != 32 or not (folder() / f"modules-{digest}.json").is_file():
        return None
    return digest


def keep(request: str, digest: str, text: bytes) -> None:
    """Keep the modules a host sent (their digest already checked)."""
    with _LOCK:
        _remember(digest, text)
    where = folder()
    path = where / f"modules-{digest}.json"
    try:
        if not path.is_file():
            write(path, text)
            prune(where, "modules-")
        write(where / f"known-{request}", digest.encode())
    except OSError:
        return


def load(digest: str) -> bytes:
    """The kept modules of `digest`, checked; Stale when there is no good copy."""
    with _LOCK:
        if digest in _MEMO:
            _MEMO.move_to_end(digest)
            return _MEMO[digest]
    try:
        text = (folder() / f"modules-{digest}.json").read_bytes()
    except OSError as e:
        raise Stale(f"no copy of the graph {digest}") from e
    if digest_of(text) != digest:
        with contextlib.suppress(OSError):  # sent again, and kept anew
            (folder() / f"modules-{digest}.json").unlink()
        raise Stale(f"the copy of the graph {digest} is damaged")
    with _LOCK:
        _remember(digest, text)
    return text


def forget(request: str) -> None:
    try:
        (folder() / f"known-{request}").unlink()
    except OSError:
        return


def _remember(digest: str, text: bytes) -> None:
    _MEMO[digest] = text
    _MEMO.move_to_end(digest)
    while len(_MEMO) > _MEMO_SIZE:
        _MEMO.popitem(last=False)


def write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(temp_name(f"{path}.{threading.get_ident()}"))  # threads of one process too
    tmp.write_bytes(data)
    os.replace(tmp, path)


def prune(where: Path, prefix: str) -> None:
    """Keep the newest KEEP files of a kind."""
    found = []
    for entry in os.scandir(where):
        if entry.name.startswith(prefix):
            try:
                found.append((entry.stat().st_mtime_ns, entry.path))
            except OSError:
                continue
    for _, path in sorted(found)[:-KEEP]:
        try:
            os.unlink(path)
        except OSError:
            continue
