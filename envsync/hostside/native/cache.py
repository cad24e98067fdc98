"""The native layer's caches, keyed as the host's hash cache is: (size, mtime_ns, ctime_ns, inode).

`ElfCache` keeps parsed files; `cached_judge` keeps whole verdicts with everything they
depended on (each file's stamp, each absence, each folder, the ld.so.cache), so that a
warm check only stats. Both export plain JSON data for the host's cache file; entries
written less than two seconds after their file changed are not kept (git's "racy" rule).
"""

from __future__ import annotations

import dataclasses
import errno
import hashlib
import json
import os
import time
from typing import TYPE_CHECKING

from .codec import SCHEMA, decode_elf, decode_load, encode_elf, encode_load
from .elf import ElfFile, Unreadable, read_elf
from .ldso import LoaderFacts, ldso_help, loader_facts
from .loader import Linker, Request
from .search import Disk, Stamp, stamp_of

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import Any, Dict

    from .loader import Environment, Load

    Data = Dict[str, Any]

RACY_NS = 2 * 10**9


def _stamp(path: str) -> Stamp | int:
    try:
        return stamp_of(os.stat(path))
    except OSError as e:
        return e.errno or errno.ENOENT


def _fresh(stamp: Stamp | int, now_ns: int) -> bool:
    """Whether a file changed too recently to trust its stamp (it may be being written)."""
    return isinstance(stamp, Stamp) and now_ns - stamp.mtime_ns < RACY_NS


class ElfCache:
    """Parsed files by path, reused while their stamp holds; `read` is a Linker's reader."""

    def __init__(self, read: Callable[[str], ElfFile | Unreadable] = read_elf) -> None:
        self._read = read
        self.entries: dict[str, tuple[Stamp, ElfFile]] = {}
        self.hits = 0
        self.misses = 0

    def read(self, path: str) -> ElfFile | Unreadable:
        stamp = _stamp(path)
        if not isinstance(stamp, Stamp):
            return self._read(path)
        known = self.entries.get(path)
        if known is not None and known[0] == stamp:
            self.hits += 1
            return known[1]
        self.misses += 1
        elf = self._read(path)
        if isinstance(elf, ElfFile):
            self.entries[path] = (stamp, elf)
        return elf

    def export(self) -> Data:
        now = time.time_ns()
        files = {
            path: [*dataclasses.astuple(stamp), encode_elf(elf)]
            for path, (stamp, elf) in self.entries.items()
            if not _fresh(stamp, now)
        }
        return {"schema": SCHEMA, "files": files}

    def load(self, data: Data) -> None:
        """Entries from an earlier `export` (another schema's are ignored)."""
        if not isinstance(data, dict) or data.get("schema") != SCHEMA:
            return
        for path, (size, mtime, ctime, inode, facts) in data.get("files", {}).items():
            self.entries[path] = (Stamp(size, mtime, ctime, inode), decode_elf(facts))


def observed(disk: Disk, extra: Sequence[str] = ()) -> Data:
    """What a run's verdicts depended on: every folder it asked about, every file it opened
    or found absent (and `extra` files), each with what it was."""
    files = {path: _plain(stamp) for path, stamp in disk.stamps.items()}
    for path in extra:
        files.setdefault(path, _plain(_stamp(path)))
    return {"cwd": disk.cwd, "folders": dict(disk.folders), "files": files}


def _plain(stamp: Stamp | int) -> list[int] | int:
    return list(dataclasses.astuple(stamp)) if isinstance(stamp, Stamp) else _absent(stamp)


def _absent(code: int) -> int:
    """Absent files are one outcome whatever the errno (ld.so tries the next place)."""
    return errno.ENOENT if code in (errno.ENOENT, errno.ENOTDIR) else code


def unchanged(record: Data) -> bool:
    """Whether everything `observed` recorded is still so (a stat per file and folder)."""
    cwd = record["cwd"]
    for path, was in record["folders"].items():
        if os.path.isdir(path if path.startswith("/") else os.path.join(cwd, path)) != was:
            return False
    for path, was in record["files"].items():
        now = _stamp(path if path.startswith("/") else os.path.join(cwd, path))
        if _plain(now) != was:
            return False
    return True


def run_key(env: Environment, program: str, requests: Sequence[Request]) -> str:
    """What decides a run's verdicts besides the files: the environment and the loads."""
    facts = dataclasses.asdict(env.facts)
    described = {
        "facts": facts,
        "cache": env.cache.path if env.cache is not None else None,
        "library_path": env.library_path,
        "preload": env.preload,
        "bind_now": env.bind_now,
        "cwd": env.cwd,
        "program": program,
        "requests": [dataclasses.astuple(r) for r in requests],
        "schema": SCHEMA,
    }
    return hashlib.sha256(json.dumps(described, sort_keys=True).encode()).hexdigest()


def cached_judge(
    env: Environment,
    program: str,
    requests: Sequence[Request],
    store: dict[str, Data],
    read: Callable[[str], ElfFile | Unreadable] = read_elf,
) -> tuple[Load, list[Load]]:
    """Linker.judge, from `store` while nothing it depended on changed (then it only
    stats); else judged again with `read` (an ElfCache's reader) and kept in `store`."""
    key = run_key(env, program, requests)
    record = store.get(key)
    if record is not None and unchanged(record["observed"]):
        return decode_load(record["started"]), [decode_load(d) for d in record["loads"]]
    disk = Disk(cwd=env.cwd)
    started, loads = Linker(env, read=read, disk=disk).judge(program, requests)
    seen = observed(disk, [env.cache.path] if env.cache is not None else [])
    now = time.time_ns()
    if not any(isinstance(v, list) and now - v[1] < RACY_NS for v in seen["files"].values()):
        store[key] = {
            "observed": seen,
            "started": encode_load(started),
            "loads": [encode_load(load) for load in loads],
        }
    else:
        store.pop(key, None)
    return started, loads


def cached_facts(interpreter: str, machine: str, store: dict[str, Data]) -> LoaderFacts:
    """The loader's facts (two short runs of it), kept by the loader's own stamp."""
    stamp = _plain(_stamp(interpreter))
    known = store.get(interpreter)
    if known is not None and known["stamp"] == stamp:
        fields = dict(known["facts"])
        for name in ("system_dirs", "hwcaps", "legacy"):
            fields[name] = tuple(fields[name])
        fields["glibc"] = tuple(fields["glibc"]) if fields["glibc"] else None
        return LoaderFacts(**fields)
    help_text, version_text = ldso_help(interpreter)
    facts = loader_facts(interpreter, help_text, version_text, machine)
    store[interpreter] = {"stamp": stamp, "facts": dataclasses.asdict(facts)}
    return facts
