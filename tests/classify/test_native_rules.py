"""classify/native.py's rules on crafted native facts (pure): which verdict differences are
findings, at which severity, and what is never benign."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from envsync.classify.launched import Startup
from envsync.classify.native import native_findings
from envsync.classify.startup import Analysis
from envsync.model.codec import from_data
from envsync.model.environment import (
    ImportEdge,
    ModuleFacts,
    NativeFacts,
    NativeLoad,
    NativeNotFound,
    NativeStep,
    NativeVerdict,
    Snapshot,
    StartupGraph,
)
from envsync.model.findings import Finding
from envsync.model.vocab import Context

SNAPSHOT = Path(__file__).resolve().parent.parent / "data" / "snapshots" / "ct129.json"
KEY = "kernel/ops.abi3.so"
MISSING = NativeVerdict(
    kind="fails",
    reasons=(NativeNotFound(name="libc10.so", needed_by="/site/kernel/ops.abi3.so"),),
)
UNKNOWN = NativeVerdict(kind="unknown", why=("/site/kernel/ops.abi3.so: filters are not modelled",))
OK = NativeVerdict(kind="ok")


def snapshot(
    verdict: NativeVerdict | None, origin: str = "import", context: Context = "module"
) -> Snapshot:
    base = from_data(Snapshot, json.loads(SNAPSHOT.read_text()))
    edge = ImportEdge(module="kernel.ops", line=1, context=context, statement="import kernel.ops")
    graph = StartupGraph(
        roots=("app",),
        internal=("app",),
        modules={
            "app": ModuleFacts(kind="source", file="/site/app.py", imports=(edge,)),
            "kernel": ModuleFacts(kind="source", file="/site/kernel/__init__.py"),
            "kernel.ops": ModuleFacts(kind="extension", file="/site/kernel/ops.abi3.so"),
        },
    )
    loads: tuple[NativeLoad, ...] = ()
    if verdict is not None:
        via = "kernel.ops" if origin == "import" else "kernel"
        step = NativeStep(needed_by="/site/kernel/ops.abi3.so", name="libc10.so", how="not found")
        loads = (
            NativeLoad(
                path="/site/kernel/ops.abi3.so",
                key=KEY,
                module="kernel.ops" if origin == "import" else None,
                origin=origin,  # type: ignore[arg-type]  # the parametrized origins are the Literal's values, given as str
                via=via,
                verdict=verdict,
                steps=(step,) if verdict.kind == "fails" else (),
            ),
        )
    return replace(base, startup=graph, native=NativeFacts(program="/bin/python", loads=loads))


def judge(reference: Snapshot, target: Snapshot) -> list[Finding]:
    startup = Startup(entrypoint="app", command=(), packs=())
    analysis = Analysis(target.startup, startup, ())
    return [f for f in native_findings([], reference, target, analysis, {}) if f.kind == "native"]


@pytest.mark.parametrize(
    ("verdict", "origin", "context", "severity"),
    [
        (MISSING, "import", "module", "fatal"),
        (MISSING, "import", "if", "risky"),
        (MISSING, "import", "try", "degraded"),  # the ImportError is caught
        (MISSING, "import", "function", "degraded"),  # not reached at startup: not judged
        (MISSING, "shipped", "module", "risky"),  # not shown to load
        (UNKNOWN, "import", "module", "risky"),  # cannot be proved either way: never benign
    ],
)
def test_severity_follows_the_import_behind_the_load(
    verdict: NativeVerdict, origin: str, context: Context, severity: str
) -> None:
    reference = snapshot(OK, origin)
    (finding,) = judge(reference, snapshot(verdict, origin, context))
    assert finding.severity == severity and finding.subject == KEY
    assert finding.reference == "loads"


def test_the_same_failure_on_both_hosts_is_not_drift() -> None:
    assert judge(snapshot(MISSING), snapshot(MISSING)) == []


def test_a_failure_the_reference_does_not_make_is_a_finding() -> None:
    (finding,) = judge(snapshot(None), snapshot(MISSING))
    assert finding.severity == "fatal" and finding.reference is None
    assert "the reference makes no such load" in finding.reason


def test_a_reference_without_native_facts_still_reports_the_targets_failure() -> None:
    reference = replace(snapshot(None), native=None)  # a lock
    (finding,) = judge(reference, snapshot(MISSING))
    assert finding.severity == "fatal"
