"""One module per kind of step (issue 33, item 4), read from the tree: each kind of `Step`
has its module under envsync/repair/steps/, named for its `kind`, that defines the step's
class and everything the dispatches hand it (its check, its description, what it backs up,
how it is applied, the step a fix becomes); every dispatch handles every kind and ends in
`assert_never`; and no kind's module reaches up to the plan or the transaction."""

from __future__ import annotations

import ast
import typing
from pathlib import Path

import pytest

from envsync.model.codec import tag_of
from envsync.repair.steps import Step
from tests.helpers import REPO

STEPS = REPO / "envsync" / "repair" / "steps"
KINDS = typing.get_args(Step)
# What each kind's module defines: the dispatches' (of the same name) and make_step, the
# Fix -> Step mapping make_plan calls.
EACH_KIND = ("problems", "describe", "backs_up", "apply", "make_step")
DISPATCHES = ("problems", "describe", "check_paths", "backs_up", "apply")


def kind_of(cls: type) -> str:
    (tag,) = tag_of(cls) or ()
    return tag


def module_of(cls: type) -> Path:
    """The kind's module: its `kind` tag with `_` for `-` (sync-dist: sync_dist.py)."""
    return STEPS / f"{kind_of(cls).replace('-', '_')}.py"


def top_level(path: Path) -> dict[str, ast.stmt]:
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    return {
        node.name: node
        for node in tree.body
        if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
    }


def test_the_union_has_the_four_kinds() -> None:
    assert [kind_of(cls) for cls in KINDS] == ["pin", "sync-dist", "sync-file", "flag"]


@pytest.mark.parametrize("cls", KINDS, ids=lambda cls: cls.__name__)
def test_each_kind_has_its_own_module_with_its_class_and_functions(cls: type) -> None:
    path = module_of(cls)
    assert path.is_file(), f"{cls.__name__}: no module {path.relative_to(REPO)}"
    defined = top_level(path)
    assert isinstance(defined.get(cls.__name__), ast.ClassDef), f"{path.name}: no {cls.__name__}"
    assert cls.__module__ == f"envsync.repair.steps.{path.stem}"  # the class in use is that one
    missing = [name for name in EACH_KIND if not isinstance(defined.get(name), ast.FunctionDef)]
    assert missing == [], f"{path.name} lacks {missing}"


def _dispatch(name: str) -> ast.Match:
    function = top_level(STEPS / "__init__.py").get(name)
    assert isinstance(function, ast.FunctionDef), f"steps/__init__.py: no dispatch {name}"
    (match,) = [node for node in ast.walk(function) if isinstance(node, ast.Match)]
    return match


def _classes(pattern: ast.pattern) -> set[str]:
    return {
        sub.cls.id
        for sub in ast.walk(pattern)
        if isinstance(sub, ast.MatchClass) and isinstance(sub.cls, ast.Name)
    }


@pytest.mark.parametrize("name", DISPATCHES)
def test_every_dispatch_handles_every_kind_and_ends_in_assert_never(name: str) -> None:
    match = _dispatch(name)
    handled = set().union(*(_classes(case.pattern) for case in match.cases))
    assert handled == {cls.__name__ for cls in KINDS}, f"{name}: {handled}"
    last = match.cases[-1]
    assert isinstance(last.pattern, ast.MatchAs) and last.pattern.pattern is None
    (body,) = last.body
    assert isinstance(body, ast.Expr) and isinstance(body.value, ast.Call)
    assert isinstance(body.value.func, ast.Name) and body.value.func.id == "assert_never"


@pytest.mark.parametrize("name", [d for d in DISPATCHES if d in EACH_KIND])
def test_a_dispatch_hands_each_kind_to_its_own_module(name: str) -> None:
    """`case PinStep(): return pin.problems(step, i)`: the kind's module does the work."""
    for case in _dispatch(name).cases[:-1]:
        (kind,) = _classes(case.pattern)
        (cls,) = [c for c in KINDS if c.__name__ == kind]
        calls = [
            node.func
            for node in ast.walk(ast.Module(body=case.body, type_ignores=[]))
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
        ]
        assert [(f.value.id, f.attr) for f in calls if isinstance(f.value, ast.Name)] == [
            (module_of(cls).stem, name)
        ], f"{name}: case {kind}"


def test_no_kind_reaches_up_to_the_plan_the_transaction_or_the_dispatches() -> None:
    """A kind's module imports the modules beside it by their own names, never plan.py,
    transaction.py or steps/__init__.py (which imports every kind: a circle)."""
    above = {"envsync.repair.plan", "envsync.repair.transaction", "envsync.repair.steps"}
    for cls in KINDS:
        path = module_of(cls)
        up = []
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                up += [a.name for a in node.names if a.name in above]
            elif isinstance(node, ast.ImportFrom) and (node.level or node.module in above):
                up.append(f"{'.' * node.level}{node.module or ''}")
        assert up == [], f"{path.name} imports {up}"


def test_the_reader_sees_a_kind_without_its_module(tmp_path: Path) -> None:
    """The check itself: a module that lacks a function, or a dispatch that misses a kind."""
    (tmp_path / "x.py").write_text(
        "class XStep: ...\ndef problems(step, i): ...\ndef describe(step): ...\n"
    )
    defined = top_level(tmp_path / "x.py")
    assert [n for n in EACH_KIND if not isinstance(defined.get(n), ast.FunctionDef)] == [
        "backs_up",
        "apply",
        "make_step",
    ]
    match = ast.parse("match s:\n    case PinStep(): pass\n    case _: assert_never(s)\n").body[0]
    assert isinstance(match, ast.Match)
    assert set().union(*(_classes(c.pattern) for c in match.cases)) == {"PinStep"}
