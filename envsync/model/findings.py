"""Frozen dataclasses of a comparison: differences, findings, their evidence and fixes.

Kept apart from environment.py so that collecting a snapshot does not pay for them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from envsync.model.vocab import SEVERITIES, EvidenceSource, Kind, Severity


@dataclass(frozen=True, slots=True, kw_only=True)
class Difference:
    """One raw difference between a reference and a target snapshot (from deepdiff)."""

    kind: Kind
    section: str  # the snapshot view's table: distributions, files, python, torch, gpu, ...
    key: str  # distribution name, file path inside its distribution, or fact name
    reference: str | None
    target: str | None
    dist: str | None = None  # for `file` and `commit`: the distribution it belongs to

    @property
    def subject(self) -> str:
        """How a finding names it: the distribution, the file, or "section key"."""
        if self.section in ("distributions", "files"):
            return self.key
        if self.section == "commits":
            return f"{self.key} commit"
        return f"{self.section} {self.key}"


@dataclass(frozen=True, slots=True, kw_only=True)
class Evidence:
    source: EvidenceSource
    detail: str  # one sentence
    file: str | None = None
    line: int | None = None
    statement: str | None = None
    context: str | None = None  # module | if | try | function, and how startup gets there


@dataclass(frozen=True, slots=True, kw_only=True)
class PinFix:
    """Install the reference's version from the target's own index, others held."""

    kind: Literal["pin"] = "pin"
    summary: str  # what to do, in words a human can act on
    requirement: str  # NAME==VERSION
    dist: str


@dataclass(frozen=True, slots=True, kw_only=True)
class SyncDistFix:
    """Copy the distribution's installed files from the reference."""

    kind: Literal["sync-dist"] = "sync-dist"
    summary: str
    dist: str


@dataclass(frozen=True, slots=True, kw_only=True)
class SyncFileFix:
    """Copy one file of a watched distribution from the reference (or remove it)."""

    kind: Literal["sync-file"] = "sync-file"
    summary: str
    dist: str
    path: str  # relative to the distribution's location, as its RECORD keys it


@dataclass(frozen=True, slots=True, kw_only=True)
class FlagFix:
    """Launch with a flag value that avoids the failing import."""

    kind: Literal["flag"] = "flag"
    summary: str
    flag: str  # e.g. --grammar-backend
    value: str  # e.g. none
    gives_up: str  # the capability it costs
    used_when: tuple[str, ...] = ()  # command flags that mean that capability is used


# How a finding can be repaired: one class per kind, told apart by `kind` (vocab.FixKind).
Fix = PinFix | SyncDistFix | SyncFileFix | FlagFix


@dataclass(frozen=True, slots=True, kw_only=True)
class Finding:
    subject: str
    kind: Kind
    reference: str | None
    target: str | None
    severity: Severity
    reason: str
    decided_by: EvidenceSource  # the evidence source that set the severity
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
        counts: dict[str, int] = {s: 0 for s in SEVERITIES}
        for finding in self.findings:
            counts[finding.severity] += 1
        return counts

    @property
    def counts_text(self) -> str:
        """ "2 fatal, 1 benign", or "no drift"."""
        return ", ".join(f"{n} {s}" for s, n in self.summary.items() if n) or "no drift"

    def summary_line(self) -> str:
        """ "ct200 against ct129: 2 fatal, 1 benign": how every format and the CLI sum it up."""
        return f"{self.target} against {self.reference}: {self.counts_text}"


def short_hash(value: str | None) -> str | None:
    """A sha256 hex digest or a git commit id shortened for people ("1a2b3c4d5e…");
    other values as they are."""
    if value is not None and len(value) in (40, 64) and all(c in "0123456789abcdef" for c in value):
        return f"{value[:10]}…"
    return value
