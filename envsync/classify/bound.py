"""The names a module binds at module level, as the static graph can tell (pure): its own
definitions and what its `import *` lines bring, or None where that cannot be known (a
module `__getattr__`, a lazy table, an unread or extension module)."""

from __future__ import annotations

from envsync.model.environment import Answers, ModuleFacts, StartupGraph


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
        answered = _getattr_names(graph, module, facts.getattr)
        if answered is None:
            return None  # names by their start, or a factory unread: not a set to list
        names.update(answered)
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


def _getattr_names(graph: StartupGraph, module: str, answers: Answers) -> set[str] | None:
    """The names a module __getattr__ answers for, those of the factory it asks included
    (None: names by their start, or a factory envsync did not read)."""
    if answers.prefixes:
        return None
    names = set(answers.names)
    if answers.delegate is not None:
        factory = _factory(graph, answers.delegate)
        if factory is None or factory.prefixes:
            return None
        names |= factory.names_for(answers.delegate[2])
    return names


def getattr_answers(graph: StartupGraph, facts: ModuleFacts, name: str) -> bool | None:
    """Whether a module's __getattr__ answers for `name` (None: cannot tell), asking the
    factory its own was made by where it returns what that made."""
    found = facts.getattr
    if found is None:  # none (a lazy module's table says the rest; a module's own
        return False  # unread __getattr__ is "cannot tell" before this is asked)
    if found.answers(name):
        return True
    if found.delegate is None:
        return False
    factory = _factory(graph, found.delegate)
    return None if factory is None else factory.answers_for(found.delegate[2], name)


def _factory(graph: StartupGraph, delegate: tuple[str, str, str]) -> Answers | None:
    """What the factory a module __getattr__ was made by answers for (None: unread)."""
    where, function, _ = delegate
    maker = graph.modules.get(where)
    return maker.factories.get(function) if maker is not None else None
