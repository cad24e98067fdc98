"""Whole startup graphs reused while nothing they read or searched has changed.

A warm run then stats files instead of finding, reading and hashing every module: the
graph is keyed by everything that shapes it (roots, sys.path, editable finders, the
interpreter, this host side's digest), and valid while every source it read and every
folder it searched has its size, mtime, ctime and inode unchanged. Nothing modified in
the last seconds is cached (git's racy rule, as for file hashes).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time

from .caches import cache_path, save_text
from .roots import script_path
from .shared import Stamp, racy, stamp
from .startup import startup_graph

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, List, Optional

    from .finder import ModuleFinder

    Stamped = Optional[List[int]]


class RawJSON:
    """JSON text already encoded: spliced into the output as it is (a cached graph), and
    the cache file it was read from (what later stages may key their own caches by)."""

    __slots__ = ("path", "text")

    def __init__(self, text: str, path: str | None = None) -> None:
        self.text = text
        self.path = path


def file_stamp(path: str) -> Stamped:
    """What changes whenever a file or folder changes: a new entry changes its folder's
    mtime, a write its mtime and ctime, a replacement its inode (None: it does not exist)."""
    found = stamp(path)
    return found.plain() if isinstance(found, Stamp) else None


def graph_stamps(graph: dict[str, Any], searched: set[str], extra: list[str]) -> list[Any]:
    """Stamps of every source read and every folder searched to build `graph`."""
    paths = set(searched)
    paths.update(extra)
    for info in graph["modules"].values():
        if info.get("file"):
            paths.add(info["file"])
    return [[p, file_stamp(p)] for p in sorted(paths)]


def graph_key(options: dict[str, Any], finder: ModuleFinder) -> str:
    return hashlib.sha256(
        json.dumps(
            [
                [options.get(k) for k in ("roots", "internal", "workdir", "isolated", "main")],
                finder.paths,
                sorted(finder.editable.items()),
                sys.version,
                sys.executable,
                os.path.expanduser("~"),
            ]
        ).encode()
    ).hexdigest()[:24]


def still_valid(path: str) -> RawJSON | None:
    """The graph cached at `path` while every stamp it lists holds (None: read it anew)."""
    try:
        with open(path, "rb") as f:
            stamps = json.loads(f.readline().decode("utf-8"))
            if all(file_stamp(p) == known for p, known in stamps):
                return RawJSON(f.read().decode("utf-8").strip(), path)
    except (OSError, ValueError, TypeError):
        return None
    return None


def cached_startup_graph(
    options: dict[str, Any], finder: ModuleFinder, base: str | None, digest: str
) -> dict[str, Any] | RawJSON | None:
    """startup_graph, or the cached graph as RawJSON while it is still valid."""
    pattern = cache_path(base, "graph", digest)
    if not pattern or not options.get("roots"):
        return startup_graph(options, finder, base, digest)
    path = pattern % graph_key(options, finder)
    valid = still_valid(path)
    if valid is not None:
        return valid
    graph = startup_graph(options, finder, base, digest)
    if graph is None:
        return None
    extra = list(finder.paths)
    for root in options.get("roots") or []:
        if root.startswith("script:"):  # found or not: creating it changes the graph
            extra.append(script_path(root, options))
    stamps = graph_stamps(graph, finder.searched, extra)
    now = time.time_ns()
    if all(s is None or not racy(s[1], now) for _, s in stamps):
        cached = dict(graph, parsed=0, cached=graph["parsed"] + graph["cached"])
        text = json.dumps(stamps, separators=(",", ":")) + "\n" + json.dumps(cached)
        save_text(path, text)
    return graph
