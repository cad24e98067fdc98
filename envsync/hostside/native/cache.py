"""The native layer's caches, keyed as the host's hash cache is: (size, mtime_ns, ctime_ns, inode).

`ElfCache` keeps parsed files; `cached_judge` keeps whole verdicts with everything they
depended on (each file's stamp, each absence, each folder, the ld.so.cache, the loader
itself), so that a warm check only stats: `cached_loads` answers it from plain data, importing
nothing of this package (the verdicts' classes, the reader, the search and the linker
are imported when a check must run).
Both give plain JSON data for the host's cache file; entries whose file changed too
recently are not kept (the host side's racy rule, shared.racy).
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

    from .elf import ElfFile, Unreadable
    from .ldso import LoaderFacts
    from .search import Disk
    from .verdicts import Load, Request

    Data = Dict[str, Any]

SCHEMA = 1


def _racy(value: Stamp | int, now_ns: int) -> bool:
    """Whether a file changed too recently to trust its stamp (it may be being written)."""
    return isinstance(value, Stamp) and racy(value.mtime_ns, now_ns)


class ElfCache:
    """Parsed files by path, reused while their stamp holds; `read` is a Linker's reader."""

    def __init__(self, read: Callable[[str], ElfFile | Unreadable] | None = None) -> None:
        self._read = read
        self.entries: dict[str, tuple[Stamp, ElfFile]] = {}
        self.hits = 0
        self.misses = 0

    def read(self, path: str) -> ElfFile | Unreadable:
        from .elf import ElfFile, read_elf

        reader = self._read or read_elf
        now = stamp(path)
        if not isinstance(now, Stamp):
            return reader(path)
        known = self.entries.get(path)
        if known is not None and known[0] == now:
            self.hits += 1
            return known[1]
        self.misses += 1
        elf = reader(path)
        if isinstance(elf, ElfFile):
            self.entries[path] = (now, elf)
        return elf

    def export(self) -> Data:
        from .codec import encode_elf

        now = time.time_ns()
        files = {
            path: [*known.plain(), encode_elf(elf)]
            for path, (known, elf) in self.entries.items()
            if not _racy(known, now)
        }
        return {"schema": SCHEMA, "files": files}

    def load(self, data: Data) -> None:
        """Entries from an earlier `export` (another schema's are ignored)."""
        from .codec import decode_elf

        if not isinstance(data, dict) or data.get("schema") != SCHEMA:
            return
        for path, (size, mtime, ctime, inode, facts) in data.get("files", {}).items():
            self.entries[path] = (Stamp(size, mtime, ctime, inode), decode_elf(facts))


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
    files: ElfCache | None = None,
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
    files: ElfCache | None,
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
