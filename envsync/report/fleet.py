"""The fleet matrix: every difference on any host, one column per host (pure).

Rows are the subjects (a package, a file, a fact) that differ from the reference on at
least one host, worst first; a cell is that host's value and finding, or nothing when the
host matches the reference there.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from envsync.findings import Finding, Report, short_hash
from envsync.vocab import KIND_RANK, SEVERITIES, SEVERITY_RANK, Kind, Severity


@dataclass(frozen=True, slots=True, kw_only=True)
class Row:
    subject: str
    kind: Kind  # the kind of its worst cell
    reference: str | None
    cells: Mapping[str, Finding]  # host -> its finding; a host absent here matches
    worst: Severity


@dataclass(frozen=True, slots=True, kw_only=True)
class Fleet:
    reference: str
    hosts: tuple[str, ...]
    rows: tuple[Row, ...]
    summary: Mapping[str, Mapping[str, int]]  # host -> severity -> count
    notes: Mapping[str, tuple[str, ...]]  # host -> what envsync could not tell

    def counts_text(self, host: str) -> str:
        counts = self.summary[host]
        return ", ".join(f"{counts[s]} {s}" for s in SEVERITIES if counts[s]) or "no drift"


def _unique_targets(reports: Sequence[Report]) -> list[Report]:
    """Columns need distinct names: a second `ct200` (two files of one host) is `ct200 (2)`."""
    seen: dict[str, int] = {}
    out = []
    for report in reports:
        seen[report.target] = seen.get(report.target, 0) + 1
        if seen[report.target] > 1:
            report = replace(report, target=f"{report.target} ({seen[report.target]})")
        out.append(report)
    return out


def build_fleet(reports: Sequence[Report]) -> Fleet:
    """One matrix of several reports against the same reference."""
    reports = _unique_targets(reports)
    by_subject: dict[str, dict[str, Finding]] = {}
    for report in reports:
        for finding in report.findings:
            by_subject.setdefault(finding.subject, {})[report.target] = finding
    rows = []
    for subject, cells in by_subject.items():
        worst = min(cells.values(), key=lambda f: SEVERITY_RANK[f.severity])
        rows.append(
            Row(
                subject=subject,
                kind=worst.kind,
                reference=worst.reference,
                cells=cells,
                worst=worst.severity,
            )
        )
    rows.sort(
        key=lambda r: (
            SEVERITY_RANK[r.worst],
            -sum(1 for f in r.cells.values() if f.severity == r.worst),
            KIND_RANK[r.kind],
            r.subject,
        )
    )
    return Fleet(
        reference=reports[0].reference if reports else "",
        hosts=tuple(r.target for r in reports),
        rows=tuple(rows),
        summary={r.target: r.summary for r in reports},
        notes={r.target: r.notes for r in reports if r.notes},
    )


def cell_text(finding: Finding | None) -> str:
    """How a cell shows the target's value: `=` where the host matches the reference."""
    if finding is None:
        return "="
    return short_hash(finding.target) or "—"


def fleet_data(fleet: Fleet) -> dict[str, object]:
    """The matrix as JSON data (schema_version 1)."""
    return {
        "schema_version": 1,
        "reference": fleet.reference,
        "hosts": list(fleet.hosts),
        "summary": {h: dict(fleet.summary[h]) for h in fleet.hosts},
        "rows": [
            {
                "subject": row.subject,
                "kind": row.kind,
                "reference": row.reference,
                "worst": row.worst,
                "cells": {
                    host: {
                        "value": f.target,
                        "kind": f.kind,
                        "severity": f.severity,
                        "reason": f.reason,
                        "fixes": [{"kind": x.kind, "summary": x.summary} for x in f.fixes],
                    }
                    for host, f in row.cells.items()
                },
            }
            for row in fleet.rows
        ],
        "notes": {h: list(n) for h, n in fleet.notes.items()},
    }
