"""Reachability by demand: does startup reach this module, how surely, and by which path,
found from the module up to the roots instead of from the roots over everything.

The whole walk (startup.py) reads every module startup may run; a diff asks about a few
modules. For each, the files that name it (search.py) are its only possible importers:
those are parsed (with the same reader, into the same facts store), and the ones whose
imports run the module are climbed in turn, surest first, until a root's module is met
or no importer is left. The answer is the one the whole walk gives over the same facts
(envsync/classify/graph.py: a path is as sure as its weakest edge; a root's context
weakens it too): the surest context, a path of that context from a root, and the parsed
importers; or `None`, no path, and then every file that named the module was read.

The rules the whole graph's reachability follows are read here the same way: an import
runs its module's parent packages, `from X import Y` the submodule X.Y or what X's lazy
table names for Y, a prefix door opened to its package's modules (startup.py), never a
type checker's import; a governed module is never reached through a function.

Where this cannot answer as surely as the walk, it says so (`wide`), and the caller walks:
a word in more files than the budget allows (`numpy`, `torch`), a module a lazy table's
stars may bind, a file the search could not read.
"""

from __future__ import annotations

import os

from ..facts.files import MODULE_BOUND, read_bytes
from ..shared import CONTEXT_RANK, CONTEXTS, weaker
from .analyse import IMPORT_CALLS
from .roots import package_submodules
from .search import Search, holds
from .startup import GraphBuilder

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Dict, Iterator, List, Tuple

    from .finder import ModuleFinder

    Step = Tuple[Dict[str, Any], List[Tuple[str, int]]]  # an edge, what it runs (rank)

# Words in more files than this are settled by the walk from the roots.
WIDE = 600
# A question that needs more searches of the files than this is the walk's too.
BUDGET = 40
# What a computed import's file holds (a door: startup.py opens one with a prefix).
DOOR_WORDS = IMPORT_CALLS
FUNCTION = CONTEXT_RANK["function"]


class Wide(Exception):
    """This question is the walk's to answer (the reason says why)."""


class Reader(GraphBuilder):
    """The whole walk's reader, one module at a time: what the walk would record for a
    module it follows, its edges left for the caller to climb."""

    def want(self, name: str, follow: bool) -> None:
        self.mode.setdefault(name, follow)

    def request(self, name: str, item: str, follow: bool) -> None:
        pass

    def info(self, name: str) -> dict[str, Any]:
        found = self.modules.get(name)
        if found is None:
            self.mode[name] = True  # every module climbed runs at startup: followed
            self.read(name)
            found = self.modules[name]
        return found


class Demand:
    """Questions about one environment's startup, answered from the modules asked about.

    `roots`: (module, context) as envsync's rule packs give them, in their order;
    `governed`: modules a launch flag chooses (never reached through a function)."""

    def __init__(
        self,
        reader: Reader,
        finder: ModuleFinder,
        roots: list[tuple[str, str]],
        site: dict[str, dict[str, Any]],
        governed: set[str],
        search: Search,
        wide: int = WIDE,
        budget: int = BUDGET,
    ) -> None:
        self.reader = reader
        self.finder = finder
        self.roots = roots
        self.site = site  # the .pth files' pseudo-modules: importers of whatever they import
        self.governed = governed
        self.search = search
        self.wide = wide
        self.budget = budget
        self.started = 0  # the searches done before the question being answered
        # (word, scope: "in:TOP" or "out:TOP") -> the files that hold it
        self.hits: dict[tuple[str, str], list[str]] = {}
        self.doors: dict[str, bool] = {}  # file -> it calls import_module or __import__
        self.names: dict[str, list[str]] = {}  # file -> the module names it is found under
        self._steps: dict[str, list[Step]] = {}
        self._owners: dict[tuple[str, str], list[str]] = {}
        self.lazy: dict[str, list[tuple[str, str]]] = {}  # module -> (table, name) sent to it
        self.seed_of: dict[str, int] = {}  # a root's module -> its rank (its context's)
        for module, context in roots:
            for seed in self.seeds(module):
                rank = CONTEXT_RANK[context]
                if rank < self.seed_of.get(seed, len(CONTEXTS)):
                    self.seed_of[seed] = rank

    # -- the graph's rules, as classify/graph.py reads them --------------------------

    def present(self, name: str) -> bool:
        """In the walk's graph and not missing (the standard library is left out of it)."""
        found = self.finder.find(name)
        if found is None:
            return self.hooked(name)
        return found[0] not in ("stdlib", "builtin")

    def hooked(self, name: str) -> bool:
        """A missing module under a package that installs an import hook: provided."""
        parts = name.split(".")
        for i in range(1, len(parts)):
            parent = ".".join(parts[:i])
            found = self.finder.find(parent)
            if found is not None and found[0] == "source":
                self.reader.info(parent)
                if parent in self.reader.hooked:
                    return True
        return False

    def kind(self, name: str) -> str | None:
        if name in self.site:
            return "source"
        found = self.finder.find(name)
        if found is None:
            return "provided" if self.hooked(name) else None
        return found[0]

    def facts(self, name: str) -> dict[str, Any]:
        if name in self.site:
            return self.site[name]
        return self.reader.info(name)

    def seeds(self, module: str) -> list[str]:
        """The modules a root runs: its parent packages, itself, `-m pkg`'s __main__; for
        "pkg.*" every module of the package."""
        if module.endswith(".*"):
            package = module[:-2]
            found = self.finder.find(package)
            subs = package_submodules(package, (found and found[2]) or [])
            names = [s for s in subs if self.present(s)]
            return [*_parents(package), package, *names] if names else []
        if module in self.site:
            return [module]
        if not self.present(module):
            return []
        out = [p for p in _parents(module) if self.present(p)]
        out.append(module)
        main = self.reader.main
        if main and main != module and main.rpartition(".")[0] == module:
            out.append(main)
        return out

    def steps(self, name: str) -> list[Step]:
        """A module's imports but a type checker's, each with the present modules it runs
        and how surely (GraphIndex.steps)."""
        found = self._steps.get(name)
        if found is None:
            found = []
            for edge in self.facts(name).get("imports") or ():
                if edge["context"] == "typing":
                    continue
                targets = [
                    (t, CONTEXT_RANK[c])
                    for t, c in self.targets(edge)
                    if self.present(t) and not (c == "function" and t in self.governed)
                ]
                if targets:
                    found.append((edge, targets))
            self._steps[name] = found
        return found

    def targets(self, edge: dict[str, Any]) -> list[tuple[str, str]]:
        parts = edge["module"].split(".")
        context = edge["context"]
        out = [(".".join(parts[: i + 1]), context) for i in range(len(parts))]
        for item in edge["names"]:
            sub = edge["module"] + "." + item
            if self.present(sub) and self.kind(sub) != "provided":
                out.append((sub, context))
                continue
            owners = self.owners(edge["module"], item)
            for owner in owners:
                out.append((owner, context if len(owners) == 1 else weaker(context, "if")))
        return out

    def owners(self, module: str, item: str) -> list[str]:
        """What `from module import item` runs through module's lazy table (GraphIndex.owners,
        with the walk's choice of star submodules, startup.py's resolve_lazy)."""
        key = (module, item)
        found = self._owners.get(key)
        if found is not None:
            return found
        self._owners[key] = []  # a cycle of tables runs nothing more
        found = []
        if self.kind(module) == "source":
            facts = self.facts(module)
            lazy = facts.get("lazy")
            if lazy is not None and item not in (facts.get("defines") or ()):
                owner = lazy["names"].get(item)
                if owner is not None:
                    found = [owner] if owner != module else []
                    if owner not in (module, module + "." + item):
                        found += [o for o in self.owners(owner, item) if o not in found]
                else:
                    tiers = [(s, self.reader.mentions.tier(s, item)) for s in lazy["stars"]]
                    strong = [s for s, tier in tiers if tier == 2]
                    found = strong or [s for s, tier in tiers if tier == 1]
        # as GraphIndex keeps them: every owner the walk wanted, a missing one too (it
        # makes a choice of several weaker); the standard library is out of the graph
        found = [f for f in found if self.kind(f) not in ("stdlib", "builtin")]
        self._owners[key] = found
        return found

    # -- the climb ---------------------------------------------------------------------

    def importers(self, name: str) -> Iterator[tuple[str, dict[str, Any], int]]:
        """The modules whose imports run `name`: (importer, edge, rank), among the files
        that name it (candidates), parsed as they are asked for: the roots' own modules
        first, which may settle the question at once."""
        asked: set[tuple[str, str]] = set()
        seen: set[str] = set()
        while True:
            words = [w for w in self.words(name) if w not in asked]
            if not words:
                return
            asked.update(words)
            found = set()
            if not seen:  # the site's lines; the parent package, whose lazy table may
                # list its folder (define_import_structure) and never name `name`
                found |= set(self.site)
                if "__main__" in self.seed_of:  # a script run as __main__: no module name
                    found.add("__main__")
                parent = name.rpartition(".")[0]
                if parent and self.kind(parent) == "source":
                    found.add(parent)
            for package, word in words:
                found |= self.candidates(package, word, name)
            while found - seen:
                for importer in sorted(found - seen, key=lambda m: (m not in self.seed_of, m)):
                    seen.add(importer)
                    for edge, targets in self.steps(importer):
                        ranks = [rank for target, rank in targets if target == name]
                        if ranks:
                            yield importer, edge, min(ranks)
                    if self.kind(importer) == "source":
                        self.lazy_words(importer, name)
                        found |= self.skipped(importer, name)

    def skipped(self, module: str, name: str) -> set[str]:
        """The modules under `name` that `module`'s lazy table sends names to without
        running `name` (an owner's parents are not run with it: `from lz import Thing`,
        Thing in lz.sub.impl, runs lz.sub.impl, not lz.sub): such a module may run `name`
        by a relative import that never names it."""
        lazy = self.facts(module).get("lazy")
        if lazy is None or module == name or module.startswith(name + "."):
            return set()
        owners = set(lazy["names"].values()) | set(lazy.get("stars") or ())
        return {o for o in owners if o.startswith(name + ".") and self.present(o)}

    def words(self, name: str) -> list[tuple[str, str]]:
        """What an importer of `name` holds, as (package, word): `from package import
        word` in some form, `import package.word`; the names a lazy table sends to it."""
        parent, _, last = name.rpartition(".")
        return [(parent, last), *self.lazy.get(name, [])]

    def lazy_words(self, module: str, name: str) -> None:
        """A lazy module whose table sends names to `name`: importers of those names run
        `name` too (`from module import Name`)."""
        lazy = self.facts(module).get("lazy")
        if lazy is None:
            return
        # through tables of tables too: `from module import item` runs each of its owners
        names = [
            (module, item) for item in sorted(lazy["names"]) if name in self.owners(module, item)
        ]
        if name in lazy.get("stars", ()):  # any name it binds: every importer of the table
            parent, _, last = module.rpartition(".")
            names.append((parent, last))
        if names:
            self.lazy[name] = sorted(set(self.lazy.get(name, [])) | set(names))

    def candidates(self, package: str, word: str, name: str) -> set[str]:
        """The modules whose files may hold `from package import word` (`package` empty:
        `import word`): inside package's top package, those that hold the word (a relative
        import names no package); elsewhere, those that hold the package's dotted name too.
        A door (a computed import opened to a package's modules, startup.py) is a file of
        the top package, or one that names it, that calls import_module or __import__."""
        top = (package or word).partition(".")[0]
        qualifier = package or word
        self.fetch(self.wanted(package, word))
        inside, outside = "in:" + top, "out:" + top
        files = set(self.hits[(word, inside)])
        for door in DOOR_WORDS:
            files.update(self.hits[(door, inside)])
        elsewhere = set(self.hits[(word, outside)])
        files.update(p for p in self.hits[(qualifier, outside)] if p in elsewhere)
        naming = self.hits[(top, outside)]
        if len(files) + len(naming) > self.wide * 2:  # before any door file is read
            raise Wide(f"{len(files) + len(naming)} files may import {name}")
        files.update(p for p in naming if self.opens(p))
        found = {m for p in sorted(files) for m in self.modules_of(p)}
        if len(found) > self.wide:
            raise Wide(f"{len(found)} modules may import {name}")
        return found

    def opens(self, path: str) -> bool:
        """Whether a file calls import_module or __import__ (a door may be in it)."""
        known = self.doors.get(path)
        if known is None:
            try:
                data = read_bytes(path, MODULE_BOUND)
            except OSError:
                raise Wide(f"{path} could not be read") from None
            known = self.doors[path] = any(holds(data, w, True) for w in DOOR_WORDS)
        return known

    def wanted(self, package: str, word: str) -> list[tuple[str, str]]:
        """The searches `candidates` reads, as (word, scope): "in:TOP", the top package's
        folders; "out:TOP", every other file."""
        top = (package or word).partition(".")[0]
        inside, outside = "in:" + top, "out:" + top
        out = [(word, inside), *((door, inside) for door in DOOR_WORDS)]
        return [*out, (word, outside), (package or word, outside), (top, outside)]

    def fetch(self, wanted: list[tuple[str, str]]) -> None:
        """Search for what is not known yet: one search per scope, every word at once."""
        groups: dict[str, set[str]] = {}
        for word, scope in wanted:
            if (word, scope) not in self.hits:
                groups.setdefault(scope, set()).add(word)
        for scope, words in sorted(groups.items()):
            if self.search.runs - self.started >= self.budget:
                raise Wide(f"over {self.budget} searches of the files")
            unreadable = len(self.search.unreadable)
            found = self.search(sorted(words), self.scope(scope))
            if len(self.search.unreadable) > unreadable:  # never kept: asked again, wide again
                raise Wide(f"{len(self.search.unreadable) - unreadable} files could not be read")
            for word in words:
                self.hits[(word, scope)] = found[word]

    def scope(self, scope: str) -> list[str]:
        """The folders and files a scope searches."""
        where, _, top = scope.partition(":")
        tops = self.locations(top)
        if where == "in":
            return tops
        fences = set(tops)
        out = []
        for folder in self.search.folders:
            if folder in fences:
                continue
            if any(t.startswith(folder + os.sep) for t in fences):  # the top lives here
                try:
                    entries = sorted(os.listdir(folder))
                except OSError:
                    raise Wide(f"{folder} could not be read") from None
                out += [
                    os.path.join(folder, e)
                    for e in entries
                    if os.path.join(folder, e) not in fences
                ]
            else:
                out.append(folder)
        return out

    def prefetch(self, modules: list[str]) -> None:
        """The searches a level of the climb will need, done at once."""
        self.fetch([w for m in modules for p, word in self.words(m) for w in self.wanted(p, word)])

    def locations(self, name: str) -> list[str]:
        found = self.finder.find(name)
        return [os.path.abspath(p) for p in ((found and found[2]) or [])]

    def modules_of(self, path: str) -> list[str]:
        """The names under which the import system finds this file (none: shadowed, or
        not importable): under an import folder, or under a folder an editable finder maps
        a top-level name to."""
        found = self.names.get(path)
        if found is not None:
            return found
        places = [(folder, "") for folder in self.search.folders]
        places += [(os.path.abspath(p), top) for top, p in sorted(self.finder.editable.items())]
        found = []
        for folder, top in places:
            if top and path == folder:  # an editable finder's single-file module
                rel = [top]
            elif path.startswith(folder + os.sep):
                rel = path[len(folder) + 1 : -len(".py")].split(os.sep)
                rel = [top, *rel] if top else rel
            else:
                continue
            if rel[-1] == "__init__":
                rel = rel[:-1]
            if not rel or not all(part.isidentifier() for part in rel):
                continue
            name = ".".join(rel)
            hit = self.finder.find(name)
            if hit is not None and hit[1] is not None and _same(hit[1], path):
                found.append(name)
        self.names[path] = sorted(set(found))
        return self.names[path]

    def reach(self, name: str) -> dict[str, Any]:
        """How surely startup runs `name`: {"context", "path"}, a path of that context
        from a root's module; {"context": None}: no path (every file that names it read).
        A module missing here: {"context": None, "absent": true, "importers": {module:
        its reach}}, the modules that import it, each as surely as startup runs them.
        The standard library is out of the walk's graph: {"context": None}. The question's
        searches are bounded (`budget`), its importers' included."""
        self.started = self.search.runs
        if self.kind(name) in ("stdlib", "builtin"):
            return {"context": None, "path": []}
        if not self.present(name):
            importers = sorted({m for m, _ in self.naming(name)})
            return {
                "context": None,
                "absent": True,
                "importers": {m: self.climb(m) for m in importers if m != name},
            }
        return self.climb(name)

    def climb(self, name: str) -> dict[str, Any]:
        """reach() of a module here: the climb from it to a root's module, surest first."""
        # best: module -> (rank of its surest path to `name`, the next module, the edge)
        best: dict[str, tuple[int, str | None, dict[str, Any] | None]] = {}
        buckets: list[list[tuple[str, str | None, dict[str, Any] | None]]] = [[] for _ in CONTEXTS]
        buckets[0].append((name, None, None))
        answer: tuple[int, str] | None = None  # (rank, the seed it goes through)
        for rank in range(len(CONTEXTS)):
            level = buckets[rank]
            while level and not (answer and answer[0] <= rank):
                settled = []
                for module, toward, edge in level:
                    if module not in best:
                        best[module] = (rank, toward, edge)
                        settled.append(module)
                        seed = self.seed_of.get(module)
                        if seed is not None and (answer is None or max(seed, rank) < answer[0]):
                            answer = (max(seed, rank), module)
                level = []
                if not (answer and answer[0] <= rank):
                    self.prefetch(settled)
                for module in settled:
                    if answer and answer[0] <= rank:
                        break
                    for importer, via, own in self.importers(module):
                        into = max(rank, own)
                        if importer in best:
                            continue
                        seed = self.seed_of.get(importer)
                        if into == rank and seed is not None and seed <= rank:
                            best[importer] = (rank, module, via)  # as sure as it gets
                            answer = (rank, importer)
                            break
                        (level if into == rank else buckets[into]).append((importer, module, via))
            if answer and answer[0] <= rank:
                break
        if answer is None:
            return {"context": None, "path": []}
        path = [answer[1]]
        while best[path[-1]][1] is not None:
            path.append(str(best[path[-1]][1]))
        return {"context": CONTEXTS[answer[0]], "path": path}

    def naming(self, name: str) -> list[tuple[str, dict[str, Any]]]:
        """The imports of `name` (or a module under it) that a module holds, whether or not
        the module is there: those of a missing module cannot succeed."""
        out = []
        parent, _, last = name.rpartition(".")
        for package, word in self.words(name):
            for importer in sorted(self.candidates(package, word, name) | set(self.site)):
                for edge in self.facts(importer).get("imports") or ():
                    module = edge["module"]
                    if edge["context"] != "typing" and (
                        module == name
                        or module.startswith(name + ".")
                        or (module == parent and last in edge["names"])
                    ):
                        out.append((importer, edge))
        return out


def _parents(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[: i + 1]) for i in range(len(parts) - 1)]


def _same(a: str, b: str) -> bool:
    if os.path.abspath(a) == os.path.abspath(b):
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False
