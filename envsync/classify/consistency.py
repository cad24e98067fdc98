"""One story per report: the rules that make a classification agree with itself, and the
check that every report passes before it is rendered.

`reconcile` is a rule of classification: a distribution that a finding names as its fix
(the provider of what a native load lacks, a requirement, the cause of an exception) takes
that finding's severity, never `benign` beside it. `problems` then checks the report: a
package `benign` while another finding names it; two fixes that move one distribution to
different versions (one removes what the other needs); a reason "X lacks N" where N is
bound on the target (as the graph index looks it up: one rule) or the import is not on
the startup path, the evidence read by the import it cites (its file and line), never by
its words. A problem is a bug in envsync: under ENVSYNC_CONSISTENCY=raise (the test suite
sets it) it raises; in a run it is logged, and the report still tells one story (a
`benign` so named becomes `unknown`).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Collection, Sequence
from dataclasses import replace

from envsync.classify.graph import GraphIndex
from envsync.exhaustive import assert_never
from envsync.model.environment import ImportEdge
from envsync.model.findings import Evidence, Finding, Fix, FlagFix, PinFix, SyncDistFix, SyncFileFix
from envsync.model.vocab import PACKAGE_KINDS

STRICT_ENV = "ENVSYNC_CONSISTENCY"  # "raise": a problem raises InconsistentReport

log = logging.getLogger(__name__)


class InconsistentReport(AssertionError):
    """A report that contradicts itself: a bug in envsync, raised only under tests."""


def _named_dists(finding: Finding) -> list[tuple[str, Fix]]:
    out: list[tuple[str, Fix]] = []
    for fix in finding.fixes:
        match fix:
            case PinFix() | SyncDistFix() | SyncFileFix():
                out.append((fix.dist, fix))
            case FlagFix():
                pass  # a flag names no distribution
            case _:
                assert_never(fix)
    return out


def reconcile(findings: Sequence[Finding]) -> list[Finding]:
    """A `benign` package finding that another finding names as its fix takes that
    finding's severity (the worst of them), with the naming finding as its evidence."""
    by_subject = {f.subject: i for i, f in enumerate(findings) if f.kind in PACKAGE_KINDS}
    out = list(findings)
    for other in findings:
        if other.severity == "benign":
            continue
        for dist, fix in _named_dists(other):
            i = by_subject.get(dist)
            if i is None or out[i] is other:
                continue
            mine = out[i]
            if mine.severity != "benign":
                # only `benign` is a claim the other finding disproves ("nothing startup
                # runs uses it"); a verdict with its own reasons stays
                continue
            out[i] = replace(
                mine,
                severity=other.severity,
                decided_by=other.decided_by,
                reason=f"{_head(mine)}: the {other.kind} finding {other.subject} "
                f"({other.severity}) needs it: its fix is to {fix.summary}.",
                evidence=(
                    Evidence(
                        source=other.decided_by,
                        detail=f"{other.subject}: {other.reason}",
                    ),
                    *mine.evidence,
                ),
            )
    return out


def _head(finding: Finding) -> str:
    shown = {"missing": "missing on the target", "extra": "only on the target"}.get(
        finding.kind, f"{finding.reference} on the reference, {finding.target} on the target"
    )
    return f"{finding.subject} {shown}"


def problems(
    findings: Sequence[Finding],
    index: GraphIndex | None = None,
    reached: Collection[str] | None = None,
) -> list[str]:
    """What in these findings contradicts the rest: empty for a report that tells one story.
    `index`/`reached`: the target's startup graph and the modules startup may run, to check
    the names reasons say are missing (skipped without them)."""
    out: list[str] = []
    package = {f.subject: f for f in findings if f.kind in PACKAGE_KINDS}
    pins: dict[str, tuple[str, str]] = {}
    places: Places | None = None
    for finding in findings:
        for dist, fix in _named_dists(finding):
            named = package.get(dist)
            if (
                named is not None
                and named is not finding
                and named.severity == "benign"
                and finding.severity != "benign"
            ):
                out.append(
                    f"{dist} is benign while the {finding.severity} finding "
                    f"{finding.subject} names it as its fix ({fix.summary})"
                )
            if isinstance(fix, PinFix):
                seen = pins.setdefault(dist, (fix.requirement, finding.subject))
                if seen[0] != fix.requirement:
                    out.append(
                        f"{finding.subject}'s fix pins {fix.requirement}, which removes "
                        f"{seen[0]} that {seen[1]}'s fix installs"
                    )
        if index is not None and reached is not None:
            if places is None and any(e.source == "name-check" for e in finding.evidence):
                places = _places(index, reached, _cited(findings))
            if places is not None:
                out += _made_up(finding, index, places)
    return out


Places = dict[tuple[str | None, int], list[tuple[str, ImportEdge]]]


def _cited(findings: Sequence[Finding]) -> set[str]:
    """The files that name-check evidence cites."""
    return {
        ev.file
        for finding in findings
        for ev in finding.evidence
        if ev.source == "name-check" and ev.file is not None
    }


def _places(index: GraphIndex, reached: Collection[str], files: set[str]) -> Places:
    """The `from X import N` statements of the modules startup runs, by file and line, in
    the `files` that evidence cites (no other is looked up)."""
    out: Places = {}
    modules = index.graph.modules
    for importer in reached:
        facts = modules.get(importer)
        if facts is None or facts.file not in files:
            continue
        for edge in facts.imports:
            if edge.names:
                out.setdefault((facts.file, edge.line), []).append((importer, edge))
    return out


def _made_up(finding: Finding, index: GraphIndex, places: Places) -> list[str]:
    """Name-check evidence whose import (the statement it cites, by file and line) is in no
    module startup runs, or imports no name that the target's module lacks, as the graph
    index looks names up."""
    out = []
    for ev in finding.evidence:
        if ev.source != "name-check" or ev.file is None or ev.line is None:
            continue  # the reference's side of a failure ("on the reference, X defines N")
        cited = places.get((ev.file, ev.line))
        if not cited:
            out.append(
                f"{finding.subject}: {ev.file}:{ev.line} is no import of a module on the "
                f"startup path ({ev.detail})"
            )
            continue
        for importer, edge in cited:
            if not any(index.lookup(edge.module, n)[0] is False for n in edge.names):
                out.append(
                    f"{finding.subject}: {edge.module} binds every name {importer} imports "
                    f"from it at line {edge.line} on the target ({ev.detail})"
                )
    return out


def settle(
    findings: Sequence[Finding],
    index: GraphIndex | None = None,
    reached: Collection[str] | None = None,
    *,
    where: str = "",
) -> list[Finding]:
    """The findings, checked: a problem raises under ENVSYNC_CONSISTENCY=raise; in a run
    it is logged and a `benign` that another finding names becomes `unknown`."""
    found = problems(findings, index, reached)
    if not found:
        return list(findings)
    text = f"envsync bug: an inconsistent report{f' ({where})' if where else ''}: " + "; ".join(
        found
    )
    if os.environ.get(STRICT_ENV) == "raise":
        raise InconsistentReport(text)
    log.warning("%s", text)
    named = {d for f in findings if f.severity != "benign" for d, _ in _named_dists(f)}
    return [
        replace(
            f,
            severity="unknown",
            reason=f"{f.reason[:-1]}; another finding names it, so envsync cannot call it benign.",
        )
        if f.severity == "benign" and f.kind in PACKAGE_KINDS and f.subject in named
        else f
        for f in findings
    ]
