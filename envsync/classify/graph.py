"""Startup reachability and failing imports over a host's static import graph (pure)."""

from __future__ import annotations

import functools
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from envsync.classify.bound import bound_names, getattr_answers
from envsync.classify.rules import Root
from envsync.hostside.shared import COMPILE_ERROR
from envsync.model.environment import ImportEdge, ModuleFacts, StartupGraph
from envsync.model.vocab import CONTEXT_RANK as RANK
from envsync.model.vocab import CONTEXTS, RUNS, Context, weaker

# What the import system binds in every module, whatever its source says
# (`from numpy._core.records import __doc__` works on a module without a docstring).
MODULE_ATTRIBUTES = frozenset(
    ("__name__", "__doc__", "__file__", "__spec__", "__loader__", "__package__", "__builtins__")
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Reach:
    """How a module is reached at startup: the surest path's context and last step."""

    context: Context
    root: Root
    parent: str | None = None  # the module that imports it on that path
    edge: ImportEdge | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Failure:
    """An import that cannot succeed on this host."""

    importer: str  # the module holding the import statement
    file: str | None
    edge: ImportEdge
    missing_module: str | None = None  # `import X` / `from X import` where X is absent
    missing_name: str | None = None  # `from X import Y` where X does not bind Y
    module: str  # the module the failure is about (X)
    context: Context  # effective context: module | if | try | fallback | function
    root: Root
    declared_in: str | None = None  # X is lazy: the submodule its table names for Y
    error: str | None = None  # X cannot be compiled: what importing it raises

    @property
    def top(self) -> str:
        return self.module.partition(".")[0]

    def message(self) -> str:
        if self.error:
            return f"{self.module} cannot be compiled here: {self.error}"
        if self.missing_name:
            text = f"cannot import name {self.missing_name!r} from {self.module!r}"
            if self.declared_in and self.declared_in != self.module:
                text += f" (its lazy table names {self.declared_in}, which does not define it)"
            return text
        return f"No module named {self.missing_module!r}"


@dataclass(frozen=True, slots=True, kw_only=True)
class Broken:
    """One import statement of a module that cannot succeed on this host."""

    edge: ImportEdge
    module: str  # the module it is about
    missing_module: str | None = None
    missing_name: str | None = None
    declared_in: str | None = None
    error: str | None = None  # the module cannot be compiled: what importing it raises


Target = tuple[str, Context]  # a module an edge runs, and how surely it runs it


def _targets(
    edge: ImportEdge, modules: Mapping[str, ModuleFacts], lookup: Callable[[str, str], list[str]]
) -> list[Target]:
    """Modules an edge runs, in the order Python runs them: X's parent packages, X, then
    for `from X import Y` the submodule X.Y, or the submodule X's lazy table names for Y
    (`lookup`: several candidates, of which one runs, are each only "if")."""
    context = edge.context
    out: list[Target] = [(prefix, context) for prefix in _prefixes(edge.module)]
    facts = modules.get(edge.module)
    tabled = facts is not None and facts.lazy is not None  # only a lazy table has owners
    for name in edge.names:
        sub = f"{edge.module}.{name}"
        found = modules.get(sub)
        if found is not None and found.kind not in ("missing", "provided"):
            out.append((sub, context))
            continue
        if not tabled:
            continue
        owners = lookup(edge.module, name)
        for owner in owners:
            out.append((owner, context if len(owners) == 1 else weaker(context, "if")))
    return out


@functools.lru_cache(maxsize=65536)
def _prefixes(name: str) -> tuple[str, ...]:
    """A module's parent packages and itself, outermost first (`a.b.c`: a, a.b, a.b.c)."""
    parts = name.split(".")
    return tuple(".".join(parts[: i + 1]) for i in range(len(parts)))


def _parents(name: str) -> list[str]:
    return list(_prefixes(name)[:-1])


def seeds(graph: StartupGraph, root: Root) -> list[str]:
    """The modules a root runs, in order: its parent packages first (Python runs them
    before it: `-m a.b` runs a/__init__.py), itself, and under `-m pkg` pkg/__main__.py;
    for "pkg.*" every module of pkg the probe read."""
    modules = graph.modules
    if root.module.endswith(".*"):
        prefix = root.module[:-1]
        names = sorted(
            n
            for n, m in modules.items()
            if n.startswith(prefix) and "." not in n[len(prefix) :] and m.kind != "missing"
        )
        package = root.module[:-2]
        return [*_parents(package), package, *names] if names else []
    if root.module not in modules or modules[root.module].kind == "missing":
        return []
    out = [p for p in _parents(root.module) if p in modules and modules[p].kind != "missing"]
    out.append(root.module)
    main = graph.main
    if main and main != root.module and main.rpartition(".")[0] == root.module:
        out.append(main)
    return out


# a module's imports and what each runs, with how surely (its context's rank)
Steps = list[tuple[ImportEdge, list[tuple[str, int]]]]


def _reach_one(graph: StartupGraph, root: Root, steps: Callable[[str], Steps]) -> dict[str, Reach]:
    """Modules reached from one root, with the surest path to each (Dijkstra over the
    contexts' ranks: a path is as sure as its weakest edge).

    A path only grows weaker, so the ranks come out in order, and a queue per rank (a
    handful) stands for the heap: each rank's paths in the order they were found, as a
    heap of (rank, order) would give them. A module is settled by the first path that
    reaches it, the surest."""
    best: dict[str, Reach] = {}
    # a queue per rank of (name, parent, edge): a Reach is made only for the path that wins
    queues: list[deque[tuple[str, str | None, ImportEdge | None]]] = [deque() for _ in CONTEXTS]
    queues[RANK[root.context]].extend((name, None, None) for name in seeds(graph, root))
    for rank, queue in enumerate(queues):
        context = CONTEXTS[rank]
        pop = queue.popleft
        while queue:
            name, parent, edge = pop()
            if name in best:
                continue
            best[name] = Reach(context=context, root=root, parent=parent, edge=edge)
            for step, targets in steps(name):
                for target, own in targets:
                    if target not in best:
                        queues[own if own > rank else rank].append((target, name, step))
    return best


class GraphIndex:
    """One host's graph with what startup analyses share, computed once.

    Reaching from a set of roots is the pointwise surest of reaching from each root, so
    trying another launch flag recomputes only the roots it changes.
    """

    def __init__(self, graph: StartupGraph, governed: frozenset[str] = frozenset()) -> None:
        self.graph = graph
        # modules a rule pack's flag chooses: startup runs them as the pack says, never
        # through an import inside a function (the pack read that lazy import)
        self._governed = governed
        self._by_root: dict[Root, dict[str, Reach]] = {}
        self._broken: dict[str, list[Broken]] = {}
        self._bound: dict[str, set[str] | None] = {}
        self._lookups: dict[tuple[str, str], tuple[bool | None, str | None]] = {}
        self._steps: dict[str, Steps] = {}
        self._edges: dict[str, list[tuple[ImportEdge, list[Target]]]] = {}
        self._ordered: dict[str, list[tuple[float, int, list[str]]]] = {}
        self._owners: dict[tuple[str, str], list[str]] = {}
        self._walks: dict[
            tuple[Root, ...],
            tuple[dict[tuple[str, int], int], dict[str, tuple[str, int] | None]],
        ] = {}

    def steps(self, name: str) -> Steps:
        """The imports of a module that may run at startup (inside a function too: it runs
        if startup calls the function; never a type checker's), each with the present
        modules it runs; computed once for every root and flag tried."""
        found = self._steps.get(name)
        if found is None:
            governed = self._governed
            found = []
            for edge, present in self.edges(name):
                targets = [
                    (t, RANK[c]) for t, c in present if not (c == "function" and t in governed)
                ]
                if targets:
                    found.append((edge, targets))
            self._steps[name] = found
        return found

    def edges(self, name: str) -> list[tuple[ImportEdge, list[Target]]]:
        """A module's imports but a type checker's, each with the present modules it runs
        (_targets less the missing ones): what steps and the walk in running order both
        read, computed once."""
        found = self._edges.get(name)
        if found is None:
            modules = self.graph.modules
            facts = modules.get(name)
            found = [
                (
                    edge,
                    [
                        (t, c)
                        for t, c in _targets(edge, modules, self.owners)
                        if t in modules and modules[t].kind != "missing"
                    ],
                )
                for edge in (facts.imports if facts is not None else ())
                if edge.context != "typing"
            ]
            self._edges[name] = found
        return found

    def owners(self, module: str, name: str) -> list[str]:
        """The submodules that `from module import name` runs through module's lazy table
        (several: the star submodules that may define it, one of which does)."""
        key = (module, name)
        found = self._owners.get(key)
        if found is None:
            self._owners[key] = []  # a cycle of tables runs nothing more
            found = []
            facts = self.graph.modules.get(module)
            lazy = facts.lazy if facts is not None else None
            if lazy is not None and name not in (facts.defines or ()):  # type: ignore[union-attr]
                owner = lazy.names.get(name)
                if owner is not None:
                    found = [owner] if owner != module else []
                    if owner not in (module, f"{module}.{name}"):
                        found += [o for o in self.owners(owner, name) if o not in found]
                else:
                    found = [c for c in lazy.candidates.get(name, ()) if c != "?"]
            found = [f for f in found if f in self.graph.modules]
            self._owners[key] = found
        return found

    def reach(self, roots: Sequence[Root]) -> dict[str, Reach]:
        merged: dict[str, Reach] = {}
        for root in roots:
            if root not in self._by_root:
                self._by_root[root] = _reach_one(self.graph, root, self.steps)
            for name, how in self._by_root[root].items():
                known = merged.get(name)
                if known is None or RANK[how.context] < RANK[known.context]:
                    merged[name] = how
        return merged

    def broken_imports(self, name: str) -> list[Broken]:
        """The imports of module `name` that cannot succeed on this host."""
        if name in self._broken:
            return self._broken[name]
        modules = self.graph.modules
        facts = modules.get(name)
        out: list[Broken] = []
        for edge in facts.imports if facts is not None else ():
            if edge.context == "typing":
                continue
            parts = edge.module.split(".")
            missing = None
            for i in range(len(parts)):
                prefix = ".".join(parts[: i + 1])
                if prefix in modules and modules[prefix].kind == "missing":
                    missing = prefix
                    break
                error = _compile_error(modules.get(prefix))
                if error is not None:
                    out.append(Broken(edge=edge, module=prefix, error=error))
                    break
            if missing is not None:
                out.append(Broken(edge=edge, module=missing, missing_module=missing))
                continue
            if out and out[-1].edge is edge:  # a module it runs cannot be compiled
                continue
            for item in edge.names:
                if item == "*":
                    continue
                error = _compile_error(modules.get(f"{edge.module}.{item}"))
                if error is not None:  # `from pkg import mod`: mod is run, and fails
                    out.append(Broken(edge=edge, module=f"{edge.module}.{item}", error=error))
                    continue
                verdict, where = self.lookup(edge.module, item)
                if verdict is False:
                    out.append(
                        Broken(edge=edge, module=edge.module, missing_name=item, declared_in=where)
                    )
        self._broken[name] = out
        return out

    def lookup(self, module: str, name: str) -> tuple[bool | None, str | None]:
        """Whether `from module import name` finds the name (None: cannot tell).

        The second item is the module that was found to lack it (a lazy module's table
        sends the name to the submodule that defines it).
        """
        key = (module, name)
        if key not in self._lookups:
            self._lookups[key] = (None, None)  # a cycle of tables proves nothing
            self._lookups[key] = self._lookup(module, name)
        return self._lookups[key]

    def _lookup(self, module: str, name: str) -> tuple[bool | None, str | None]:
        modules = self.graph.modules
        facts = modules.get(module)
        if facts is None or facts.kind != "source" or facts.defines is None:
            return None, None  # an extension module, a namespace, unread: cannot tell
        sub = modules.get(f"{module}.{name}")
        if sub is not None and sub.kind != "missing":
            return True, None  # a submodule: `from pkg import mod` imports it
        if name in facts.defines or name in MODULE_ATTRIBUTES:
            return True, None
        lazy = facts.lazy
        if lazy is None:
            answered = getattr_answers(self.graph, facts, name)
            if answered:
                return True, None
            if facts.dynamic and (facts.getattr is None or answered is None):
                return None, None  # a module __getattr__ whose answers envsync cannot read
            bound = bound_names(self.graph, module, memo=self._bound)
            if bound is None:
                return None, None
            return name in bound, module
        owner = lazy.names.get(name)
        if owner is not None:
            if owner == module:
                return True, None
            if modules.get(owner) is None or modules[owner].kind == "missing":
                return None, None  # never lacks without proof
            verdict, _ = self.lookup(owner, name)
            return verdict, owner
        unknown = False
        for star in lazy.candidates.get(name, lazy.stars):
            verdict = self._exports(star, name)
            if verdict:
                return True, None
            unknown = unknown or verdict is None
        if unknown or not lazy.exact:
            return None, None
        # in no table: what the module __getattr__ answers for besides
        answered = getattr_answers(self.graph, facts, name)
        if answered is None:
            return None, None
        return (True, None) if answered else (False, module)

    def import_works(self, module: str, name: str | None) -> tuple[bool | None, str | None]:
        """Whether `import module` (`from module import name`) succeeds on this host.

        None: this host's graph cannot tell (the module was not read here). The second
        item is the module that settles it: the one that defines the name (through a lazy
        table, the submodule it names), the module itself, or the part that is missing.
        """
        modules = self.graph.modules
        parts = module.split(".")
        for i in range(len(parts)):
            prefix = ".".join(parts[: i + 1])
            facts = modules.get(prefix)
            if facts is None:
                return None, None
            if facts.kind == "missing":
                return False, prefix
        if name is None:
            return True, module
        verdict, where = self.lookup(module, name)
        if verdict is not True:
            return verdict, where or module
        facts = modules[module]
        if modules.get(f"{module}.{name}") is not None or facts.defines is None:
            return True, module
        lazy = facts.lazy
        if name not in facts.defines and lazy is not None:
            owner = lazy.names.get(name)
            if owner is not None and owner in modules:
                return True, owner
            for star in lazy.candidates.get(name, lazy.stars):
                if self._exports(star, name):
                    return True, star
        return True, module

    def _exports(self, module: str, name: str) -> bool | None:
        """Whether `from module import *` binds `name` (None: cannot tell)."""
        facts = self.graph.modules.get(module)
        if facts is None or facts.kind != "source":
            return None
        if facts.all is not None:
            return name in facts.all
        if name.startswith("_"):
            return False
        return self.lookup(module, name)[0]

    def execution_order(self, roots: Sequence[Root]) -> dict[tuple[str, int], int]:
        """(importer, line) of each import statement startup runs, in the order it runs them.

        Python runs an imported module to its end before the importer's next statement,
        and a module's parent packages before it: a depth-first walk in statement order,
        each statement's modules in turn. The first broken import in this order is the
        one that stops startup.
        """
        return self._walk(tuple(roots))[0]

    def first_run(self, roots: Sequence[Root], module: str) -> list[tuple[str, int | None]]:
        """The chain through which Python first runs `module` (each module with the line of
        its statement that runs the next one), from the module startup begins with; []
        when the walk of running imports does not get there."""
        entered = self._walk(tuple(roots))[1]
        if module not in entered:
            return []
        chain: list[tuple[str, int | None]] = [(module, None)]
        seen = {module}
        while True:
            by = entered.get(chain[-1][0])
            if by is None or by[0] in seen:
                break
            chain.append(by)
            seen.add(by[0])
        return chain[::-1]

    def _walk(
        self, roots: tuple[Root, ...]
    ) -> tuple[dict[tuple[str, int], int], dict[str, tuple[str, int] | None]]:
        found = self._walks.get(roots)
        if found is not None:
            return found
        order: dict[tuple[str, int], int] = {}
        entered: dict[str, tuple[str, int] | None] = {}  # module -> the statement that ran it
        for start in (name for root in roots for name in seeds(self.graph, root)):
            if start in entered:
                continue
            entered[start] = None
            # frames: a module, its statements still to run, the modules the current
            # statement runs that have not run yet (and that statement's line)
            stack: list[tuple[str, Iterator[tuple[float, int, list[str]]], list[str], list[int]]]
            stack = [(start, iter(self._running(start)), [], [0])]
            while stack:
                name, statements, pending, line = stack[-1]
                if pending:
                    target = pending.pop(0)
                    if target not in entered:
                        entered[target] = (name, line[0])
                        stack.append((target, iter(self._running(target)), [], [0]))
                    continue
                step = next(statements, None)
                if step is None:
                    stack.pop()
                    continue
                _, line[0], targets = step
                order.setdefault((name, line[0]), len(order))
                pending.extend(targets)
        self._walks[roots] = (order, entered)
        return order, entered

    def _running(self, name: str) -> list[tuple[float, int, list[str]]]:
        """A module's import statements that run with it, in the order they run (a called
        function's where it is called; a console script's function after the module),
        each with the modules it runs (computed once for every root and flag tried)."""
        found = self._ordered.get(name)
        if found is None:
            found = sorted(
                (_runs_at(edge), edge.line, [t for t, c in present if c != "function"])
                # every statement that runs, a failing one too: it has nothing to run
                for edge, present in self.edges(name)
                if edge.context in RUNS
            )
            self._ordered[name] = found
        return found

    def failures(self, reached: dict[str, Reach], roots: Sequence[Root] = ()) -> list[Failure]:
        """Imports in reached modules (lazy ones inside functions too) that cannot succeed.

        An import in an except body (a fallback) runs only when its try failed: when an
        import of that try fails too, the fallback's failure is the one startup meets.
        Sorted surest first, then in the order startup runs them.
        """
        found = self.unordered_failures(reached)
        order = self.execution_order(roots) if roots else {}
        last = len(order)
        return sorted(
            found,
            key=lambda f: (
                RANK[f.context],
                order.get((f.importer, f.edge.line), last),
                f.module,
                f.importer,
                f.edge.line,
            ),
        )

    def unordered_failures(self, reached: dict[str, Reach]) -> list[Failure]:
        """failures(), in no particular order: what a caller that only asks which imports
        fail needs, without walking startup in the order it runs."""
        found: dict[tuple[str, str | None, str, int], Failure] = {}
        modules = self.graph.modules
        for name, how in reached.items():
            broken = self.broken_imports(name)
            if not broken:
                continue
            facts = modules.get(name)
            failed_tries = {
                b.edge.group for b in broken if b.edge.context != "fallback" and b.edge.group
            }
            for b in broken:
                edge = b.edge
                own = edge.context
                if own == "fallback" and edge.group in failed_tries:
                    own = "if" if edge.condition else "module"
                context = "function" if own == "function" else weaker(how.context, own)
                key = (b.module, b.missing_name, name, edge.line)
                found.setdefault(
                    key,
                    Failure(
                        importer=name,
                        file=facts.file if facts else None,
                        edge=edge,
                        missing_module=b.missing_module,
                        missing_name=b.missing_name,
                        module=b.module,
                        context=context,
                        root=how.root,
                        declared_in=b.declared_in,
                        error=b.error,
                    ),
                )
        return list(found.values())


def _compile_error(facts: ModuleFacts | None) -> str | None:
    """What importing a module raises when this interpreter cannot compile it (None: it
    can, or envsync did not read it: a file past the bound is a door, not a failure)."""
    if facts is None or facts.kind != "error" or not facts.error:
        return None
    if not facts.error.startswith(COMPILE_ERROR):
        return None
    return facts.error[len(COMPILE_ERROR) :]


def _runs_at(edge: ImportEdge) -> float:
    """Where in its module's run an import statement runs: its own line, or the line of
    the call that runs the function holding it (0: after the module, as a console
    script's function)."""
    if edge.at is None:
        return float(edge.line)
    if edge.at == 0:
        return float("inf")
    return edge.at + edge.line / 1e7


class ImportsOf:
    """For each top-level name, the surest import of it in the modules startup reaches
    (every package's), indexed once for all the differences of a target."""

    def __init__(self, graph: StartupGraph, reached: Mapping[str, Reach]) -> None:
        self._best: dict[str, tuple[str, ImportEdge, Context]] = {}
        for name, how in reached.items():
            facts = graph.modules.get(name)
            if facts is None:
                continue
            for edge in facts.imports:
                if edge.context == "typing":
                    continue
                context = weaker(how.context, edge.context)
                top = edge.module.partition(".")[0]
                known = self._best.get(top)
                if known is None or RANK[context] < RANK[known[2]]:
                    self._best[top] = (name, edge, context)

    def surest(self, tops: Iterable[str]) -> tuple[str, ImportEdge, Context] | None:
        found = [self._best[t] for t in tops if t in self._best]
        return min(found, key=lambda f: RANK[f[2]]) if found else None


def path_to(reached: dict[str, Reach], module: str) -> list[str]:
    """The chain of modules from a root to `module`."""
    chain = [module]
    seen = {module}
    while True:
        step = reached.get(chain[-1])
        if step is None or step.parent is None or step.parent in seen:
            break
        chain.append(step.parent)
        seen.add(step.parent)
    return chain[::-1]
