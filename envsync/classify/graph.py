"""Startup reachability and failing imports over a host's static import graph (pure)."""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from envsync.classify.rules import Root
from envsync.model import ImportEdge, ModuleFacts, StartupGraph
from envsync.vocab import CONTEXT_RANK as RANK
from envsync.vocab import RUNS, Context, weaker


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
    context: Context  # effective context: module | if | try | function
    root: Root

    @property
    def top(self) -> str:
        return self.module.partition(".")[0]

    def message(self) -> str:
        if self.missing_name:
            return f"cannot import name {self.missing_name!r} from {self.module!r}"
        return f"No module named {self.missing_module!r}"


def _targets(edge: ImportEdge, modules: Mapping[str, ModuleFacts]) -> list[str]:
    """Modules an edge imports: X and its parents, and X.Y for `from X import Y` submodules."""
    parts = edge.module.split(".")
    out = [".".join(parts[: i + 1]) for i in range(len(parts))]
    for name in edge.names:
        sub = f"{edge.module}.{name}"
        if sub in modules and modules[sub].kind != "missing":
            out.append(sub)
    return out


Steps = list[tuple[ImportEdge, list[str]]]  # a module's running imports and their targets


def _steps(graph: StartupGraph, name: str) -> Steps:
    """The imports of `name` that run at startup, each with the present modules it imports."""
    modules = graph.modules
    facts = modules.get(name)
    if facts is None or name.partition(".")[0] not in graph.internal:
        return []  # outside the followed packages: its own imports were not read
    out: Steps = []
    for edge in facts.imports:
        if edge.context not in RUNS:
            continue
        targets = [
            t for t in _targets(edge, modules) if t in modules and modules[t].kind != "missing"
        ]
        if targets:
            out.append((edge, targets))
    return out


def _reach_one(
    graph: StartupGraph, root: Root, steps: Callable[[str], Steps] | None = None
) -> dict[str, Reach]:
    """Modules reached from one root, with the surest path to each (0-1-2 Dijkstra)."""
    modules = graph.modules
    steps = steps or (lambda name: _steps(graph, name))
    best: dict[str, Reach] = {}
    if root.module not in modules or modules[root.module].kind == "missing":
        return best
    heap: list[tuple[int, int, str, Reach]] = [
        (0, 0, root.module, Reach(context="module", root=root))
    ]
    counter = 1
    while heap:
        rank, _, name, how = heapq.heappop(heap)
        if name in best and RANK[best[name].context] <= rank:
            continue
        best[name] = how
        for edge, targets in steps(name):
            context = weaker(how.context, edge.context)
            for target in targets:
                known = best.get(target)
                if known is None or RANK[context] < RANK[known.context]:
                    counter += 1
                    step = Reach(context=context, root=root, parent=name, edge=edge)
                    heapq.heappush(heap, (RANK[context], counter, target, step))
    return best


class GraphIndex:
    """One host's graph with what startup analyses share, computed once.

    Reaching from a set of roots is the pointwise surest of reaching from each root, so
    trying another launch flag recomputes only the roots it changes.
    """

    def __init__(self, graph: StartupGraph) -> None:
        self.graph = graph
        self._by_root: dict[Root, dict[str, Reach]] = {}
        self._broken: dict[str, list[tuple[ImportEdge, str | None, str | None, str]]] = {}
        self._bound: dict[str, set[str] | None] = {}
        self._steps: dict[str, Steps] = {}

    def steps(self, name: str) -> Steps:
        """_steps of a module, computed once for every root and flag tried."""
        found = self._steps.get(name)
        if found is None:
            found = self._steps[name] = _steps(self.graph, name)
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

    def broken_imports(self, name: str) -> list[tuple[ImportEdge, str | None, str | None, str]]:
        """(edge, missing module, missing name, module concerned) for a module's imports."""
        if name in self._broken:
            return self._broken[name]
        modules = self.graph.modules
        facts = modules.get(name)
        out: list[tuple[ImportEdge, str | None, str | None, str]] = []
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
            if missing is not None:
                out.append((edge, missing, None, missing))
                continue
            if not edge.names:
                continue
            bound = bound_names(self.graph, edge.module, memo=self._bound)
            if bound is None:
                continue  # an extension module, a namespace, a __getattr__: cannot tell
            for item in edge.names:
                if item == "*" or item in bound:
                    continue
                sub = f"{edge.module}.{item}"
                if sub in modules and modules[sub].kind != "missing":
                    continue  # a submodule: `from pkg import mod` imports it
                out.append((edge, None, item, edge.module))
        self._broken[name] = out
        return out

    def failures(self, reached: dict[str, Reach]) -> list[Failure]:
        """Imports in reached modules (lazy ones inside functions too) that cannot succeed."""
        internal = set(self.graph.internal)
        found: dict[tuple[str, str | None, str, int], Failure] = {}
        for name, how in reached.items():
            if name.partition(".")[0] not in internal:
                continue
            facts = self.graph.modules.get(name)
            for edge, missing_module, missing_name, module in self.broken_imports(name):
                context = (
                    "function" if edge.context == "function" else weaker(how.context, edge.context)
                )
                key = (module, missing_name, name, edge.line)
                found.setdefault(
                    key,
                    Failure(
                        importer=name,
                        file=facts.file if facts else None,
                        edge=edge,
                        missing_module=missing_module,
                        missing_name=missing_name,
                        module=module,
                        context=context,
                        root=how.root,
                    ),
                )
        return sorted(
            found.values(), key=lambda f: (RANK[f.context], f.module, f.importer, f.edge.line)
        )


def bound_names(
    graph: StartupGraph,
    module: str,
    seen: frozenset[str] = frozenset(),
    memo: dict[str, set[str] | None] | None = None,
) -> set[str] | None:
    """Names `module` binds at module level, through `import *` too; None when unknowable."""
    if memo is not None and module in memo:
        return memo[module]
    result = _bound_names(graph, module, seen)
    if memo is not None:
        memo[module] = result
    return result


def _bound_names(graph: StartupGraph, module: str, seen: frozenset[str]) -> set[str] | None:
    facts = graph.modules.get(module)
    if facts is None or facts.kind != "source" or facts.defines is None or facts.dynamic:
        return None
    names = set(facts.defines)
    for star in facts.stars:
        if star in seen:
            continue
        inner = graph.modules.get(star)
        exported = bound_names(graph, star, seen | {module})
        if exported is None:
            return None
        if inner is not None and inner.all is not None:
            names.update(inner.all)
        else:
            names.update(n for n in exported if not n.startswith("_"))
    return names


def uses(
    graph: StartupGraph, reached: dict[str, Reach], tops: Iterable[str]
) -> tuple[str, ImportEdge, str] | None:
    """The surest import of any of the top-level names `tops` in reached modules.

    Returns (importer, edge, effective context), or None when nothing imports them.
    """
    wanted = set(tops)
    best: tuple[str, ImportEdge, str] | None = None
    internal = set(graph.internal)
    for name, how in reached.items():
        facts = graph.modules.get(name)
        if facts is None or name.partition(".")[0] not in internal:
            continue
        for edge in facts.imports:
            if edge.context == "typing" or edge.module.partition(".")[0] not in wanted:
                continue
            context = (
                "function" if edge.context == "function" else weaker(how.context, edge.context)
            )
            if best is None or RANK[context] < RANK[best[2]]:
                best = (name, edge, context)
    return best


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
