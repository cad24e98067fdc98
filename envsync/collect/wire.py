"""What envsync keeps of what hosts sent, so that nothing unchanged is sent twice.

A host sends a startup graph's modules (most of a snapshot: megabytes), its distributions
and its native facts each with the digest of their text. envsync keeps those texts in its
own cache folder by digest, and notes which digests each request got; the next probe of
the same request names them ("known"), and a host whose part has that digest answers with
the digest alone (hostside/collect.py). A part is decoded once per process and shared by
the snapshots that have it (a fleet's hosts mostly do).

Nothing kept is trusted without its digest: a copy is read back and checked before a
snapshot uses it, and one that is missing, damaged or replaced makes the probe run again,
asking for everything (`Stale`). The digest is of the content, so a host that lost its
cache and built the same graph again still matches, and hosts with one graph share one
copy. Best effort, like the host's caches: where nothing can be written, nothing is kept.

A graph's modules are kept in chunks cut where the text itself says (content-defined, at
module boundaries), each known by its digest: a graph that changed in one module stores
that module's chunk and an index, and shares every other chunk with the graphs before it.
The folder is bounded (ENVSYNC_CACHE_MB, default 1024 MB): past it, what was used longest
ago goes first (`envsync cache info|prune|clear`).

    $XDG_CACHE_HOME/envsync/received/   (default ~/.cache/envsync/received)
        modules-DIGEST.json             a graph's modules as a host sent them: the digests
                                        of their chunks, in order
        chunk-DIGEST.json               a run of a graph's modules, as the host's text had it
        distributions-DIGEST.json       the distributions (and native-DIGEST.json: the
                                        native facts) as a host sent them
        known-REQUEST                   the digests the last answer to a request had
        pack-DIGEST.json, packs-*.json  packs of parsed facts, given to other hosts, and
                                        their records (share.py)
        verdict-KEY.json                a report (envsync/compare/verdicts.py)
        rows-DIGEST.json                what a graph's modules are to a host's class,
                                        derived once from the modules DIGEST, sealed
                                        (envsync/collect/identity.py)
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import threading
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from envsync.documents import open_plain, private
from envsync.errors import CollectError
from envsync.hostside.caches.chunks import cut
from envsync.hostside.shared import temp_name, text_digest

T = TypeVar("T")
KEEP = 64  # copies of distributions, native facts and verdicts kept (the newest), each
DEFAULT_CAP_MB = 1024  # the whole folder's cap (ENVSYNC_CACHE_MB overrides)
_MEMO: OrderedDict[str, bytes] = OrderedDict()  # digest -> text, checked (a fleet's hosts
_MEMO_SIZE = 4  # mostly share one graph: read and checked once per process)
_DECODED: OrderedDict[tuple[str, str], Any] = OrderedDict()  # (part, digest) -> value
_DECODED_SIZE = 32
_LOCK = threading.Lock()


class Stale(CollectError):
    """A host said its graph is the one envsync holds, and envsync does not hold it (gone,
    or damaged): collect() asks again for everything. A CollectError, should one ever
    escape: one line, never a traceback."""


def place() -> Path:
    """Where envsync's own cache folder is (`envsync cache` looks there, whatever it is)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "envsync" / "received"


def folder() -> Path:
    """The folder to keep what hosts sent in: `place()` when it is safe (`private`); else,
    said once on stderr with the fix, a folder of this process's own, removed at its exit:
    the run keeps nothing and reads nothing another user could have written."""
    where = place()
    if private(where.parent) and private(where):
        return where
    with _LOCK:
        if str(where) not in _STAND_INS:
            import atexit
            import shutil
            import sys
            import tempfile

            stand_in = Path(tempfile.mkdtemp(prefix="envsync-received-"))
            atexit.register(shutil.rmtree, stand_in, True)
            _STAND_INS[str(where)] = stand_in
            sys.stderr.write(
                f"envsync: {where.parent} is not this user's, or others may write to it: no "
                "cache is used (make it this user's and 0700, or remove it)\n"
            )
        return _STAND_INS[str(where)]


_STAND_INS: dict[str, Path] = {}  # an unsafe cache folder -> this process's own


def request_key(argv: list[str]) -> str:
    """A request: the probe's command without what envsync holds (the host's interpreter,
    the options, the host side's digest). Only a hint: an answer is taken by its digest."""
    return hashlib.sha256(json.dumps(argv).encode()).hexdigest()[:24]


GRAPHS_KEPT = 4  # the graphs of a request's last states named to its host (its past states)


def known(request: str) -> dict[str, Any]:
    """The digests of the parts the last answer to `request` had ("graph": its modules;
    "distributions", "native"), those of which envsync holds a copy; and "graphs": the
    graphs of the request's last GRAPHS_KEPT answers that it holds (a host back in a past
    state sends none of them again)."""
    data = _known_file(request)
    out: dict[str, Any] = {
        name: digest
        for name, digest in data.items()
        if isinstance(name, str)
        and isinstance(digest, str)
        and len(digest) == 32
        and (folder() / f"{_kind(name)}-{digest}.json").is_file()
    }
    graphs = data.get("graphs")
    if isinstance(graphs, list):
        held = [
            d
            for d in graphs[:GRAPHS_KEPT]
            if isinstance(d, str) and len(d) == 32 and (folder() / f"modules-{d}.json").is_file()
        ]
        if held:
            out["graphs"] = held
    return out


def _known_file(request: str) -> dict[str, Any]:
    try:
        data = json.loads(_read(folder() / f"known-{request}"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _kind(name: str) -> str:
    return "modules" if name == "graph" else name


def keep(request: str, digests: dict[str, str], texts: dict[str, bytes]) -> None:
    """Keep the parts a host sent (`texts`: their digests already checked) and what the
    answer named (`digests`: every part, sent or not)."""
    with _LOCK:
        for name, text in texts.items():
            _remember(digests[name], text)
    where = folder()
    kept: set[str] = set()  # this answer's own files: never pruned by it
    try:
        for name, text in texts.items():
            path = where / f"{_kind(name)}-{digests[name]}.json"
            kept.add(str(path))
            if path.is_file():
                continue
            if name == "graph":
                index = [_keep_chunk(where, chunk, kept) for chunk in cut(text)]
                write(path, json.dumps(index).encode())
            else:
                write(path, text)
                prune(where, f"{_kind(name)}-")
        before = _known_file(request)
        told: dict[str, Any] = dict(digests)
        graph = digests.get("graph")
        graphs = [d for d in before.get("graphs") or [] if isinstance(d, str) and d != graph]
        told["graphs"] = ([graph] if graph else []) + graphs[: GRAPHS_KEPT - 1]
        if told != before:  # a warm answer writes nothing
            write(where / f"known-{request}", json.dumps(told).encode())
        if texts:
            bound(where, keep=kept)
    except OSError:
        return


def _keep_chunk(where: Path, chunk: bytes, kept: set[str]) -> str:
    digest = text_digest(chunk)
    path = where / f"chunk-{digest}.json"
    kept.add(str(path))
    if path.is_file():
        _touch(path)
    else:
        write(path, chunk)
    return digest


def load(digest: str, name: str = "graph") -> bytes:
    """The kept text of part `name` with `digest`, checked; Stale when there is no good
    copy."""
    with _LOCK:
        if digest in _MEMO:
            _MEMO.move_to_end(digest)
            return _MEMO[digest]
    where = folder()
    path = where / f"{_kind(name)}-{digest}.json"
    try:
        text = _read(path)
        if name == "graph":
            index = json.loads(text)
            if not isinstance(index, list) or not all(isinstance(c, str) for c in index):
                raise ValueError("not an index of chunks")
            text = b"".join(read_used(where / f"chunk-{c}.json") for c in index)
    except (OSError, ValueError) as e:
        with contextlib.suppress(OSError):  # an index whose chunks went: sent and kept anew
            path.unlink()
        raise Stale(f"no copy of the {name} {digest}") from e
    if text_digest(text) != digest:
        with contextlib.suppress(OSError):  # sent again, and kept anew
            path.unlink()
        raise Stale(f"the copy of the {name} {digest} is damaged")
    _touch(path)
    with _LOCK:
        _remember(digest, text)
    return text


def cap() -> int:
    """The received folder's cap in bytes (ENVSYNC_CACHE_MB, else DEFAULT_CAP_MB)."""
    from envsync.hostside.caches.store import cap_from_env

    return cap_from_env("ENVSYNC_CACHE_MB", DEFAULT_CAP_MB << 20)


def bound(where: Path, limit: int | None = None, keep: set[str] | None = None) -> int:
    """The folder under its cap: what was used longest ago goes first (hostside/caches/store.py's
    rule), never the paths in `keep`. Returns the bytes removed."""
    from envsync.hostside.caches.store import prune as prune_folder

    return prune_folder(str(where), cap() if limit is None else limit, keep)


def read_used(path: Path) -> bytes:
    """A kept file's bytes, its time refreshed as used (least recently used goes first)."""
    from envsync.hostside.caches.store import touch

    with os.fdopen(open_plain(path), "rb") as f:
        data = f.read()
        touch(str(path), os.fstat(f.fileno()).st_mtime_ns)
    return data


def _read(path: Path) -> bytes:
    """A kept file's bytes, never through a link nor from a FIFO (OSError: as if absent)."""
    with os.fdopen(open_plain(path), "rb") as f:
        return f.read()


def _touch(path: Path) -> None:
    from envsync.hostside.caches.store import touch

    touch(str(path))


def decoded(name: str, digest: str, make: Callable[[], T]) -> T:
    """A part decoded once per process (hosts of one fleet mostly share their parts)."""
    with _LOCK:
        found = _DECODED.get((name, digest))
        if found is not None:
            _DECODED.move_to_end((name, digest))
            return found  # type: ignore[no-any-return]
    value = make()
    with _LOCK:
        _DECODED[(name, digest)] = value
        while len(_DECODED) > _DECODED_SIZE:
            _DECODED.popitem(last=False)
    return value


def digest_of(name: str, value: object) -> str | None:
    """The digest of the part `name` that `value` is the very decoded object of (a view of
    a snapshot is keyed by it: envsync/collect/identity.py); None when it is not one."""
    with _LOCK:
        for (kind, digest), found in _DECODED.items():
            if kind == name and found is value:
                return digest
    return None


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
    """Write a file whole through a temporary file, or not at all: a failed write (a full
    disk) removes its temporary file, and raises."""
    from envsync.hostside.caches.store import NOFOLLOW, private_dirs

    private_dirs(str(path.parent))
    tmp = Path(temp_name(f"{path}.{threading.get_ident()}"))  # threads of one process too
    # never through a link planted at the temporary name, never over another's file
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | NOFOLLOW, 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


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
