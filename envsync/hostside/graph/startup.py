"""The startup import graph: what the service's entrypoint imports, read with ast, never run.

Every module startup may run is read and followed, in every package but the standard
library: its module-level imports, those under a condition or a guard, and those inside
its functions (a function may be called at startup; envsync does not read calls), each
import's parent packages first, as Python runs them. A name imported from a lazy module
(lazy.py) is looked for in the submodule its table names, and that submodule is followed
too. The roots: the launch command's modules (a console script's module with its
function, a `-m` module as __main__), and what the interpreter's site runs at every start
(the import lines of .pth files, sitecustomize). Where reading stops (an extension module,
a computed import, a file that does not parse) the module says so (kind, doors).
"""

from __future__ import annotations

import hashlib
import os
import stat

from ..caches.folder import cache_path
from ..caches.mentions import Mentions
from ..caches.store import Store, open_store
from ..facts.files import (
    MODULE_BOUND,
    TooLarge,
    keep_digest,
    known_digest,
    read_bytes,
    stream_sha256,
)
from ..shared import RUNS
from .finder import ModuleFinder
from .parallel import Ahead, parse, workers
from .roots import launch_roots, package_submodules, site_roots

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Dict, List

    from ..caches.share import Share

    HashCache = Dict[str, List[Any]]


def startup_graph(
    options: dict[str, Any],
    finder: ModuleFinder,
    base: str | None,
    digest: str,
    hashes: HashCache | None = None,
    share: Share | None = None,
    keys: dict[str, str] | None = None,
) -> dict[str, Any] | None:
    """The graph of the roots in `options` (None: no roots), with parsed facts kept by
    content (store.py) and files' digests by their stat (`hashes`: the probe's cache of
    file hashes, updated in place); `share`: the packs other hosts' facts came in, taken
    before the walk, and the graph's own packs made after it (share.py); `keys`: filled
    with each module's facts key."""
    roots = options.get("roots") or []
    if not roots:
        return None
    graph, roots, resolved = builder(GraphBuilder, options, finder, base, digest, hashes)
    if share is not None:
        share.seed(graph.store)
    site, site_modules = site_roots(graph.finder)
    for name in site:
        if name in site_modules:
            graph.pseudo(name, site_modules[name])
        else:
            graph.want(name, True)
    for root in roots:
        if root.endswith(".*"):  # every module of a package (a registry imports them all)
            package = root[:-2]
            found = graph.finder.find(package)
            for sub in package_submodules(package, (found and found[2]) or []):
                graph.want(sub, True)
            root = package
        graph.want(root, True)
    graph.run()
    modules = graph.modules
    internal = graph.internal
    main = graph.main
    if share is not None:
        share.make(graph.keys, modules, graph.store, graph.mentions.kept())
    if keys is not None:
        keys.update(graph.keys)
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
        "main": main,
        "site": site,
        "internal": list(internal),
        "modules": modules,
        "parsed": graph.parsed,
        "cached": graph.cached,
    }


def builder(
    kind: type[GraphBuilder],
    options: dict[str, Any],
    finder: ModuleFinder,
    base: str | None,
    digest: str,
    hashes: HashCache | None = None,
) -> tuple[GraphBuilder, list[str], dict[str, str]]:
    """A reader of the roots in `options` as startup runs them: the roots as module names
    (a `-m pkg` root gains pkg.__main__), what each resolved to, and the reader (a script
    as __main__, its folder first on sys.path; the functions startup calls in a console
    script's module; the facts store of `base`)."""
    roots, resolved, main_file, runs = launch_roots(
        list(options.get("roots") or []), options, finder.searched
    )
    internal = tuple(options.get("internal") or [r.partition(".")[0] for r in roots])
    internal += tuple(r.partition(".")[0] for r in roots if r.partition(".")[0] not in internal)
    store = open_store(cache_path(base, "imports", digest))
    if main_file:
        # A script: its folder first on sys.path, as Python puts it (not with -I or -P).
        paths = list(finder.paths)
        if not options.get("isolated"):
            paths.insert(0, os.path.dirname(main_file))
        finder = ModuleFinder(paths, finder.editable, finder.searched)
        finder.cache["__main__"] = ("source", main_file, None)
    main = options.get("main")
    if main and main in roots:
        found = finder.find(main)
        if found is not None and found[2] is not None:  # `-m pkg` runs pkg/__main__.py
            main = main + ".__main__"
            roots.append(main)
    else:
        main = "__main__" if main_file else None
    return kind(finder, internal, store, main, runs, hashes), roots, resolved


def file_content(path: str, hashes: HashCache | None) -> tuple[str, bytes | None]:
    """A file's sha256, and its bytes when they had to be read: a file whose stat is the
    one its hash was kept with in `hashes` is not read (one modified in the last seconds
    is, always: git's racy rule)."""
    st = os.lstat(path)
    cache = hashes if stat.S_ISREG(st.st_mode) else None  # a link: read through
    known = known_digest(path, st, cache)
    if known is not None:
        return known, None
    if os.stat(path).st_size > MODULE_BOUND:  # hashed in pieces, never held (nor parsed)
        sha = stream_sha256(path)
        keep_digest(path, st, sha, cache)
        return sha, None
    data = read_bytes(path, MODULE_BOUND)
    sha = hashlib.sha256(data).hexdigest()
    keep_digest(path, st, sha, cache)
    return sha, data


def _edges(value: Any, *fields: str) -> bool:
    return isinstance(value, list) and all(
        isinstance(e, dict) and all(isinstance(e.get(f), str) for f in fields) for e in value
    )


def well_formed(facts: Any) -> bool:
    """Kept facts of the shape analyse.py makes, as far as the walk reads them: an entry
    whose text matches its digest may still be planted, and must not stop the probe."""
    return (
        isinstance(facts, dict)
        and _edges(facts.get("imports"), "module", "context")
        and all(isinstance(e.get("names"), list) for e in facts["imports"])
        and _edges(facts.get("doors"), "context", "statement")
        and all(
            isinstance(facts.get(k), list) and all(isinstance(v, str) for v in facts[k])
            for k in ("defines", "stars")
        )
        and isinstance(facts.get("all"), (list, type(None)))
        and isinstance(facts.get("dynamic"), bool)
        and isinstance(facts.get("lazy"), (dict, type(None)))
    )


class GraphBuilder:
    """Reads modules from a queue, each once (again when it is to be followed after all)."""

    def __init__(
        self,
        finder: ModuleFinder,
        internal: tuple[str, ...],
        store: Store,
        main: str | None = None,
        runs: dict[str, list[str]] | None = None,
        hashes: HashCache | None = None,
    ):
        self.finder = finder
        self.internal = internal
        self.store = store  # parsed facts by "sha256:module:is-package[:main][:functions]"
        self.hashes = hashes  # path -> [size, mtime, ctime, inode, sha256] (files.py)
        self.main = main  # the module that runs as __main__ (a script, `-m`)
        self.runs = runs or {}  # module -> its functions startup calls (a console script's)
        self.modules: dict[str, dict[str, Any]] = {}
        self.queue: list[str] = []
        self.head = 0  # the next name of the queue to read
        self.scan = 0  # the next name of the queue parse_ahead looks at
        self.hooked: set[str] = set()  # packages that install an import hook (run())
        # name -> follow its imports (True) or only read what it binds (False)
        self.mode: dict[str, bool] = {}
        # module -> names imported from it, each with whether the importer is followed
        self.requested: dict[str, dict[str, bool]] = {}
        self.mentions = Mentions(finder, store, lambda path: self.content(path)[0])
        self.parsed = 0
        self.cached = 0
        self.keys: dict[str, str] = {}  # module -> the store key of its facts
        self.ahead = Ahead(1)  # run() starts the workers
        self.considered: set[str] = set()  # names parse_ahead looked at

    def pseudo(self, name: str, info: dict[str, Any]) -> None:
        """A module that is no module: a .pth file's import lines, read as one."""
        self.modules[name] = info
        self.mode[name] = True
        self.follow(info["imports"])

    def want(self, name: str, follow: bool) -> None:
        if not name:
            return
        before = self.mode.get(name)
        if before is None or (follow and not before):
            self.mode[name] = follow
            self.modules.pop(name, None)  # seen shallow, now to be followed: read it again
            self.queue.append(name)

    def request(self, name: str, item: str, follow: bool) -> None:
        """A name imported from a module: a lazy module's lives in a submodule its table
        names; read that submodule too (and, through tables of tables, the next one),
        followed when the import is: importing the name runs it."""
        names = self.requested.setdefault(name, {})
        if item in names and (names[item] or not follow):
            return
        names[item] = follow
        lazy = (self.modules.get(name) or {}).get("lazy")
        if lazy is not None:
            self.resolve_lazy(name, lazy, item, follow)

    def resolve_lazy(self, name: str, lazy: dict[str, Any], item: str, follow: bool) -> None:
        owner = lazy["names"].get(item)
        if owner is not None:
            if owner != name:
                self.want(owner, follow)
                if owner != name + "." + item:
                    self.request(owner, item, follow)
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
            self.want(star, follow)
            self.request(star, item, follow)

    def run(self) -> None:
        self.ahead = Ahead(workers())
        try:
            while self.head < len(self.queue):
                if self.ahead.room():
                    self.parse_ahead()
                name = self.queue[self.head]
                self.head += 1
                if name not in self.modules:
                    self.read(name)
        finally:
            self.ahead.close()
            self.mentions.close()
        # A module no finder of the files finds, under a package that installs an import
        # hook (sys.meta_path), may be served by that hook: never called missing.
        for name, info in self.modules.items():
            if info.get("kind") == "missing" and any(
                name.startswith(package + ".") for package in self.hooked
            ):
                self.modules[name] = {"kind": "provided"}

    def parse_ahead(self) -> None:
        """Hand the next files of the queue whose facts are not kept to the workers (each
        name of the queue is looked at once: the walk goes on from where this stopped)."""
        self.scan = max(self.scan, self.head)
        while self.scan < len(self.queue):
            if not self.ahead.room():
                return
            name = self.queue[self.scan]
            self.scan += 1
            if name in self.modules or name in self.considered:
                continue
            self.considered.add(name)
            found = self.finder.find(name)
            if found is None or found[0] != "source" or found[1] is None:
                continue
            try:
                sha, data = self.content(found[1])
            except OSError:
                continue
            key, as_main, runs = self.key(name, sha, found[2])
            if key not in self.store:
                if data is None:
                    try:
                        data = read_bytes(found[1], MODULE_BOUND)
                    except OSError:
                        continue  # read in its turn, which says why
                self.ahead.submit(key, data, name, found[2] is not None, as_main, runs)

    def content(self, path: str) -> tuple[str, bytes | None]:
        return file_content(path, self.hashes)

    def key(self, name: str, digest: str, locations: object) -> tuple[str, bool, tuple[str, ...]]:
        """The parsed-facts key of a module's file: relative imports resolve against the
        module's own name, so it is part of the key, and so is how it runs (as __main__,
        the functions startup calls in it)."""
        as_main = name == self.main
        runs = tuple(self.runs.get(name, ()))
        key = f"{digest}:{name}:{int(locations is not None)}"
        if as_main or runs:
            key += f":{int(as_main)}:{','.join(runs)}"
        return key, as_main, runs

    def read(self, name: str) -> None:
        """One module: found, its source's facts (parsed or cached), its edges followed."""
        found = self.finder.find(name)
        parent = name.rpartition(".")[0]
        if found is None:
            self.modules[name] = {"kind": "missing"}
            if parent:  # `import pkg.gone` runs pkg/__init__.py before it fails
                self.want(parent, self.mode[name])
            return
        kind, origin, locations = found
        info: dict[str, Any] = {"kind": kind, "file": origin}
        self.modules[name] = info
        if kind in ("stdlib", "builtin"):
            return  # the same on both hosts, left out of the graph: nothing to read
        if parent:
            self.want(parent, self.mode[name])  # Python runs a module's parent packages first
        if kind != "source" or origin is None:
            return
        facts = self.facts(name, origin, locations is not None, info)
        if facts is not None:
            self.absorb(name, info, facts, locations)

    def absorb(
        self,
        name: str,
        info: dict[str, Any],
        facts: dict[str, Any],
        locations: list[str] | None,
    ) -> None:
        """A source module's facts into its `info`, and its edges followed (or, where
        only what it binds is read, its star imports)."""
        follow = self.mode[name]
        info.update({k: facts[k] for k in ("defines", "all", "dynamic", "stars")})
        if facts.get("getattr") is not None:
            info["getattr"] = facts["getattr"]
        if facts.get("factories"):
            info["factories"] = facts["factories"]
        if facts.get("hooks"):
            self.hooked.add(name)
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
            for item, wanted in sorted(self.requested.get(name, {}).items()):
                self.resolve_lazy(name, lazy, item, wanted)
        # Import edges (and doors) matter only where startup follows them.
        info["imports"] = facts["imports"] if follow else []
        if follow and facts.get("checks"):
            info["checks"] = facts["checks"]  # version checks that raise (versionchecks.py)
        if follow and facts.get("doors"):
            info["doors"], opened = self.open_doors(facts["doors"])
            if opened:
                info["imports"] = info["imports"] + opened
        for star in facts["stars"]:
            self.want(star, follow)
        if follow:  # the opened doors' edges too: what is behind them is read
            self.follow(info["imports"])

    def facts(
        self, name: str, origin: str, is_package: bool, info: dict[str, Any]
    ) -> dict[str, Any] | None:
        """The module's parsed facts, from the cache when its content was parsed before
        (None: unreadable or not Python, said in `info`)."""
        try:
            digest, data = self.content(origin)
            info["sha256"] = digest
            key, as_main, runs = self.key(name, digest, True if is_package else None)
            facts: dict[str, Any] | None = self.store.get(key)
            if facts is not None and not well_formed(facts):
                self.store.drop(key)  # a planted entry: learned again, never used
                facts = None
            if facts is not None:
                self.cached += 1
                self.keys[name] = key
                return facts
            if data is None:
                data = read_bytes(origin, MODULE_BOUND)
        except OSError as e:
            info["kind"] = "error"
            info["error"] = f"{'not' if isinstance(e, TooLarge) else 'cannot'} read: {e.strerror}"
            info.pop("sha256", None)
            return None
        # ast: only when something is to be parsed (ahead, in a worker, or here)
        status, value = self.ahead.take(key) or parse(data, name, is_package, as_main, runs)
        if status != "ok":
            info["kind"] = "error"
            info["error"] = value
            return None
        facts = value
        self.store.put(key, facts)
        self.parsed += 1
        self.keys[name] = key
        return facts

    def open_doors(
        self, doors: list[dict[str, Any]]
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """A computed import whose name starts with a package's name can only import a
        module of that package: read them all (each an edge under a condition, at the
        door's line), and the door is closed. Returns the doors and the edges."""
        edges: list[dict[str, Any]] = []
        out = []
        for door in doors:
            prefix = door.get("prefix") or ""
            package = prefix[:-1] if prefix.endswith(".") else prefix.rpartition(".")[0]
            # inside a function a door does not count (docs/explanation/startup-imports.md):
            # only one that runs with its module has its prefix read
            runs = door["context"] in RUNS
            subs = self.subtree(package) if package and runs else None
            if subs is None:
                out.append(door)
                continue
            stem = prefix[len(package) + 1 :]
            context = "if"
            for sub in subs:
                if sub[len(package) + 1 :].startswith(stem):
                    edges.append(
                        {
                            "module": sub,
                            "names": [],
                            "line": door["line"],
                            "context": context,
                            "statement": door["statement"],
                            "condition": "the computed import may name it",
                            "group": None,
                        }
                    )
            out.append(dict(door, read=True))
        return out, edges

    def subtree(self, package: str) -> list[str] | None:
        """Every module of a package, subpackages included (None: not a package)."""
        found = self.finder.find(package)
        if found is None or found[2] is None:
            return None
        out: list[str] = []
        todo = [(package, found[2])]
        while todo:
            name, locations = todo.pop()
            for sub in package_submodules(name, locations, subpackages=True):
                out.append(sub)
                inner = self.finder.find(sub)
                if inner is not None and inner[2] is not None:
                    todo.append((sub, inner[2]))
        return sorted(out)

    def follow(self, edges: list[dict[str, Any]]) -> None:
        """Queue what a followed module's edges reach: every import that may run (inside
        a function too: it runs if startup calls the function), never a type checker's."""
        for edge in edges:
            if edge["context"] == "typing":
                continue
            target = edge["module"]
            self.want(target, True)
            for item in edge["names"]:
                if item != "*":
                    sub = target + "." + item
                    found = self.finder.find(sub)
                    if found is not None and found[0] != "provided":
                        self.want(sub, True)
                    else:
                        self.request(target, item, True)
