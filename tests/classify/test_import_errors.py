"""Import errors (from the import check or a crash) are matched to findings in one way."""

from __future__ import annotations

import json
from pathlib import Path

from envsync.classify import finding_for_error
from envsync.model.codec import from_data
from envsync.model.environment import Snapshot
from envsync.model.findings import Finding
from envsync.model.vocab import Kind

SNAPSHOT = Path(__file__).resolve().parent.parent / "data" / "snapshots" / "ct129.json"


def test_an_import_error_matches_the_first_package_finding_that_provides_it() -> None:
    def finding(subject: str, kind: Kind) -> Finding:
        return Finding(
            subject=subject,
            kind=kind,
            reference="1",
            target="2",
            severity="risky",
            reason="r",
            decided_by="facts",
        )

    snap = from_data(Snapshot, json.loads(SNAPSHOT.read_text()))
    findings = [
        finding("xgrammar/__init__.py", "file"),  # a file finding never owns an import error
        finding("xgrammar", "version"),
        finding("xgrammar", "missing"),
        finding("soundfile", "missing"),
    ]
    message = "cannot import name 'StructuralTag' from 'xgrammar' (/v/xgrammar/__init__.py)"
    assert finding_for_error(findings, message, snap, snap) == 1
    assert finding_for_error(findings, "No module named 'soundfile'", snap, snap) == 3
    assert finding_for_error(findings, "No module named 'numpy.core'", snap, snap) is None
    assert finding_for_error(findings, "division by zero", snap, snap) is None
