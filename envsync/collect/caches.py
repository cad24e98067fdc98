"""envsync's caches on this machine: what they hold, pruned to their caps, or cleared.

Two folders, both under $XDG_CACHE_HOME/envsync (default ~/.cache/envsync):

- `received/`: what hosts sent (graphs in chunks, distributions, native facts, the packs
  of parsed facts that envsync gives other hosts) and the kept verdicts (collect/wire.py,
  collect/share.py), capped by ENVSYNC_CACHE_MB (default 1024);
- the rest: this machine's own host-side caches, as every host keeps them (parsed facts
  by content, startup graphs, file hashes, native verdicts, the host side's copies),
  capped by ENVSYNC_HOST_CACHE_MB (default 512) on each host.

Nothing here is a host's recorded past (the state folder is not a cache). Nothing kept
ever changes a verdict: a cleared cache costs time, never a finding.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from envsync.collect import wire
from envsync.errors import InputError
from envsync.hostside.caches import store


@dataclass(frozen=True, slots=True, kw_only=True)
class CacheArea:
    """One cache folder: where, what it holds, its cap."""

    name: str  # "received" (envsync's side) or "host" (this machine's host-side caches)
    path: str
    entries: int
    bytes: int
    cap_bytes: int
    kinds: tuple[tuple[str, int, int], ...] = ()  # (kind, entries, bytes), largest first


def areas() -> tuple[CacheArea, ...]:
    """Both cache folders as they are now."""
    received = wire.place()
    host = received.parent
    return (
        _area("received", received, wire.cap(), skip=()),
        _area("host", host, store.host_cap(), skip=(received.name,)),
    )


def _kind(path: Path, root: Path) -> str:
    first = path.relative_to(root).parts[0]
    return first.split("-", 1)[0] if "-" in first else first


def _area(name: str, root: Path, cap: int, *, skip: tuple[str, ...]) -> CacheArea:
    kinds: dict[str, list[int]] = {}
    if root.is_dir() and not root.is_symlink():  # never counted through a link
        for dirpath, dirnames, filenames in os.walk(root):
            if Path(dirpath) == root:
                dirnames[:] = [d for d in dirnames if d not in skip]
            for file in filenames:
                path = Path(dirpath) / file
                try:
                    size = path.lstat().st_size
                except OSError:
                    continue
                row = kinds.setdefault(_kind(path, root), [0, 0])
                row[0] += 1
                row[1] += size
    rows = tuple(sorted(((k, n, b) for k, (n, b) in kinds.items()), key=lambda r: -r[2]))
    return CacheArea(
        name=name,
        path=str(root),
        entries=sum(r[1] for r in rows),
        bytes=sum(r[2] for r in rows),
        cap_bytes=cap,
        kinds=rows,
    )


def prune(max_bytes: int | None = None) -> tuple[int, int]:
    """Both folders under their caps (or `max_bytes` each), least recently used first.
    Returns the bytes removed from (received, host)."""
    received = wire.place()
    gone_received = wire.bound(received, max_bytes) if received.is_dir() else 0
    gone_host = 0
    host = received.parent
    if host.is_dir():
        cap = store.host_cap() if max_bytes is None else max_bytes
        gone_host = store.prune(str(host), cap)  # as a probe prunes it (received/ skipped)
    return gone_received, gone_host


def clear() -> int:
    """Remove both folders whole, never through a link (InputError when the cache folder
    is one). Returns the bytes really removed."""
    root = wire.place().parent
    if root.is_symlink():
        raise InputError(
            f"{root} is a link to {os.readlink(root)}: envsync never clears through a link",
            tip=f"remove the link (rm {root}), or clear what it points to by hand",
        )
    held = _held(root)
    shutil.rmtree(root, ignore_errors=True)  # a link inside is removed, never followed
    return held - _held(root)


def _held(root: Path) -> int:
    """The bytes of the files under `root`, no link followed (a link counts as itself)."""
    total = 0
    if root.is_dir() and not root.is_symlink():
        for dirpath, _, filenames in os.walk(root):
            for name in filenames:
                try:
                    total += os.lstat(os.path.join(dirpath, name)).st_size
                except OSError:
                    continue
    return total
