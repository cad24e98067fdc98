"""Ground truth over what was read: the real import check's exceptions and a crash the
smoke test watched raise the finding they match to fatal.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from envsync.classify.startup import import_names
from envsync.findings import Evidence, Finding
from envsync.model import ImportOutcome, Snapshot
from envsync.vocab import PACKAGE_KINDS


def apply_import_check(
    findings: list[Finding],
    outcomes: Sequence[ImportOutcome],
    reference: Snapshot,
    target: Snapshot,
    notes: list[str],
) -> list[Finding]:
    out = list(findings)
    for outcome in outcomes:
        if outcome.ok:
            continue
        detail = f"import {outcome.module}: {outcome.exception}: {outcome.message}"
        evidence = Evidence(
            source="import-check", detail=detail, file=outcome.file, line=outcome.line
        )
        i = finding_for_error(out, outcome.message or "", reference, target)
        if i is None:
            notes.append(f"import check: {detail} (not caused by a difference from the reference)")
            continue
        finding = out[i]
        if finding.severity != "fatal":
            finding = replace(
                finding,
                severity="fatal",
                decided_by="import-check",
                reason=f"{finding.subject}: importing {outcome.module} on the target fails: "
                f"{outcome.exception}: {outcome.message}.",
            )
        out[i] = replace(finding, evidence=(evidence, *finding.evidence))
    return out


def apply_crash(
    findings: list[Finding], target: Snapshot, reference: Snapshot, notes: list[str]
) -> list[Finding]:
    """A crash envsync watched on the target raises the finding it matches to fatal."""
    crash = target.crash
    if crash is None:
        return findings
    when = f" at {crash.at}" if crash.at else ""
    i = finding_for_error(findings, crash.exception, reference, target)
    if i is None:
        notes.append(
            f"the service crashed on {target.host}{when} with {crash.exception}; "
            "no difference from the reference explains it"
        )
        return findings
    finding = findings[i]
    evidence = Evidence(
        source="crash",
        detail=f"the service crashed on {target.host}{when}: {crash.exception}",
        statement=crash.line,
        context="watched by envsync's smoke test; kept until the service is next ready",
    )
    out = list(findings)
    out[i] = replace(
        finding,
        severity="fatal",
        decided_by="crash",
        reason=f"the service crashed on {target.host}{when} with {crash.exception}; "
        + finding.reason,
        evidence=(evidence, *finding.evidence),
    )
    return out


def failing_module(message: str) -> str | None:
    """The top-level module an import error is about ("No module named 'x.y'": x)."""
    import re

    match = re.search(r"No module named '([^']+)'", message) or re.search(
        r"cannot import name '[^']+' from '([^']+)'", message
    )
    return match.group(1).partition(".")[0] if match else None


def finding_for_error(
    findings: Sequence[Finding], message: str, reference: Snapshot, target: Snapshot
) -> int | None:
    """The index of the first package finding whose distribution provides the module an
    import error names, or None (the import check and crash diagnosis both ask this)."""
    module = failing_module(message)
    if module is None:
        return None
    for i, finding in enumerate(findings):
        if finding.kind not in PACKAGE_KINDS:
            continue
        names = import_names(finding.subject, reference, target)
        if module in names or module == finding.subject.replace("-", "_"):
            return i
    return None
