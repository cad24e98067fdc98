"""The native layer's caches, keyed as the host's hash cache is: (size, mtime_ns, ctime_ns, inode).

`ElfStore` keeps parsed files, one entry each in the host's store (store.py), so that a
change reads the files it changed again and no other; `cached_judge` keeps whole verdicts
with everything they depended on (each file's stamp, each absence, each folder, the
ld.so.cache, the loader itself), so that a warm check only stats: `cached_loads` answers
it from plain data, importing nothing of this package (the verdicts' classes, the reader,
the search and the linker are imported when a check must run).
Both are plain JSON data on the host; entries whose file changed too recently are not
kept (the host side's racy rule, shared.racy).
"""

from __future__ import annotations

import hashlib
import json
import os
import time

from ..shared import Stamp, plain, racy, stamp

TYPE_CHECKING = False  # typing costs milliseconds on a host: for the checker only
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import Any, Dict

    from ..caches.store import Store
    from .elf import ElfFile, Unreadable
    from .ldso import LoaderFacts
    from .search import Disk
    from .verdicts import Load, Request

    Data = Dict[str, Any]

SCHEMA = 1


class ElfStore:
    """Parsed files kept on the host, one store entry each (store.py), keyed by the file's
    path and stamp: after a change (a wheel installed, a library replaced) the files it
    changed are read again and the rest come from the store, where a reader that kept
    nothing read every object of the startup again. A file whose stamp is racy is read and
    not kept; an entry that does not decode is dropped and the file read again. `keep`:
    whether what is read is kept (the native scan keeps files once the environment has
    shown it changes: a first scan, a fleet's cold node, writes none)."""

    def __init__(
        self,
        store: Store,
        read: Callable[[str], ElfFile | Unreadable] | None = None,
        keep: bool = True,
    ):
        self.store = store
        self._read = read
        self.keep = keep
        self.memo: dict[tuple[str, Stamp], ElfFile] = {}
        self.hits = 0
        self.misses = 0

    def read(self, path: str) -> ElfFile | Unreadable:
        from .codec import decode_elf, encode_elf
        from .elf import ElfFile, read_elf

        reader = self._read or read_elf
        now = stamp(path)
        if not isinstance(now, Stamp):
            return reader(path)
        found = self.memo.get((path, now))
        if found is not None:
            return found
        key = elf_key(path, now)
        kept = self.store.get(key)
        if kept is not None:
            try:
                elf: ElfFile | None = decode_elf(kept)
            except (KeyError, TypeError, ValueError, IndexError, AttributeError):
                elf = None
            if elf is not None and elf.path == path:
                self.hits += 1
                self.memo[(path, now)] = elf
                return elf
            self.store.drop(key)  # damaged, or another file's facts
        self.misses += 1
        read = reader(path)
        if isinstance(read, ElfFile):
            self.memo[(path, now)] = read
            if self.keep and not racy(now.mtime_ns, time.time_ns()) and stamp(path) == now:
                self.store.put(key, encode_elf(read))
        return read


def elf_key(path: str, now: Stamp) -> str:
    """The store's key of the file at `path` as parsed while its stamp is `now`."""
    return json.dumps(["elf", SCHEMA, path, *now.plain()])


def observed(disk: Disk, extra: Sequence[str] = ()) -> Data:
    """What a run's verdicts depended on: every folder it asked about, every file it opened
    or found absent (and `extra` files), each with what it was."""
    files = {path: plain(value) for path, value in disk.stamps.items()}
    for path in extra:
        files.setdefault(path, plain(stamp(path)))
    return {"cwd": disk.cwd, "folders": dict(disk.folders), "files": files}


def unchanged(record: Data) -> bool:
    """Whether everything `observed` recorded is still so (a stat per file and folder)."""
    cwd = record["cwd"]
    for path, was in record["folders"].items():
        if os.path.isdir(path if path.startswith("/") else os.path.join(cwd, path)) != was:
            return False
    for path, was in record["files"].items():
        if plain(stamp(path if path.startswith("/") else os.path.join(cwd, path))) != was:
            return False
    return True


def plain_request(request: Request) -> list[Any]:
    """A request as `run_key` and `cached_loads` take it: [path, global, now, caller]."""
    return [request.path, request.global_, request.now, request.caller]


def run_key(program: str, requests: Sequence[list[Any]], settings: Data) -> str:
    """What decides a run's verdicts besides the files it reads: the program, the loads
    (plain_request), the service's loader settings, this machine."""
    described = {
        "program": program,
        "requests": list(requests),
        "settings": settings,
        "machine": list(os.uname()[2:5]),
        "schema": SCHEMA,
    }
    return hashlib.sha256(json.dumps(described, sort_keys=True).encode()).hexdigest()


def cached_judge(
    program: str,
    requests: Sequence[Request],
    store: dict[str, Data],
    *,
    library_path: str | None = None,
    preload: str | None = None,
    bind_now: bool = False,
    cwd: str = "/",
    facts_store: dict[str, Data] | None = None,
    files: ElfStore | None = None,
) -> tuple[Load, list[Load]]:
    """Linker.judge of a startup, from `store` while nothing it depended on changed (a
    warm check only stats); else judged again (reading files through `files`) and kept."""
    from .verdicts import decode_load, encode_load

    settings = loader_settings(library_path, preload, bind_now, cwd)
    key = run_key(program, [plain_request(r) for r in requests], settings)
    record = store.get(key)
    if record is not None and unchanged(record["observed"]):
        return decode_load(record["started"]), [decode_load(d) for d in record["loads"]]
    started, loads, seen = _judge(program, requests, settings, facts_store, files)
    now = time.time_ns()
    if any(isinstance(v, list) and racy(v[1], now) for v in seen["files"].values()):
        store.pop(key, None)
    else:
        store[key] = {
            "observed": seen,
            "started": encode_load(started),
            "loads": [encode_load(load) for load in loads],
        }
    return started, loads


def loader_settings(
    library_path: str | None, preload: str | None, bind_now: bool, cwd: str
) -> Data:
    return {"library_path": library_path, "preload": preload, "bind_now": bind_now, "cwd": cwd}


def cached_loads(
    program: str, requests: Sequence[list[Any]], store: dict[str, Data], settings: Data
) -> tuple[str, list[Data] | None]:
    """The run's key, and its loads as plain data (encode_load) while nothing it depended
    on changed (None: judge it with cached_judge): stats only, no class of this package."""
    key = run_key(program, requests, settings)
    record = store.get(key)
    if record is not None and unchanged(record["observed"]):
        return key, list(record["loads"])
    return key, None


def _judge(
    program: str,
    requests: Sequence[Request],
    settings: Data,
    facts_store: dict[str, Data] | None,
    files: ElfStore | None,
) -> tuple[Load, list[Load], Data]:
    from .elf import ElfFile, read_elf
    from .ldcache import LdCache, read_ldcache
    from .loader import Environment, Linker
    from .search import Disk

    read = files.read if files is not None else read_elf
    main = read(os.path.realpath(os.path.join(settings["cwd"], program)))
    interp = (main.interp if isinstance(main, ElfFile) else None) or "/lib64/ld-linux-x86-64.so.2"
    facts = cached_facts(interp, os.uname().machine, {} if facts_store is None else facts_store)
    ldcache = read_ldcache(facts.cache)
    env = Environment(
        facts=facts,
        cache=ldcache if isinstance(ldcache, LdCache) else None,
        library_path=settings["library_path"],
        preload=settings["preload"],
        bind_now=settings["bind_now"],
        cwd=settings["cwd"],
    )
    disk = Disk(cwd=settings["cwd"])
    started, loads = Linker(env, read=read, disk=disk).judge(program, requests)
    return started, loads, observed(disk, [facts.cache, interp])


def cached_facts(interpreter: str, machine: str, store: dict[str, Data]) -> LoaderFacts:
    """The loader's facts (two short runs of it), kept by the loader's own stamp."""
    from .ldso import LoaderFacts, ldso_help, loader_facts

    now = plain(stamp(interpreter))
    known = store.get(interpreter)
    if known is not None and known["stamp"] == now and known["machine"] == machine:
        values = dict(known["facts"])
        for name in ("system_dirs", "hwcaps", "legacy"):
            values[name] = tuple(values[name])
        values["glibc"] = tuple(values["glibc"]) if values["glibc"] else None
        return LoaderFacts(**values)
    help_text, version_text = ldso_help(interpreter)
    facts = loader_facts(interpreter, help_text, version_text, machine)
    store[interpreter] = {"stamp": now, "machine": machine, "facts": _plain_facts(facts)}
    return facts


def _plain_facts(facts: LoaderFacts) -> Data:
    import dataclasses

    return dataclasses.asdict(facts)
