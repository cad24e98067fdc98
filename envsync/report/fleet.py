"""The fleet view: hosts folded into classes, one row per class, worst first (pure).

A class is the hosts whose environments are identical (classes.py): it is named by its
node set (`gpu[001-087]`), counted, and carries the one report its hosts share
(`gpu[001-087]: as the reference; gpu[088-089]: xgrammar fatal`). 1,000 hosts in 12
classes are 12 rows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from envsync.compare.classes import HostClass, fold_reports
from envsync.model.findings import Finding, Report, short_hash
from envsync.model.vocab import SEVERITIES, SEVERITY_RANK, Severity

# How many subjects a class's headline names before "and N more".
HEADLINE_SUBJECTS = 3


@dataclass(frozen=True, slots=True, kw_only=True)
class FleetClass:
    hosts: tuple[str, ...]
    nodeset: str  # the hosts as a node set: gpu[001-087]
    digest: str | None  # the environment's digest (None: folded by their reports)
    report: Report  # what every host of the class has against the reference

    @property
    def count(self) -> int:
        return len(self.hosts)

    @property
    def findings(self) -> tuple[Finding, ...]:
        """The class's findings, worst first."""
        return tuple(sorted(self.report.findings, key=lambda f: SEVERITY_RANK[f.severity]))

    @property
    def worst(self) -> Severity | None:
        if not self.findings:
            return None
        return min((f.severity for f in self.findings), key=SEVERITY_RANK.__getitem__)

    @property
    def rank(self) -> int:
        """Sorts a class: its worst severity's rank (no drift after every severity)."""
        return SEVERITY_RANK[self.worst] if self.worst else len(SEVERITIES)

    def headline(self) -> str:
        """`as the reference`, or `xgrammar fatal; 2 risky, 1 benign`."""
        worst = self.worst
        if worst is None:
            return "as the reference"
        subjects = [f.subject for f in self.findings if f.severity == worst]
        named = ", ".join(subjects[:HEADLINE_SUBJECTS])
        if len(subjects) > HEADLINE_SUBJECTS:
            named += f" and {len(subjects) - HEADLINE_SUBJECTS} more"
        counts = self.report.summary
        rest = ", ".join(f"{counts[s]} {s}" for s in SEVERITIES if counts[s] and s != worst)
        return f"{named} {worst}" + (f"; {rest}" if rest else "")

    def line(self) -> str:
        """One line of the class: `gpu[088-089] (2): xgrammar fatal`."""
        return f"{self.nodeset} ({self.count}): {self.headline()}"


@dataclass(frozen=True, slots=True, kw_only=True)
class Fleet:
    reference: str
    classes: tuple[FleetClass, ...]  # worst first, then the largest, then by node set
    notes: Mapping[str, tuple[str, ...]]  # node set -> what envsync could not tell

    @property
    def host_count(self) -> int:
        return sum(c.count for c in self.classes)

    def title(self) -> str:
        hosts, classes = self.host_count, len(self.classes)
        return (
            f"{hosts} host{'s' if hosts != 1 else ''} in {classes} class"
            f"{'es' if classes != 1 else ''} against {self.reference}"
        )


def build_fleet(reports: Sequence[Report], classes: Sequence[HostClass] | None = None) -> Fleet:
    """The fleet of several reports against one reference: `classes` as the comparison
    folded them (by environment), else hosts whose reports say the same are one class."""
    folded = classes if classes is not None else fold_reports(reports)
    rows = [
        FleetClass(
            hosts=c.hosts,
            nodeset=c.nodeset,
            digest=c.digest if classes is not None else None,
            report=c.report,
        )
        for c in folded
    ]
    rows.sort(key=lambda c: (c.rank, -c.count, c.nodeset))
    reference = reports[0].reference if reports else (rows[0].report.reference if rows else "")
    return Fleet(
        reference=reference,
        classes=tuple(rows),
        notes={c.nodeset: c.report.notes for c in rows if c.report.notes},
    )


def value_text(value: str | None) -> str:
    """A value as a report cell shows it: hashes shortened, `—` for none."""
    return short_hash(value) or "—"


def change_text(finding: Finding) -> str:
    """`xgrammar 0.1.32 → 0.1.10`: a finding's subject and its two values."""
    return f"{finding.subject} {value_text(finding.reference)} → {value_text(finding.target)}"
