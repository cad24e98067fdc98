"""Whole startup graphs reused while nothing they read or searched has changed.

A warm run then stats files instead of finding, reading and hashing every module: the
graph is keyed by everything that shapes it (roots, sys.path, editable finders, the
interpreter, this host side's digest), and valid while every source it read and every
folder it searched has its size, mtime, ctime and inode unchanged. Nothing modified in
the last seconds is cached (git's racy rule, as for file hashes).

A graph is kept and sent in two parts: its header (every field but the modules) and its
modules' JSON text, known by the digest of that text; the host keeps that text in chunks
that its graphs' variants and versions share (chunks.py). envsync keeps the modules it was sent
by their digest, and says which it holds ("known"): modules whose digest it names are not
sent again (collect.py). Its cache file: graphfile.py. Where the environment is back in a
state it had, that state's graph is taken back by its files' content (graphstates.py);
where only some modules' files changed, the cached graph is patched rather than walked
again (graphpatch.py).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time

from ..graph.roots import script_path
from ..graph.startup import startup_graph
from ..shared import racy, text_digest
from .chunks import load_chunks, save_chunks
from .folder import cache_path, save_text
from .graphfile import REFRESHED, graph_stamps, holds, save_graph
from .graphpatch import patched_graph
from .graphstates import TAKEN, taken_back
from .store import open_store, read_file, touch

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from ..graph.finder import ModuleFinder
    from .share import Share


class RawJSON:
    """A graph as JSON text: its header (every field but the modules, with their digest),
    its modules' text, and the cache file it was read from or kept in (what later stages
    may key their own caches by; None: built on this run and not kept)."""

    __slots__ = ("decoded", "digest", "header", "modules", "path", "same_course")

    def __init__(
        self,
        header: str,
        modules: bytes,
        path: str | None = None,
        decoded: dict[str, Any] | None = None,
        same_course: str | None = None,
    ) -> None:
        self.header = header
        self.modules = modules
        self.digest = text_digest(modules)
        self.path = path
        self.decoded = decoded  # the graph it was encoded from, when built on this run
        # a patch (graphpatch.py): the digest of the graph it was made from, whose walk
        # takes the same course (the same modules, imports and doors, by the same files)
        self.same_course = same_course

    def whole(self) -> dict[str, Any]:
        """The graph, decoded."""
        if self.decoded is not None:
            return self.decoded
        graph: dict[str, Any] = json.loads(self.header)
        graph["modules"] = json.loads(self.modules.decode("utf-8"))
        return graph


def encoded(graph: dict[str, Any], path: str | None = None) -> RawJSON:
    header = {k: v for k, v in graph.items() if k != "modules"}
    modules = json.dumps(graph.get("modules", {}), separators=(",", ":")).encode("utf-8")
    return RawJSON(json.dumps(header, separators=(",", ":")), modules, path, graph)


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


def still_valid(path: str, chunks: str) -> RawJSON | None:
    """The graph cached at `path` while every stamp it lists holds (None: read it anew);
    its modules' text from the chunks it names in the folder `chunks`."""
    now = time.time_ns()
    del REFRESHED[:]
    try:
        lines = read_file(path)[0].decode("utf-8").split("\n", 3)
        stamps = json.loads(lines[0])
        if not all(holds(row, now) for row in stamps):
            return None
        header = lines[1].strip()
        index = json.loads(lines[2])
        rest = lines[3] if REFRESHED and len(lines) > 3 else ""
    except (OSError, ValueError, TypeError, IndexError):
        return None
    if not header or not isinstance(index, list) or not all(isinstance(d, str) for d in index):
        return None
    modules = load_chunks(chunks, index)
    if not modules:
        return None
    if REFRESHED:  # the same graph, its folders' new stats kept: later runs only stat them
        lines = [json.dumps(stamps, separators=(",", ":")), header, json.dumps(index)]
        save_text(path, "\n".join(lines) + "\n" + rest)
    else:
        touch(path)
    return RawJSON(header, modules, path)


def cached_startup_graph(
    options: dict[str, Any],
    finder: ModuleFinder,
    base: str | None,
    digest: str,
    hashes: dict[str, list[Any]] | None = None,
    share: Share | None = None,
) -> RawJSON | None:
    """The startup graph (None: no roots), from the cache while it is still valid."""
    del TAKEN[:]
    pattern = cache_path(base, "graph", digest)
    if not pattern or not options.get("roots"):
        graph = startup_graph(options, finder, base, digest, hashes, share)
        return None if graph is None else encoded(graph)
    path = pattern % graph_key(options, finder)
    chunks = cache_path(base, "chunks", digest) or ""
    valid = still_valid(path, chunks)
    walk = share is not None and share.walk  # envsync asked for the graph's packs
    if valid is not None and not walk:
        return valid
    back = None if walk else taken_back(path, chunks, hashes)
    if back is not None:  # a state this environment had: its graph, by its files' content
        return RawJSON(back[0], back[1], path if back[2] else None)
    store = open_store(cache_path(base, "imports", digest))
    patch = None if walk else patched_graph(path, chunks, finder, store, hashes)
    if patch is not None:  # of the old graph's course: what keys itself by it may follow
        return RawJSON(patch[0], patch[1], path if patch[2] else None, same_course=patch[3])
    keys: dict[str, str] = {}
    graph = startup_graph(options, finder, base, digest, hashes, share, keys)
    if graph is None:
        return None
    extra = list(finder.paths)
    for root in options.get("roots") or []:
        if root.startswith("script:"):  # found or not: creating it changes the graph
            extra.append(script_path(root, options))
    stamps = graph_stamps(graph, finder.searched, extra)
    now = time.time_ns()
    fresh = encoded(graph)
    if all(row[1] is None or not racy(row[1][1], now) for row in stamps):
        # the modules' text as sent, under the header of a graph that was cached, in
        # chunks that the graph's other variants and versions share
        header = json.loads(fresh.header)
        index = save_chunks(chunks, fresh.modules)
        save_graph(path, stamps, header, index, keys, graph.get("modules") or {})
        fresh.path = path  # kept: what keys itself by the graph file may keep its own
    return fresh
