"""Every dispatch over the kinds of fixes and steps ends in `assert_never` (issue 33, item 4):
a kind added to `findings.Fix` or `steps.Step` and not handled is a mypy error, never a
step skipped in silence. Read from the tree."""

from __future__ import annotations

import ast
import typing

from envsync.model.findings import Fix
from envsync.repair.steps import Step
from tests.helpers import REPO

KINDS = {cls.__name__ for cls in (*typing.get_args(Fix), *typing.get_args(Step))}


def _kinds_matched(node: ast.Match) -> set[str]:
    out = set()
    for case in node.cases:
        for sub in ast.walk(case.pattern):
            if isinstance(sub, ast.MatchClass) and isinstance(sub.cls, ast.Name):
                out.add(sub.cls.id)
    return out & KINDS


def _ends_in_assert_never(node: ast.Match) -> bool:
    last = node.cases[-1]
    if not (isinstance(last.pattern, ast.MatchAs) and last.pattern.pattern is None):
        return False
    (body,) = last.body
    return (
        isinstance(body, ast.Expr)
        and isinstance(body.value, ast.Call)
        and isinstance(body.value.func, ast.Name)
        and body.value.func.id == "assert_never"
    )


# The dispatches that must be among them: make_plan's over fix kinds, and steps/__init__.py's
# over step kinds (each kind's module does the work).
DISPATCHES = {
    ("envsync/repair/plan.py", "make_plan"),
    *(
        ("envsync/repair/steps/__init__.py", name)
        for name in ("problems", "describe", "check_paths", "backs_up", "apply")
    ),
}


def test_every_match_over_fix_and_step_kinds_ends_in_assert_never() -> None:
    assert {"PinFix", "SyncDistFix", "SyncFileFix", "FlagFix", "PinStep", "FlagStep"} <= KINDS
    found, open_ended = set(), []
    for path in sorted((REPO / "envsync").rglob("*.py")):
        rel = path.relative_to(REPO).as_posix()
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Match)
                and _kinds_matched(node)
                and not _ends_in_assert_never(node)
            ):
                open_ended.append(f"{rel}:{node.lineno}")
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                inner = (n for n in ast.walk(node) if isinstance(n, ast.Match))
                if any(_kinds_matched(n) for n in inner):
                    found.add((rel, node.name))
    assert found >= DISPATCHES, sorted(DISPATCHES - found)
    assert open_ended == [], f"a match over fix or step kinds without assert_never: {open_ended}"


def test_assert_never_fails_loudly_when_it_runs() -> None:
    import pytest

    from envsync.exhaustive import assert_never

    with pytest.raises(AssertionError, match="a kind no case handles: str"):
        assert_never("new kind")  # type: ignore[arg-type]  # what mypy refuses, run anyway
