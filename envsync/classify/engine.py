"""classify(): every difference of a target against the reference to a finding, worst first."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from envsync import redact
from envsync.classify.consistency import reconcile, settle
from envsync.classify.facts import classify_fact, target_checks
from envsync.classify.files import classify_commit, classify_file
from envsync.classify.graph import GraphIndex
from envsync.classify.launched import Startup
from envsync.classify.native import apply_import_check as native_import_check
from envsync.classify.native import native_findings
from envsync.classify.packages import classify_dist
from envsync.classify.proof import proven
from envsync.classify.startup import Analysis, ReferenceSide
from envsync.classify.truth import apply_crash, apply_import_check
from envsync.collect.native import Providers
from envsync.hostside.shared import SKIPPED_VALUE
from envsync.model.environment import ImportOutcome, Snapshot, StartupGraph
from envsync.model.findings import Difference, Finding, Report
from envsync.model.vocab import PACKAGE_KINDS, SEVERITY_RANK


def classify(
    reference: Snapshot,
    target: Snapshot,
    diffs: Sequence[Difference],
    startup: Startup,
    imports: Sequence[ImportOutcome] = (),
    reference_imports: Sequence[ImportOutcome] | None = None,
    providers: Providers | None = None,
    index: GraphIndex | None = None,
) -> Report:
    """`index`: the target's graph indexed already (its reachability computed), where the
    calls made at import were asked about on that graph (compare/calls.py)."""
    blind = _no_startup(target, startup)
    graph = None if blind else plain_graph(target.startup)
    if index is not None and index.graph is not graph:
        index = None  # another graph's
    analysis = Analysis(graph, startup, startup.command, index)
    notes = [blind] if blind else []
    notes += _skipped(reference) + _skipped(target)
    side = ReferenceSide(reference)
    findings = [
        _classify_one(d, reference, target, analysis, startup, side)
        for d in diffs
        if d.kind != "commit"
    ]
    if blind:
        # Without the startup graph envsync cannot show that startup does not use it.
        findings = [
            replace(f, severity="unknown", reason=f"{f.reason[:-1]}; {blind}.")
            if f.severity == "benign"
            else f
            for f in findings
        ]
    findings += target_checks(reference, target)
    findings = native_findings(findings, reference, target, analysis, providers or {})
    findings, imports = native_import_check(findings, imports)
    findings = apply_import_check(findings, imports, reference, target, notes, reference_imports)
    findings = apply_crash(findings, target, reference, notes)
    findings += [
        classify_commit(d, reference, target, findings) for d in diffs if d.kind == "commit"
    ]
    findings = settle(
        reconcile(findings),
        analysis.index,
        analysis.reached if analysis.index is not None else None,
        where=f"{target.host} against {reference.host}",
    )
    findings.sort(key=lambda f: (SEVERITY_RANK[f.severity], f.kind, f.subject))
    return Report(
        reference=reference.host,
        target=target.host,
        entrypoint=startup.shown or startup.entrypoint,
        command=redact.command(startup.command),  # shown and saved: no --api-key values
        findings=tuple(findings),
        notes=tuple(notes),
    )


def plain_graph(graph: StartupGraph | None) -> StartupGraph | None:
    """The target's graph with its modules in a plain dict: reachability looks each module
    up a few hundred thousand times, and startup reaches nearly every module the walk
    read, so decoding them all at once costs nothing more than decoding them as met."""
    if graph is None or type(graph.modules) is dict:
        return graph
    return replace(graph, modules=dict(graph.modules.items()))


def _skipped(snapshot: Snapshot) -> list[str]:
    """A note for each watched file the probe did not read: a FIFO, socket or device."""
    return [
        f"{snapshot.host}: {path} ({d.name}) is {value[len(SKIPPED_VALUE) :]}: skipped, "
        "never opened"
        for d in snapshot.distributions
        for path, value in sorted((d.files or {}).items())
        if value.startswith(SKIPPED_VALUE)
    ]


def _no_startup(target: Snapshot, startup: Startup) -> str | None:
    """Why envsync has no startup graph to judge by on this target, or None."""
    if startup.unreadable:
        return startup.unreadable
    if startup.entrypoint is None:
        return "no service entrypoint: envsync cannot tell what startup uses"
    if target.startup is None:
        return (
            f"{target.host} has no startup import graph (a lock or snapshot file): "
            "envsync cannot tell what startup uses"
        )
    if startup.unresolved:
        names = ", ".join(r.partition(":")[2] for r in startup.unresolved)
        return f"{names} does not resolve on {target.host}: envsync cannot tell what startup uses"
    facts = target.startup.modules.get(startup.entrypoint)
    if facts is None or facts.kind == "missing":
        return f"{startup.entrypoint} is not importable on {target.host}"
    return None


def _classify_one(
    diff: Difference,
    reference: Snapshot,
    target: Snapshot,
    analysis: Analysis,
    startup: Startup,
    side: ReferenceSide,
) -> Finding:
    if diff.kind in PACKAGE_KINDS:
        found = classify_dist(diff, reference, target, analysis, startup, side)
    elif diff.kind == "file":
        found = classify_file(diff, reference, target, analysis, startup, side)
    else:
        return classify_fact(diff, analysis)
    return proven(found, diff, reference, target, analysis)  # degraded and benign need proof
