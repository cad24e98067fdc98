"""The startup import graph: what the service's entrypoint imports, read with ast, never run.

Modules of the "internal" packages (the entrypoint's own, the watched ones) are followed
through their module-level edges; other modules are read once for the names they bind
(and through `import *`), not followed. A name imported from a lazy module (lazy.py) is
looked for in the submodule its table names.
"""

from __future__ import annotations

import hashlib
import os

from .caches import cache_path, load_cache, save_cache
from .files import read_bytes
from .finder import ModuleFinder
from .mentions import Mentions
from .roots import launch_roots, package_submodules
from .shared import RUNS

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def startup_graph(
    options: dict[str, Any], finder: ModuleFinder, base: str | None, digest: str
) -> dict[str, Any] | None:
    """The graph of the roots in `options` (None: no roots), with parsed facts cached."""
    roots = options.get("roots") or []
    if not roots:
        return None
    roots, resolved, main_file = launch_roots(roots, options, finder.searched)
    internal = tuple(options.get("internal") or [r.partition(".")[0] for r in roots])
    internal += tuple(r.partition(".")[0] for r in roots if r.partition(".")[0] not in internal)
    path = cache_path(base, "imports", digest)
    cache = load_cache(path)
    if main_file:
        # A script: its folder first on sys.path, as Python puts it (not with -I or -P).
        paths = list(finder.paths)
        if not options.get("isolated"):
            paths.insert(0, os.path.dirname(main_file))
        finder = ModuleFinder(paths, finder.editable, finder.searched)
        finder.cache["__main__"] = ("source", main_file, None)
    graph = GraphBuilder(finder, internal, cache)
    for root in roots:
        if root.endswith(".*"):  # every module of a package (a registry imports them all)
            package = root[:-2]
            found = finder.find(package)
            for sub in package_submodules(package, (found and found[2]) or []):
                graph.want(sub, True)
            root = package
        graph.want(root, True)
    graph.run()
    if graph.fresh and path:
        save_cache(path, cache)
    modules = graph.modules
    # The standard library does not drift apart from the interpreter: keep it out.
    stdlib = {n for n, m in modules.items() if m["kind"] in ("stdlib", "builtin")}
    for name in stdlib:
        del modules[name]
    for info in modules.values():
        if "imports" in info:
            info["imports"] = [e for e in info["imports"] if e["module"] not in stdlib]
    return {
        "roots": list(roots),
        "resolved": resolved,
        "internal": list(internal),
        "modules": modules,
        "parsed": graph.parsed,
        "cached": graph.cached,
    }


class GraphBuilder:
    """Reads modules from a queue, each once (again when it is to be followed after all)."""

    def __init__(self, finder: ModuleFinder, internal: tuple[str, ...], cache: dict[str, Any]):
        self.finder = finder
        self.internal = internal
        self.cache = cache  # parsed facts by "sha256:module:is-package"
        self.modules: dict[str, dict[str, Any]] = {}
        self.queue: list[str] = []
        # name -> follow its imports (True) or only read what it binds (False)
        self.mode: dict[str, bool] = {}
        self.requested: dict[str, set[str]] = {}  # module -> names imported from it
        self.mentions = Mentions(finder)
        self.parsed = 0
        self.cached = 0
        self.fresh = 0

    def is_internal(self, name: str) -> bool:
        return name.partition(".")[0] in self.internal

    def want(self, name: str, follow: bool) -> None:
        if not name:
            return
        before = self.mode.get(name)
        if before is None or (follow and not before):
            self.mode[name] = follow
            self.modules.pop(name, None)  # seen shallow, now to be followed: read it again
            self.queue.append(name)

    def request(self, name: str, item: str) -> None:
        """A name imported from a module: a lazy module's lives in a submodule its table
        names; read that submodule too (and, through tables of tables, the next one)."""
        names = self.requested.setdefault(name, set())
        if item in names:
            return
        names.add(item)
        lazy = (self.modules.get(name) or {}).get("lazy")
        if lazy is not None:
            self.resolve_lazy(name, lazy, item)

    def resolve_lazy(self, name: str, lazy: dict[str, Any], item: str) -> None:
        owner = lazy["names"].get(item)
        if owner is not None:
            if owner != name:
                self.want(owner, False)
                if owner != name + "." + item:
                    self.request(owner, item)
            return
        # Read only the star submodules whose files may bind the name: those that define
        # it or list it in a string (as `__all__` does) first; those that only import it
        # (a re-export) only when no module defines it. A "?" candidate says some were not
        # read: not found is then "cannot tell".
        tiers = [(star, self.mentions.tier(star, item)) for star in lazy["stars"]]
        strong = [star for star, tier in tiers if tier == 2]
        weak = [star for star, tier in tiers if tier == 1]
        hits = strong or weak
        lazy.setdefault("candidates", {})[item] = hits + (["?"] if strong and weak else [])
        for star in hits:
            self.want(star, False)
            self.request(star, item)

    def run(self) -> None:
        while self.queue:
            name = self.queue.pop(0)
            if name not in self.modules:
                self.read(name)

    def read(self, name: str) -> None:
        """One module: found, its source's facts (parsed or cached), its edges followed."""
        found = self.finder.find(name)
        if found is None:
            self.modules[name] = {"kind": "missing"}
            return
        kind, origin, locations = found
        info: dict[str, Any] = {"kind": kind, "file": origin}
        self.modules[name] = info
        parent = name.rpartition(".")[0]
        if parent:
            self.want(parent, self.is_internal(parent))
        if kind != "source" or origin is None:
            return
        facts = self.facts(name, origin, locations is not None, info)
        if facts is None:
            return
        follow = self.mode[name] and self.is_internal(name)
        info.update({k: facts[k] for k in ("defines", "all", "dynamic", "stars")})
        lazy = facts.get("lazy")
        if lazy is not None:
            lazy = dict(lazy)
            if lazy.pop("dir") and locations:
                lazy["stars"] = lazy["stars"] + [
                    s
                    for s in package_submodules(name, locations, subpackages=True)
                    if s not in lazy["stars"]
                ]
            info["lazy"] = lazy
            for item in sorted(self.requested.get(name, ())):
                self.resolve_lazy(name, lazy, item)
        # Import edges matter only where startup follows them.
        info["imports"] = facts["imports"] if follow else []
        for star in facts["stars"]:
            self.want(star, follow and self.is_internal(star))
        if follow:
            self.follow(facts["imports"])

    def facts(
        self, name: str, origin: str, is_package: bool, info: dict[str, Any]
    ) -> dict[str, Any] | None:
        """The module's parsed facts, from the cache when its content was parsed before
        (None: unreadable or not Python, said in `info`)."""
        try:
            data = read_bytes(origin)
        except OSError as e:
            info["kind"] = "error"
            info["error"] = f"cannot read: {e.strerror}"
            return None
        digest = hashlib.sha256(data).hexdigest()
        info["sha256"] = digest
        # Relative imports resolve against the module's own name: it is part of the key.
        key = f"{digest}:{name}:{int(is_package)}"
        facts: dict[str, Any] | None = self.cache.get(key)
        if facts is not None:
            self.cached += 1
            return facts
        from .analyse import analyze_source  # ast: only when something is to be parsed

        try:
            facts = analyze_source(data.decode("utf-8", "replace"), name, is_package)
        except (SyntaxError, ValueError, RecursionError) as e:
            info["kind"] = "error"
            info["error"] = f"cannot parse: {e}"
            return None
        self.cache[key] = facts
        self.fresh += 1
        self.parsed += 1
        return facts

    def follow(self, edges: list[dict[str, Any]]) -> None:
        """Queue what a followed module's edges reach."""
        for edge in edges:
            target = edge["module"]
            runs = edge["context"] in RUNS
            inner = self.is_internal(target)
            if inner and runs:
                self.want(target, True)
            elif runs or edge["context"] == "function":
                # Know whether it exists and what it binds; do not follow it.
                self.want(target, False)
            if edge["names"] and (runs or edge["context"] == "function"):
                for item in edge["names"]:
                    if item != "*":
                        sub = target + "." + item
                        if self.finder.find(sub) is not None:
                            self.want(sub, inner and runs)
                        else:
                            self.request(target, item)
