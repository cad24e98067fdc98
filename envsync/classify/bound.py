"""The names a module binds at module level, as the static graph can tell (pure): its own
definitions and what its `import *` lines bring, or None where that cannot be known (a
module `__getattr__`, a lazy table, an unread or extension module)."""

from __future__ import annotations

from envsync.model.environment import StartupGraph


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
    if (
        facts is None
        or facts.kind != "source"
        or facts.defines is None
        or (facts.dynamic and facts.getattr is None)
        or facts.lazy is not None
    ):
        return None
    names = set(facts.defines)
    if facts.getattr is not None:  # what its __getattr__ can answer for
        if facts.getattr.prefixes:
            return None  # names by their start: not a set to list
        names.update(facts.getattr.names)
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
