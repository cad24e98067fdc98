"""Frozen dataclasses of a comparison: differences, findings, their evidence and fixes.

Kept apart from model.py so that collecting a snapshot does not pay for them.
"""

from __future__ import annotations

from dataclasses import dataclass

SEVERITIES = ("fatal", "risky", "degraded", "benign")
KINDS = ("version", "missing", "extra", "file", "torch", "gpu", "python", "system")


@dataclass(frozen=True, slots=True, kw_only=True)
class Difference:
    """One raw difference between a reference and a target snapshot (from deepdiff)."""

    kind: str  # one of KINDS
    subject: str  # distribution name, file path (dist/path), or fact name
    reference: str | None
    target: str | None
    dist: str | None = None  # for `file`: the distribution the file belongs to


@dataclass(frozen=True, slots=True, kw_only=True)
class Evidence:
    source: str  # import-graph | name-check | rule-pack | import-probe | requirements | facts
    detail: str  # one sentence
    file: str | None = None
    line: int | None = None
    statement: str | None = None
    context: str | None = None  # module | if | try | function, and how startup gets there


@dataclass(frozen=True, slots=True, kw_only=True)
class Fix:
    kind: str  # pin | sync-dist | sync-file | flag
    summary: str  # what to do, in words a human can act on
    requirement: str | None = None  # pin: NAME==VERSION
    dist: str | None = None  # sync-dist / sync-file: the distribution
    path: str | None = None  # sync-file: the file, relative to the distribution's location
    flag: str | None = None  # flag: e.g. --grammar-backend
    value: str | None = None  # flag: e.g. none
    gives_up: str | None = None  # flag: the capability it costs
    used_when: tuple[str, ...] = ()  # flag: command flags that mean that capability is used


@dataclass(frozen=True, slots=True, kw_only=True)
class Finding:
    subject: str
    kind: str
    reference: str | None
    target: str | None
    severity: str  # one of SEVERITIES
    reason: str
    decided_by: str  # the evidence source that set the severity
    evidence: tuple[Evidence, ...] = ()
    fixes: tuple[Fix, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class Report:
    """The result of comparing a target with a reference."""

    schema_version: int = 1
    reference: str
    target: str
    entrypoint: str | None = None
    command: tuple[str, ...] = ()
    findings: tuple[Finding, ...] = ()
    notes: tuple[str, ...] = ()  # what envsync could not tell, and why

    @property
    def summary(self) -> dict[str, int]:
        counts = {s: 0 for s in SEVERITIES}
        for finding in self.findings:
            counts[finding.severity] += 1
        return counts
