"""The one-story check of a report (envsync/classify/consistency.py), on findings written
out here: what it calls a contradiction, how classification reconciles a provider called
`benign`, and what a contradiction does under tests (raises) and in a run (logged)."""

from __future__ import annotations

import logging

import pytest

from envsync.classify.consistency import (
    STRICT_ENV,
    InconsistentReport,
    problems,
    reconcile,
    settle,
)
from envsync.classify.graph import GraphIndex
from envsync.model.environment import ImportEdge, ModuleFacts, StartupGraph
from envsync.model.findings import Evidence, Finding, PinFix

NATIVE = Finding(
    subject="kernel/ops.so",
    kind="native",
    reference="loads",
    target="fails",
    severity="fatal",
    reason="kernel/ops.so cannot load: it needs libcudart.so.12, which no search path provides.",
    decided_by="native",
    fixes=(PinFix(summary="pin cudart==12.8.90", requirement="cudart==12.8.90", dist="cudart"),),
)
PROVIDER = Finding(
    subject="cudart",
    kind="missing",
    reference="12.8.90",
    target=None,
    severity="benign",
    reason="cudart missing on the target: no import path from startup reaches it.",
    decided_by="import-graph",
)


def test_a_provider_called_benign_beside_its_fatal_is_a_contradiction() -> None:
    (problem,) = problems([NATIVE, PROVIDER])
    assert "cudart is benign while the fatal finding kernel/ops.so names it" in problem


def test_classification_reconciles_it_to_the_findings_severity() -> None:
    native, provider = reconcile([NATIVE, PROVIDER])
    assert native == NATIVE
    assert (provider.severity, provider.decided_by) == ("fatal", "native")
    assert "the native finding kernel/ops.so (fatal) needs it" in provider.reason
    assert provider.evidence[0].detail.startswith("kernel/ops.so: kernel/ops.so cannot load")
    assert problems([native, provider]) == []


def test_two_fixes_that_move_one_distribution_apart() -> None:
    other = Finding(
        subject="cudart",
        kind="version",
        reference="12.8.90",
        target="12.1.0",
        severity="risky",
        reason="...",
        decided_by="import-graph",
        fixes=(PinFix(summary="pin cudart==12.4.0", requirement="cudart==12.4.0", dist="cudart"),),
    )
    (problem,) = problems([NATIVE, other])
    assert "pins cudart==12.4.0, which removes cudart==12.8.90" in problem


def _lacks(name: str, importer: str = "svc.main") -> Finding:
    """A finding citing `from numpy.rec import NAME` at the importer's line 1."""
    return Finding(
        subject="numpy",
        kind="version",
        reference="2.4.6",
        target="2.2.6",
        severity="risky",
        reason=f"numpy 2.2.6 lacks {name}, which {importer} imports from numpy.rec ...",
        decided_by="name-check",
        evidence=(
            Evidence(
                source="name-check",
                detail=f"{importer} imports numpy.rec at module level: "
                f"cannot import name {name!r} from 'numpy.rec' on the target",
                file=f"{importer.replace('.', '/')}.py",
                line=NAMES.index(name) + 1,
            ),
        ),
    )


NAMES = ("__doc__", "X", "Y")  # svc.main and svc.other import each at its own line


def _edges() -> tuple[ImportEdge, ...]:
    return tuple(
        ImportEdge(
            module="numpy.rec",
            names=(n,),
            line=i + 1,
            context="module",
            statement=f"from numpy.rec import {n}",
        )
        for i, n in enumerate(NAMES)
    )


GRAPH = StartupGraph(
    roots=("svc.main",),
    internal=("svc",),
    modules={
        "svc.main": ModuleFacts(kind="source", file="svc/main.py", defines=(), imports=_edges()),
        "svc.other": ModuleFacts(kind="source", file="svc/other.py", defines=(), imports=_edges()),
        "numpy.rec": ModuleFacts(kind="source", file="numpy/rec/__init__.py", defines=("X",)),
    },
)


@pytest.mark.parametrize(
    ("name", "importer", "words"),
    [
        ("__doc__", "svc.main", "numpy.rec binds every name svc.main imports from it at line 1"),
        ("X", "svc.main", "numpy.rec binds every name svc.main imports from it at line 2"),
        ("Y", "svc.other", "svc/other.py:3 is no import of a module on the startup path"),
    ],
)
def test_a_reason_names_only_what_is_absent_and_imported(
    name: str, importer: str, words: str
) -> None:
    # the evidence is read by the import it cites, and names looked up by the graph index
    (problem,) = problems([_lacks(name, importer)], GraphIndex(GRAPH), {"svc.main", "numpy.rec"})
    assert words in problem


def test_a_real_absence_is_no_problem() -> None:
    assert problems([_lacks("Y")], GraphIndex(GRAPH), {"svc.main", "numpy.rec"}) == []


def test_under_tests_a_contradiction_raises() -> None:
    import os

    assert os.environ[STRICT_ENV] == "raise"  # set for every test by tests/conftest.py
    with pytest.raises(InconsistentReport, match="cudart is benign while the fatal finding"):
        settle([NATIVE, PROVIDER], where="ct200 against ct129")


def test_in_a_run_it_is_logged_and_never_shown_as_two_verdicts(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.delenv(STRICT_ENV)
    with caplog.at_level(logging.WARNING, logger="envsync.classify.consistency"):
        native, provider = settle([NATIVE, PROVIDER], where="ct200 against ct129")
    assert native == NATIVE
    assert provider.severity == "unknown"
    assert "envsync bug: an inconsistent report (ct200 against ct129)" in caplog.text
