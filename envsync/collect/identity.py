"""The views of a snapshot that envsync hashes: each named here, each computed once per
snapshot (kept while the snapshot lives), and no other module hashes a snapshot.

| view            | covers                                           | leaves out                 |
| --------------- | ------------------------------------------------ | -------------------------- |
| `compared`      | what diff compares (diff.view): distributions    | the host's name, paths,    |
|                 | and versions, watched files' hashes, interpreter,| when and how it was        |
|                 | torch, GPU, system, NCCL, recorded variables     | collected, the graph,      |
|                 |                                                  | flags, a crash             |
| `environment`   | `compared`, and what classifying reads besides:  | the same, but for what it  |
|                 | the graph's roots and modules (kind, content     | adds                       |
|                 | digest, error), the service flags, a crash       |                            |
| `plan_target`   | what a plan's target must still be: each         | everything else (a GPU, a  |
|                 | distribution (version, location, watched files), | variable, the graph)       |
|                 | the interpreter, the service flags               |                            |
| `verdict_input` | everything a classification reads: the whole     | when it was collected and  |
|                 | snapshot, the graph's modules by the digest of   | how long it took, when     |
|                 | their text                                       | each package was installed |
| `patch_set`     | a watched distribution's patched, added and      | the rest                   |
|                 | missing files with their hashes                  |                            |

A recorded state is known by `compared` (states.py: a state keeps no graph); hosts are one
class by `environment` (compare.class_key, watch's status); a saved plan holds its
target's `plan_target` (apply refuses a target that moved); a kept verdict is keyed by
`verdict_input` (verdicts.py); a server's nodes agree on each `patch_set` (gate.py).
`compared` and `plan_target` are spelled as they always
were: recorded states and saved plans keep matching the hosts they came from.

Cheap, by what the wire already says: `verdict_input` names the graph's modules and the
native facts by the digests their host sent them with (collect/wire.py), where the
snapshot holds the very parts decoded from them, and encodes only the rest (the
distributions, without their install times). `environment` reads the graph's modules by
kind, content digest and error (paths differ between hosts of one image), which is a
function of their text: it is derived once per text digest, kept in this process and in
envsync's cache folder, sealed with this machine's key (seal.py) like a kept verdict, so
that a warm run does not decode the graph to hash it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import threading
import weakref
from collections import Counter, OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from envsync.collect import wire
from envsync.documents import read_plain
from envsync.model.changes import view
from envsync.model.codec import to_data
from envsync.model.environment import Distribution, ModuleFacts, Snapshot, StartupGraph, Unavailable
from envsync.seal import mac, secret, verifies

DIGEST_LENGTH = 16  # hex digits of `environment`: 64 bits, no collision among any fleet's classes

# Each snapshot's views, by its id, while it lives (a weak reference tells it is the same
# one: an id is reused once its snapshot is gone).
_VIEWS: dict[int, tuple[weakref.ref[Snapshot], dict[str, Any]]] = {}
_LOCK = threading.Lock()
COMPUTED: Counter[str] = Counter()  # each view computed in this process, by name (tests)

# A graph's module rows' digest, by the digest of the modules' text as the host sent it
_ROWS: OrderedDict[str, str] = OrderedDict()
_ROWS_KEPT = 64


def _once(snap: Snapshot, name: str, make: Callable[[Snapshot], Any]) -> Any:
    key = id(snap)
    with _LOCK:
        entry = _VIEWS.get(key)
        if entry is not None and entry[0]() is snap and name in entry[1]:
            return entry[1][name]
    value = make(snap)
    with _LOCK:
        entry = _VIEWS.get(key)
        if entry is None or entry[0]() is not snap:
            entry = _VIEWS[key] = (weakref.ref(snap, _gone(key)), {})
        entry[1][name] = value
        COMPUTED[name] += 1
    return value


def _gone(key: int) -> Callable[[weakref.ref[Snapshot]], None]:
    def drop(ref: weakref.ref[Snapshot]) -> None:
        entry = _VIEWS.get(key)
        if entry is not None and entry[0] is ref:
            _VIEWS.pop(key, None)

    return drop


def _sha256(data: Any) -> str:
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


# ---------------------------------------------------------------------------------------
# The views


def compared(snap: Snapshot) -> str:
    """What diff compares of a snapshot (sha256): two snapshots of an unchanged host have
    the same, whenever and however fast they were taken. A recorded state is known by it."""
    return str(_once(snap, "compared", lambda s: _sha256(view(s))))


def environment(snap: Snapshot) -> str:
    """The digest of a host's environment: equal for hosts a diff and the classifier cannot
    tell apart (its name, paths and when it was collected do not count)."""
    return str(_once(snap, "environment", _environment))


def plan_target(snap: Snapshot) -> str:
    """What a plan depends on: every distribution and version, watched files' hashes,
    and the effective service flags envsync keeps on the host."""
    return str(_once(snap, "plan_target", _plan_target))


def verdict_input(snap: Snapshot) -> str | None:
    """A snapshot as an input to a kept verdict (None: its graph's modules have no digest
    to key them by)."""
    found = _once(snap, "verdict_input", _verdict_input)
    return None if found is None else str(found)


def host_class(snap: Snapshot, service: Any) -> str:
    """A class of hosts: the environment, and the service it runs (`service`: JSON data)."""
    shape = hashlib.sha256(json.dumps(service).encode()).hexdigest()[:8]
    return f"{environment(snap)}:{shape}"


def patch_set(dist: Distribution, changed: Sequence[str]) -> str:
    """A watched distribution's local patches (the `changed` files, with their hashes):
    what a server's nodes must agree on (gate.py)."""
    files = dist.files or {}
    text = "\n".join(f"{p} {files.get(p, '-')}" for p in changed)
    return hashlib.sha256(text.encode()).hexdigest()


def _environment(snap: Snapshot) -> str:
    graph = snap.startup
    data: dict[str, Any] = {
        "compared": compared(snap),
        "startup": None
        if graph is None
        else {
            "roots": list(graph.roots),
            "resolved": dict(graph.resolved),
            "modules": graph_rows(graph),
        },
        "service_flags": dict(snap.service_flags or {}),
        "crash": snap.crash.exception if snap.crash else None,
    }
    return _sha256(data)[:DIGEST_LENGTH]


def _plan_target(snap: Snapshot) -> str:
    data = {
        "distributions": {
            d.name: [d.version, d.location, dict(d.files) if d.files is not None else None]
            for d in snap.distributions
        },
        "python": None
        if isinstance(snap.interpreter, Unavailable)
        else [snap.interpreter.executable, snap.interpreter.version],
        "service_flags": dict(snap.service_flags or {}),
    }
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()


def _verdict_input(snap: Snapshot) -> str | None:
    graph = snap.startup
    modules = None
    if graph is not None:
        modules = getattr(graph.modules, "digest", None)
        if modules is None and graph.modules:
            return None
    # each distribution but when it was installed: no verdict reads it (a note of what
    # arrived since is added after, compare/targets.py), and a package reinstalled as it was is the
    # same input (a few milliseconds: the distributions are small beside the graph)
    dists = [to_data(replace(d, installed_at=None)) for d in snap.distributions]
    native = wire.digest_of("native", snap.native) if snap.native is not None else None
    bare = replace(
        snap,
        collected_at=None,
        duration_s=None,
        startup=None if graph is None else replace(graph, modules={}, parsed=0, cached=0),
        distributions=(),
        native=None if native else snap.native,
    )
    return _sha256([to_data(bare), modules, dists, native])


# ---------------------------------------------------------------------------------------
# The graph's modules as the environment reads them


def graph_rows(graph: StartupGraph) -> str:
    """The digest of each module's kind, content digest and error: by the digest of the
    modules' text where the host sent one (kept here and in the cache folder, sealed),
    else from the modules themselves."""
    text = getattr(graph.modules, "digest", None)
    if not isinstance(text, str):
        return _sha256(_rows(graph.modules))
    with _LOCK:
        found = _ROWS.get(text)
    if found is None:
        found = _recall(text)
        if found is None:
            found = _sha256(_rows(graph.modules))
            _keep(text, found)
        with _LOCK:
            _ROWS[text] = found
            while len(_ROWS) > _ROWS_KEPT:
                _ROWS.popitem(last=False)
    return found


def _rows(modules: Mapping[str, ModuleFacts]) -> dict[str, list[Any]]:
    """Each module's kind, content digest and error. A graph kept undecoded answers from
    its raw data (decoding 6,000 modules to read three fields was most of a warm
    `check --lock`)."""
    rows = getattr(modules, "rows", None)
    if callable(rows):
        found: dict[str, list[Any]] = rows()
        return dict(sorted(found.items()))
    return {name: [f.kind, f.sha256, f.error] for name, f in sorted(modules.items())}


def _rows_name(text: str) -> str:
    return f"rows-{text}"


def _recall(text: str) -> str | None:
    key = secret()
    path = wire.folder() / f"{_rows_name(text)}.json"
    if key is None or not path.is_file():
        return None
    try:
        entry = json.loads(read_plain(path, 4096))
        rows = entry["rows"]
        if isinstance(rows, str) and verifies(key, _rows_name(text), rows.encode(), entry["mac"]):
            return rows
    except (OSError, ValueError, KeyError, TypeError, RecursionError):
        pass
    with contextlib.suppress(OSError):
        path.unlink()  # damaged, or sealed elsewhere: derived again
    return None


def _keep(text: str, rows: str) -> None:
    key = secret()
    if key is None:
        return
    seal = mac(key, _rows_name(text), rows.encode())
    data = json.dumps({"rows": rows, "mac": seal}).encode()
    try:
        wire.write(wire.folder() / f"{_rows_name(text)}.json", data)
        wire.prune(wire.folder(), "rows-")
    except OSError:
        return
