"""A cached graph patched where only some of its modules' files changed.

While every folder the walk searched keeps its listing, the finder finds the same files,
and a changed file's new facts decide whether the walk would take the same course: the
edges it follows (their modules, names and contexts), its doors' prefixes, its stars, a
lazy table, an import hook. Where that course is the old one's, the walk would visit the
same modules in the same order, and only the changed modules' entries differ: each is
made as the walk makes it (GraphBuilder.absorb), from its new facts, without walking the
rest again. So an edited line costs its file's parse, not a walk over every module.

It is checked as it goes: the old entry is first made again from the old facts and must
come out as the cache holds it. Anything else is walked again whole: a folder that changed,
a file that is no module's source (a .pth file, a script), a module with a lazy table or
under one (a text search chose what to read there: mentions.py), facts that are not
kept, a file that no longer parses, another course.
"""

from __future__ import annotations

import json
import os
import time

from ..facts.files import MODULE_BOUND, read_bytes
from ..graph.parallel import parse
from ..graph.startup import GraphBuilder, file_content, well_formed
from ..shared import racy, text_digest
from .chunks import load_chunks, save_chunks
from .graphfile import file_stamp, holds, save_graph
from .store import read_file

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Dict, List, Optional, Tuple

    from ..graph.finder import ModuleFinder
    from .store import Store

    Cached = Tuple[List[Any], Dict[str, Any], Dict[str, Any], Dict[str, str], str]
    # a patched graph: its header, its modules' text, whether it is the graph file now,
    # and the digest of the modules' text it was patched from
    Patched = Tuple[str, bytes, bool, str]
    HashCache = Optional[Dict[str, List[Any]]]

PATCHED: list[str] = []  # the modules patched on this run (what tests look at)


def read_cached(path: str, chunks: str) -> Cached | None:
    """A graph cache file's stamps, header, modules, keys and the digest of the modules'
    text (None: unreadable, or one kept without the modules' facts keys)."""
    try:
        lines = read_file(path)[0].decode("utf-8").split("\n")
        stamps, header, index, keys = (json.loads(line) for line in lines[:4])
    except (OSError, ValueError, TypeError, UnicodeDecodeError):
        return None
    if not all(isinstance(v, t) for v, t in ((stamps, list), (header, dict), (keys, dict))):
        return None
    if not isinstance(index, list) or not all(isinstance(d, str) for d in index):
        return None
    text = load_chunks(chunks, index)
    if not text:
        return None
    try:
        modules = json.loads(text.decode("utf-8"))
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(modules, dict):
        return None
    return stamps, header, modules, keys, text_digest(text)


def course(facts: dict[str, Any]) -> list[Any]:
    """What of a module's facts decides where the walk goes from it."""
    return [
        [[e["module"], e["names"], e["context"]] for e in facts["imports"]],
        [[d.get("prefix"), d["context"]] for d in facts["doors"]],
        facts["stars"],
        facts.get("lazy"),
        bool(facts.get("hooks")),
    ]


def under_lazy(modules: dict[str, Any]) -> list[str]:
    """The star submodules of the graph's lazy tables: a text search read their files."""
    out: list[str] = []
    for info in modules.values():
        lazy = info.get("lazy") if isinstance(info, dict) else None
        if isinstance(lazy, dict):
            out.extend(s for s in lazy.get("stars") or [] if isinstance(s, str))
    return out


def key_parts(key: str, sha: str) -> tuple[bool, bool, tuple[str, ...]] | None:
    """(is a package, runs as __main__, the functions startup calls) from a facts key
    ("SHA:NAME:PKG[:MAIN:RUNS]", startup.GraphBuilder.key)."""
    if not key.startswith(sha + ":"):
        return None
    parts = key[len(sha) + 1 :].split(":")
    if len(parts) not in (2, 4):
        return None
    runs = tuple(parts[3].split(",")) if len(parts) == 4 and parts[3] else ()
    return parts[1] == "1", len(parts) == 4 and parts[2] == "1", runs


class Patcher:
    """Patches the entries of a cached graph's changed modules (None where it cannot)."""

    def __init__(
        self, finder: ModuleFinder, store: Store, header: dict[str, Any], hashes: HashCache
    ) -> None:
        self.finder = finder
        self.store = store
        self.header = header
        self.hashes = hashes
        self.parsed = 0

    def builder(self) -> GraphBuilder:
        internal = tuple(self.header.get("internal") or ())
        main = self.header.get("main")
        return GraphBuilder(self.finder, internal, self.store, main, None, self.hashes)

    def replay(self, name: str, info: dict[str, Any], facts: Any, follow: bool) -> dict[str, Any]:
        """The entry the walk makes for `name` from `facts` (`info`: kind, file, sha256),
        followed or not, with the edges to the standard library still in."""
        sandbox = self.builder()
        sandbox.mode[name] = follow
        made = dict(info)
        found = self.finder.find(name)
        sandbox.absorb(name, made, facts, found[2] if found else None)
        sandbox.mentions.close()
        return made

    def extension_again(self, name: str, modules: dict[str, Any]) -> bool:
        """Whether `name` is an extension module that the finder finds at the same file
        again: its entry is its kind and file alone (a wheel reinstalled, a library
        rebuilt), so it stands as it was."""
        old = modules.get(name)
        if not isinstance(old, dict) or old.get("kind") != "extension":
            return False
        found = self.finder.find(name)
        return (
            found is not None
            and found[0] == "extension"
            and found[1] == old.get("file")
            and os.path.isfile(str(found[1]))
        )

    def entry(self, name: str, old: dict[str, Any], key: str) -> tuple[dict[str, Any], str] | None:
        """The module's new entry and facts key (None: walk again)."""
        sha = old.get("sha256")
        origin = old.get("file")
        found = self.finder.find(name)
        if not isinstance(sha, str) or not isinstance(origin, str) or found is None:
            return None
        if found[0] != "source" or found[1] != origin or old.get("kind") != "source":
            return None
        parts = key_parts(key, sha)
        if parts is None:
            return None
        try:
            new_sha, data = file_content(origin, self.hashes)
        except OSError:
            return None
        if new_sha == sha:
            return old, key  # touched, the same content
        new_key = new_sha + key[len(sha) :]
        before = self.store.get(key)
        facts = self.store.get(new_key)
        if facts is None:
            is_package, as_main, runs = parts
            try:
                data = data or read_bytes(origin, MODULE_BOUND)
            except OSError:
                return None  # past the bound, or unreadable: the walk says which
            status, facts = parse(data, name, is_package, as_main, runs)
            if status != "ok":
                return None
            self.store.put(new_key, facts)
            self.parsed += 1
        if not (well_formed(before) and well_formed(facts)) or before.get("lazy") is not None:
            return None
        if course(facts) != course(before):
            return None
        made = [self.made_again(name, old, before, facts, follow) for follow in (True, False)]
        fits = [m for m in made if m is not None]
        if not fits or any(m != fits[0] for m in fits):
            return None
        fits[0]["sha256"] = new_sha
        return fits[0], new_key

    def made_again(
        self, name: str, old: dict[str, Any], before: Any, facts: Any, follow: bool
    ) -> dict[str, Any] | None:
        """The new entry, where the old facts made with `follow` give the old entry."""
        base = {"kind": old["kind"], "file": old["file"], "sha256": old["sha256"]}
        again = self.replay(name, base, before, follow)
        # the standard library's edges are left out of the graph (startup_graph)
        kept = {e["module"] for e in old.get("imports") or []}
        stdlib = {e["module"] for e in again.get("imports") or []} - kept
        if "imports" in again:
            again["imports"] = [e for e in again["imports"] if e["module"] not in stdlib]
        if again != old:
            return None
        new = self.replay(name, base, facts, follow)
        if "imports" in new:
            new["imports"] = [e for e in new["imports"] if e["module"] not in stdlib]
        return new


def patched_graph(
    path: str, chunks: str, finder: ModuleFinder, store: Store, hashes: HashCache
) -> Patched | None:
    """The cached graph at `path` with its changed modules' entries made anew, kept there
    again (header, modules text, whether it was kept, the digest of the modules it was
    patched from), where only modules' source files changed and each takes the walk's old
    course (None: walk it again, as for a cache file of another shape)."""
    del PATCHED[:]
    try:
        return _patched(path, chunks, finder, store, hashes)
    except (KeyError, TypeError, AttributeError, ValueError, IndexError):
        del PATCHED[:]
        return None


def _patched(
    path: str, chunks: str, finder: ModuleFinder, store: Store, hashes: HashCache
) -> Patched | None:
    """patched_graph, unguarded."""
    cached = read_cached(path, chunks)
    if cached is None:
        return None
    stamps, header, modules, keys, was = cached
    now = time.time_ns()
    changed = [row for row in stamps if not holds(row, now)]
    owners: dict[str, list[str]] = {}
    for name, info in modules.items():
        if isinstance(info, dict) and isinstance(info.get("file"), str):
            owners.setdefault(info["file"], []).append(name)
    lazy = under_lazy(modules)
    patcher = Patcher(finder, store, header, hashes)
    done = []
    for row in changed:
        names = owners.get(row[0]) or []
        if len(row) == 2 and len(names) == 1 and patcher.extension_again(names[0], modules):
            row[1] = file_stamp(row[0])  # an extension module replaced: the walk never reads one
            continue
        if len(row) != 2 or len(names) != 1 or names[0] not in keys:
            return None  # a folder, a file of no module or of two: walk again
        name = names[0]
        if any(name == s or name.startswith(s + ".") for s in lazy):
            return None
        made = patcher.entry(name, modules[name], keys[name])
        if made is None:
            return None
        modules[name], keys[name] = made
        row[1] = file_stamp(row[0])
        done.append(name)
    text = json.dumps(modules, separators=(",", ":")).encode("utf-8")
    kept = all(row[1] is None or not racy(row[1][1], now) for row in stamps)
    if kept:
        save_graph(path, stamps, header, save_chunks(chunks, text), keys, modules)
    PATCHED.extend(done)
    told = dict(header, parsed=patcher.parsed, cached=len(keys) - patcher.parsed)
    return json.dumps(told, separators=(",", ":")), text, kept, was
