"""envsync as a library: diff, repair (the plan, then --apply) and deploy through the stages,
with a Session and typed options; no command line, no argparse, nothing printed.

On the built-in example's real hosts (real wheels, the real runtime: the demo server really
imports xgrammar and soundfile), with pins served offline from the real wheels.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from envsync.compare import targets as compare
from envsync.repair.plan import load_plan
from envsync.repair.run import RepairOptions, repair, rollback_host
from envsync.repair.steps.flag import FlagStep
from envsync.repair.steps.pin import PinStep
from envsync.repair.steps.sync_file import SyncFileStep
from envsync.runner import Runners
from envsync.service.host import deploy_host, stop_host
from envsync.sources.inventory import load_inventory
from envsync.sources.session import Session
from tests.helpers import REPO, example_inventory


@pytest.fixture(scope="module")
def hosts(tmp_path_factory: pytest.TempPathFactory, wheel_cache: Path) -> Path:
    """The example's hosts with the shared runtime (tests/helpers.py example_inventory)."""
    return example_inventory(tmp_path_factory.mktemp("library"), wheel_cache)


@pytest.mark.slow
def test_diff_repair_and_deploy_through_the_library(hosts: Path, tmp_path: Path) -> None:
    notes: list[str] = []
    store = tmp_path / "throughput.json"
    with Session(
        inventory=load_inventory(str(hosts), {}), runners=Runners(), notes=notes.append
    ) as session:
        try:
            # diff: defaults.reference against defaults.target
            comparison = compare.diff(session)
            report = comparison.report
            assert report.summary_line() == "ct200 against ct129: 2 fatal, 2 risky, 1 benign"
            fatal = {f.subject for f in report.findings if f.severity == "fatal"}
            assert fatal == {"soundfile", "xgrammar"}
            assert comparison.snapshot.host == "ct200" and comparison.reference.host == "ct129"

            # deploy: ct200 dies on the missing soundfile, traced to its finding
            run = deploy_host(session, "ct200", deadline=120, store=store)
            assert run.verdict.kind == "crashed" and not run.ok
            assert run.verdict.exception == "ModuleNotFoundError: No module named 'soundfile'"
            assert run.diagnosis is not None and run.diagnosis.cause is not None
            cause = run.diagnosis.cause
            assert cause.finding is not None and cause.finding.subject == "soundfile"
            assert [c for _, c in cause.fixes] == [
                "envsync repair ct129 ct200 --prefer fix --apply"
            ]
            # what collecting for the diagnosis noted comes with it, not in between
            assert any("distributions" in n for n in run.diagnosis.notes)

            # repair, the plan: nothing changes; saved for the apply
            saved = tmp_path / "plan.json"
            planned = repair(session, RepairOptions(prefer="fix", save=saved))
            assert planned.applied is None and planned.service is None
            steps = planned.plan.steps
            assert [type(s) for s in steps] == [PinStep, PinStep, SyncFileStep]
            assert [s.requirements for s in steps if isinstance(s, PinStep)] == [
                ("soundfile==0.13.1",),
                ("xgrammar==0.1.32",),
            ]
            assert load_plan(saved) == planned.plan
            assert json.loads(saved.read_text())["schema_version"] == 3
            auto = repair(session, RepairOptions()).plan  # --prefer auto: the flag for xgrammar
            assert [(s.flag, s.value) for s in auto.steps if isinstance(s, FlagStep)] == [
                ("--grammar-backend", "none")
            ]

            # repair --apply of the saved plan: backup, the steps, deploy, smoke test
            done = repair(session, RepairOptions(plan=saved, apply=True, deadline=120, store=store))
            assert done.applied is not None and done.applied.steps == 3
            assert done.service is not None, done
            assert done.service.verdict.kind == "ready", done.service.verdict
            assert (done.service.verdict.tokens_per_s or 0) > 0
            assert (
                "ct200: step 1/3: pin soundfile==0.13.1: pip install --no-deps, others held"
                in notes
            )
            after = compare.diff(session, "ct129", "ct200").report
            assert not [f for f in after.findings if f.severity in ("fatal", "risky")]

            # and back: the backup restores what the apply changed
            restored = rollback_host(session, "ct200")
            assert set(restored.dists) >= {"soundfile", "xgrammar"}
            again = compare.diff(session, "ct129", "ct200").report
            assert {f.subject for f in again.findings if f.severity == "fatal"} == fatal
        finally:
            for host in ("ct129", "ct200"):
                stop_host(session, host)


def _module_imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    return names | {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}


# Programs that run on hosts speak through stdout (their protocol), not to the user.
HOST_SIDE = "hostside/"


def test_only_the_cli_prints_and_nothing_imports_it() -> None:
    package = REPO / "envsync"
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package).as_posix()
        if rel.startswith(("cli/", HOST_SIDE)) or rel == "__main__.py":
            continue
        tree = ast.parse(path.read_text())
        prints = [
            n.lineno
            for n in ast.walk(tree)
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "print"
        ]
        assert prints == [], f"{rel} prints at lines {prints}"
        assert not any(m.startswith("envsync.cli") for m in _module_imports(path)), rel


def test_no_module_of_envsync_is_over_600_lines() -> None:
    # small modules named for what they do: a room a reader finds by its name
    package = REPO / "envsync"
    long = {
        p.relative_to(package).as_posix(): n
        for p in sorted(package.rglob("*.py"))
        if (n := len(p.read_text().splitlines())) > 600
    }
    assert long == {}


# The parser's declarations are one table of options, read as such; every other function
# reads in one screen.
LONG_FUNCTIONS_ALLOWED = {("cli/parser.py", "build_parser")}
MAX_FUNCTION_LINES = 80


def test_no_function_of_envsync_is_over_80_lines() -> None:
    # a function a reader takes in whole: its lines from `def` to its last (decorators not
    # counted), nested functions each on their own as well
    package = REPO / "envsync"
    long = []
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package).as_posix()
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            lines = (node.end_lineno or node.lineno) - node.lineno + 1
            if lines > MAX_FUNCTION_LINES and (rel, node.name) not in LONG_FUNCTIONS_ALLOWED:
                long.append(f"envsync/{rel}:{node.lineno} {node.name}: {lines} lines")
    assert long == [], "split into helpers:\n" + "\n".join(long)
