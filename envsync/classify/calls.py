"""Imports in functions that calls made at import may run: what to ask the target about,
and its graph with the answers.

The graph holds the imports each function makes ("function": runs when called); a call
made while a module is imported may run one, through other modules (a route decorator
that runs an install check: FastAPI's `ensure_multipart_is_installed`). Where such an
import's module is missing on the target, the host follows the calls made at import
toward it (envsync/hostside/graph/follow.py) through the modules that import its module,
and the import takes the context the calls run it in, never surer than `if` (the
values a call may take are read as sets, not proven: the chain shows that startup can
run it), the calls as its condition.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from envsync.classify.graph import GraphIndex, Reach
from envsync.collect.follow import Called, Question
from envsync.model.environment import ImportEdge, ModuleFacts, StartupGraph
from envsync.model.vocab import weaker

# Questions beyond these are left unasked: the import keeps its "function".
TARGETS = 64
MODULES = 400


def missing_here(target: StartupGraph, reference: StartupGraph | None) -> set[str]:
    """The modules missing on the target that the reference has (all missing on the
    target, without a reference graph): an import of one fails only here."""
    missing = {name for name, facts in target.modules.items() if facts.kind == "missing"}
    if reference is None:
        return missing
    theirs = reference.modules
    return {name for name in missing if name in theirs and theirs[name].kind != "missing"}


def might_call(graph: StartupGraph, missing: set[str]) -> bool:
    """Whether any module imports one of `missing` in a function (cheap: no reach)."""
    return bool(missing) and any(
        edge.context == "function" and edge.module in missing
        for facts in graph.modules.values()
        for edge in facts.imports
    )


def question(
    graph: StartupGraph, index: GraphIndex, reached: Mapping[str, Reach], missing: set[str]
) -> Question | None:
    """The imports in functions of modules startup reaches of a module `missing` here, and
    the modules that import theirs (None: nothing to ask, or more than envsync asks)."""
    modules = graph.modules
    targets = sorted(
        {
            (name, edge.line)
            for name in reached
            for edge in _imports(modules.get(name))
            if edge.context == "function" and edge.module in missing
        }
    )
    if not targets or len(targets) > TARGETS:
        return None
    importers: dict[str, set[str]] = {}
    for name in reached:
        for edge, ran in index.steps(name):
            if edge.context != "typing":
                for module, _ in ran:
                    importers.setdefault(module, set()).add(name)
    allowed = {name for name, _ in targets}
    todo = list(allowed)
    while todo:
        for importer in importers.get(todo.pop(), ()):
            if importer not in allowed:
                allowed.add(importer)
                todo.append(importer)
        if len(allowed) > MODULES:
            return None
    return Question(
        targets=tuple(targets),
        allowed=tuple((name, reached[name].context) for name in sorted(allowed)),
    )


def _imports(facts: ModuleFacts | None) -> tuple[ImportEdge, ...]:
    return facts.imports if facts is not None else ()


def with_calls(graph: StartupGraph, called: Mapping[tuple[str, int], Called]) -> StartupGraph:
    """The graph, each import that calls made at import run in the context they run it."""
    if not called:
        return graph
    modules = dict(graph.modules)
    for (name, line), how in called.items():
        facts = modules.get(name)
        if facts is None or how.context == "function":
            continue
        # the values a call may take are read as sets, not proven: a chain shows that
        # startup can run the import, never that it must (--import-check decides)
        context = weaker(how.context, "if")
        edges = tuple(
            replace(edge, context=context, condition=_condition(how), at=None)
            if edge.line == line and edge.context == "function"
            else edge
            for edge in facts.imports
        )
        modules[name] = replace(facts, imports=edges)
    return replace(graph, modules=modules)


def _condition(how: Called) -> str:
    """The calls, from the module's statement that makes the first: `svc/main.py:6
    @app.post("/v1/files") -> fastapi/routing.py:994 -> ...`."""
    (file, line, statement), *rest = how.chain
    steps = [f"{_short(file)}:{line} {statement}"]
    steps += [f"{_short(f)}:{n}" for f, n, _ in rest[:-1]]
    return "run by calls made while the module is imported: " + " -> ".join(steps)


def _short(file: str) -> str:
    for marker in ("site-packages/", "dist-packages/"):
        if marker in file:
            return file.rpartition(marker)[2]
    return file.rpartition("/")[2]
