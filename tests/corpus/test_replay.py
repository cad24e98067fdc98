"""Replay of real, publicly reported drift failures (tests/corpus/cases.py).

For each case: the wheels' own source says what must happen (the breaking statement is
at the file and line the case names, the reference defines the name, the target does
not); then `envsync diff` must rate the culprit as that, name the import that breaks,
and rate nothing else fatal.
"""

from __future__ import annotations

import ast
import json
import re
import warnings
from pathlib import Path

import pytest

from tests.corpus import table
from tests.corpus.cases import CASES, Case
from tests.corpus.conftest import Pairs, pip_check

pytestmark = pytest.mark.slow


def binds(path: Path, name: str) -> bool:
    """Whether a module's source binds `name` at module level (def, class, assignment)."""
    if not path.is_file():
        return False
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound = {node.name}
        elif isinstance(node, ast.Assign):
            bound = {t.id for t in node.targets if isinstance(t, ast.Name)}
        else:
            continue
        if name in bound:
            return True
    return False


def line_of(path: Path, number: int) -> str:
    return path.read_text().splitlines()[number - 1].strip()


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_the_wheels_say_what_must_happen(case: Case, pairs: Pairs) -> None:
    pair = pairs.pair(case)
    ref, tgt = pair.site("ref"), pair.site("tgt")
    # what the wheels showed, for the corpus table: SGLang does not start here (no torch)
    read = dict.fromkeys(("reference", "target"), "not started here (no torch)")
    for file, number, text in case.source_facts:
        assert text in line_of(tgt / file, number), (file, number)
    if case.breaking is not None:
        b = case.breaking
        assert line_of(tgt / b.file, b.line) == b.statement
        statement = ast.parse((tgt / b.file).read_text())
        imported = {
            (node.module, a.name)
            for node in ast.walk(statement)
            if isinstance(node, ast.ImportFrom) and node.lineno == b.line
            for a in node.names
        }
        assert (b.module, b.name) in imported
        read["target"] += f"; the wheels: {b.file}:{b.line} imports {b.name}"
        if b.defined_in:
            assert binds(ref / b.defined_in, b.name)
            assert not binds(tgt / b.defined_in, b.name)
            read["reference"] += f"; the wheels: {b.defined_in} binds {b.name}"
            read["target"] += f", which {b.defined_in} does not bind"
    for name in case.never_imported:
        for path in (tgt / "sglang").rglob("*.py"):
            with warnings.catch_warnings():  # SGLang's own invalid escape sequences
                warnings.simplefilter("ignore", SyntaxWarning)
                warnings.simplefilter("ignore", DeprecationWarning)
                tree = ast.parse(path.read_bytes())
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    assert all(a.name.partition(".")[0] != name for a in node.names), path
                elif isinstance(node, ast.ImportFrom) and node.level == 0:
                    assert (node.module or "").partition(".")[0] != name, path
    if case.never_imported:
        for side in read:
            read[side] += f"; the wheels: no sglang module imports {', '.join(case.never_imported)}"
    table.part(
        case.id,
        report=case.report,
        culprit=case.culprit,
        **read,
        expected=case.expected,
        test="tests/corpus/test_replay.py",
    )


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_envsync_rates_the_culprit_as_reported(
    case: Case, pairs: Pairs, capsys: pytest.CaptureFixture[str]
) -> None:
    findings = pairs.findings(case, capsys)
    culprit = findings[case.culprit]
    table.part(case.id, static=culprit["severity"], import_check=None)
    assert culprit["severity"] == case.expected, culprit["reason"]
    others = {s: f["severity"] for s, f in findings.items() if s != case.culprit}
    assert "fatal" not in others.values(), others
    if case.breaking is not None:
        b = case.breaking
        assert b.name in culprit["reason"]
        named = [
            e
            for e in culprit["evidence"]
            if e["file"]
            and e["file"].endswith(b.file)
            and e["line"] == b.line
            and f"cannot import name {b.name!r}" in e["detail"]
        ]
        assert named, culprit["evidence"]
        if case.expected == "fatal":
            # the reason names the statement that fails on the target, and where the
            # reference defines the name (the file the wheel's source says binds it)
            assert f"({b.file}:{b.line})" in culprit["reason"], culprit["reason"]
            assert b.defined_in is not None
            assert "on the reference, " in culprit["reason"]
            assert f"defines {b.name} ({b.defined_in})" in culprit["reason"], culprit["reason"]
    if case.expected != "fatal":
        assert not [f for f in culprit["fixes"] if f["kind"] == "flag"]
    if case.never_imported:
        assert set(others.values()) | {culprit["severity"]} <= {"benign", "degraded"}


def test_the_swapped_transformers_pair_says_nothing_of_pretrainedconfig(
    pairs: Pairs, capsys: pytest.CaptureFixture[str]
) -> None:
    (case,) = [c for c in CASES if c.id == "transformers-4.49-mllama-swapped"]
    findings = pairs.findings(case, capsys)
    assert "PretrainedConfig" not in json.dumps(findings)
    assert all(f["severity"] != "fatal" for f in findings.values())


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_pip_check_on_the_target(case: Case, pairs: Pairs) -> None:
    """Whether `pip check` finds a requirement on the culprit unmet (the README's table).

    The venvs hold SGLang without its dependencies: pip check lists those on both sides;
    only a line about the culprit as a requirement says anything about this drift.
    """
    pair = pairs.pair(case)
    about = re.compile(rf"(?:has requirement|requires) {re.escape(case.culprit)}\b", re.I)
    target = [line for line in pip_check(pair.target) if about.search(line)]
    assert bool(target) == case.pip_check_flags_culprit, target
