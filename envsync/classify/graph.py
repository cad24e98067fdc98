"""Startup reachability and failing imports over a host's static import graph (pure)."""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from envsync.classify.rules import Root
from envsync.model import ImportEdge, ModuleFacts, StartupGraph

# How surely an import runs at startup, surest first. A path is as weak as its weakest
# edge: a module reached through a `try` is guarded even if its own imports are not.
RANK = {"module": 0, "if": 1, "try": 2, "function": 3, "typing": 4}
RUNS = ("module", "if", "try")


def weaker(a: str, b: str) -> str:
    return a if RANK[a] >= RANK[b] else b


@dataclass(frozen=True, slots=True, kw_only=True)
class Reach:
    """How a module is reached at startup: the surest path's context and last step."""

    context: str
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
    context: str  # effective context: module | if | try | function
    root: Root

    @property
    def top(self) -> str:
        return self.module.partition(".")[0]

    def message(self) -> str:
        if self.missing_name:
            return f"cannot import name {self.missing_name!r} from {self.module!r}"
        return f"No module named {self.missing_module!r}"


def _targets(edge: ImportEdge, modules: dict[str, ModuleFacts]) -> list[str]:
    """Modules an edge imports: X and its parents, and X.Y for `from X import Y` submodules."""
    parts = edge.module.split(".")
    out = [".".join(parts[: i + 1]) for i in range(len(parts))]
    for name in edge.names:
        sub = f"{edge.module}.{name}"
        if sub in modules and modules[sub].kind != "missing":
            out.append(sub)
    return out


def reach(graph: StartupGraph, roots: Sequence[Root]) -> dict[str, Reach]:
    """Every module startup imports from `roots`, with its surest path (0-1-2 Dijkstra)."""
    modules = dict(graph.modules)
    internal = set(graph.internal)
    best: dict[str, Reach] = {}
    heap: list[tuple[int, int, str, Reach]] = []
    counter = 0
    for root in roots:
        if root.module in modules and modules[root.module].kind != "missing":
            heapq.heappush(heap, (0, counter, root.module, Reach(context="module", root=root)))
            counter += 1
    while heap:
        rank, _, name, how = heapq.heappop(heap)
        if name in best and RANK[best[name].context] <= rank:
            continue
        best[name] = how
        facts = modules.get(name)
        if facts is None or name.partition(".")[0] not in internal:
            continue  # outside the followed packages: its own imports were not read
        for edge in facts.imports:
            if edge.context not in RUNS:
                continue
            context = weaker(how.context, edge.context)
            for target in _targets(edge, modules):
                if target not in modules or modules[target].kind == "missing":
                    continue
                known = best.get(target)
                if known is None or RANK[context] < RANK[known.context]:
                    counter += 1
                    step = Reach(context=context, root=how.root, parent=name, edge=edge)
                    heapq.heappush(heap, (RANK[context], counter, target, step))
    return best


def bound_names(
    graph: StartupGraph, module: str, seen: frozenset[str] = frozenset()
) -> set[str] | None:
    """Names `module` binds at module level, through `import *` too; None when unknowable."""
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


def failures(graph: StartupGraph, reached: dict[str, Reach]) -> list[Failure]:
    """Imports in reached modules (lazy ones inside functions too) that cannot succeed."""
    modules = dict(graph.modules)
    internal = set(graph.internal)
    found: dict[tuple[str, str | None, str, int], Failure] = {}
    for name, how in reached.items():
        facts = modules.get(name)
        if facts is None or name.partition(".")[0] not in internal:
            continue
        for edge in facts.imports:
            if edge.context == "typing":
                continue
            context = (
                "function" if edge.context == "function" else weaker(how.context, edge.context)
            )
            parts = edge.module.split(".")
            missing = None
            for i in range(len(parts)):
                prefix = ".".join(parts[: i + 1])
                if prefix in modules and modules[prefix].kind == "missing":
                    missing = prefix
                    break
            common = {
                "importer": name,
                "file": facts.file,
                "edge": edge,
                "context": context,
                "root": how.root,
            }
            if missing is not None:
                key: tuple[str, str | None, str, int] = (missing, None, name, edge.line)
                found.setdefault(key, Failure(missing_module=missing, module=missing, **common))  # type: ignore[arg-type]
                continue
            if not edge.names:
                continue
            bound = bound_names(graph, edge.module)
            if bound is None:
                continue  # an extension module, a namespace, a __getattr__: cannot tell
            for item in edge.names:
                if item == "*" or item in bound:
                    continue
                sub = f"{edge.module}.{item}"
                if sub in modules and modules[sub].kind != "missing":
                    continue  # a submodule: `from pkg import mod` imports it
                key = (edge.module, item, name, edge.line)
                found.setdefault(key, Failure(missing_name=item, module=edge.module, **common))  # type: ignore[arg-type]
    return sorted(
        found.values(), key=lambda f: (RANK[f.context], f.module, f.importer, f.edge.line)
    )


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
