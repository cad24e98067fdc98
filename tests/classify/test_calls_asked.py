"""What envsync asks a host about calls made at import (envsync/classify/calls.py), and
the graph it judges by once answered: pure functions, on graphs written here."""

from __future__ import annotations

import pytest

from envsync.classify import calls
from envsync.classify.calls import might_call, missing_here, question, with_calls
from envsync.classify.graph import GraphIndex
from envsync.classify.rules import Root
from envsync.collect.follow import Called
from envsync.model.environment import ImportEdge, ModuleFacts, StartupGraph
from envsync.model.vocab import Context

pytestmark = pytest.mark.quick


def _edge(module: str, line: int, context: Context, *names: str) -> ImportEdge:
    return ImportEdge(
        module=module, names=names, line=line, context=context, statement=f"import {module}"
    )


def _graph(*extra: tuple[str, ModuleFacts]) -> StartupGraph:
    modules = {
        "svc": ModuleFacts(
            kind="source", file="/s/svc.py", imports=(_edge("kit.app", 1, "module"),)
        ),
        "kit": ModuleFacts(kind="source", file="/s/kit/__init__.py"),
        "kit.app": ModuleFacts(
            kind="source", file="/s/kit/app.py", imports=(_edge("kit.checks", 1, "module"),)
        ),
        "kit.checks": ModuleFacts(
            kind="source",
            file="/s/kit/checks.py",
            imports=(_edge("parts", 3, "function"), _edge("other", 9, "function")),
        ),
        "kit.unused": ModuleFacts(
            kind="source", file="/s/kit/unused.py", imports=(_edge("kit.checks", 1, "module"),)
        ),
        "parts": ModuleFacts(kind="missing"),
        "other": ModuleFacts(kind="missing"),
        **dict(extra),
    }
    return StartupGraph(roots=("svc",), internal=("svc",), modules=modules)


def _reached(graph: StartupGraph) -> tuple[GraphIndex, dict]:
    index = GraphIndex(graph)
    return index, index.reach((Root(module="svc", reason="the entrypoint", label="entrypoint"),))


def test_only_imports_of_modules_missing_only_here_are_asked_about() -> None:
    target = _graph()
    reference = _graph(("parts", ModuleFacts(kind="source", file="/r/parts.py")))
    missing = missing_here(target, reference)
    assert missing == {"parts"}  # `other` is missing on both: not a difference
    assert might_call(target, missing)
    assert not might_call(target, {"nothing"})
    index, reached = _reached(target)
    asked = question(target, index, reached, missing)
    assert asked is not None
    assert asked.targets == (("kit.checks", 3),)
    # the modules whose code may lead there: those that import it, up to the entrypoint
    # (not kit, which imports none of them; not kit.unused, which startup never runs)
    assert [m for m, _ in asked.allowed] == ["kit.app", "kit.checks", "svc"]
    assert dict(asked.allowed)["svc"] == "module"


def test_nothing_is_asked_beyond_the_caps(monkeypatch: pytest.MonkeyPatch) -> None:
    target = _graph()
    index, reached = _reached(target)
    assert question(target, index, reached, set()) is None
    monkeypatch.setattr(calls, "TARGETS", 0)
    assert question(target, index, reached, {"parts"}) is None
    monkeypatch.setattr(calls, "TARGETS", 64)
    monkeypatch.setattr(calls, "MODULES", 2)
    assert question(target, index, reached, {"parts"}) is None


def test_an_answer_gives_the_import_its_context_and_the_calls_as_its_condition() -> None:
    target = _graph()
    how = Called(
        context="if",
        chain=(
            ("/v/lib/python3.11/site-packages/svc.py", 6, '@app.post("/x")'),
            ("/v/lib/python3.11/site-packages/kit/app.py", 17, "self.add(path, func)"),
            ("/v/lib/python3.11/site-packages/kit/checks.py", 3, "import parts"),
        ),
    )
    lifted = with_calls(target, {("kit.checks", 3): how})
    edge, other = lifted.modules["kit.checks"].imports
    assert (edge.context, edge.at) == ("if", None)
    assert edge.condition == (
        'run by calls made while the module is imported: svc.py:6 @app.post("/x") -> kit/app.py:17'
    )
    assert other == target.modules["kit.checks"].imports[1]  # not asked: as it was
    assert target.modules["kit.checks"].imports[0].context == "function"  # not changed
    assert with_calls(target, {}) is target
    # a chain the host read as sure is still only "can run": sets of values, not proof
    sure = with_calls(target, {("kit.checks", 3): Called(context="module", chain=how.chain)})
    assert sure.modules["kit.checks"].imports[0].context == "if"
