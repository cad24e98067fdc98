"""A distribution that differs (missing, another version, only on the target): its verdict
from the imports startup runs, the requirements that ask for it, and its fixes.
"""

from __future__ import annotations

from dataclasses import replace

from envsync.classify.dependents import Checked, Violation, version_checks, violations
from envsync.classify.doors import Door
from envsync.classify.graph import Failure, path_to
from envsync.classify.launched import Startup
from envsync.classify.proof import lifted
from envsync.classify.startup import (
    CONTEXT_WORDS,
    SEVERITY_OF_CONTEXT,
    Analysis,
    ReferenceSide,
    door_finding,
    failure_evidence,
    failure_reason,
    finding_about,
    import_names,
    short_file,
    statement_at,
)
from envsync.model.environment import ImportEdge, Snapshot, StartupGraph, why_files_cannot_serve
from envsync.model.findings import Difference, Evidence, Finding, Fix, FlagFix, PinFix, SyncDistFix
from envsync.model.launch import with_flag
from envsync.model.vocab import RUNS, SEVERITY_RANK, Context, Severity, weaker


def dist_fixes(name: str, reference: Snapshot, target: Snapshot) -> list[Fix]:
    ref = reference.distribution(name)
    if ref is None:
        return []
    fixes: list[Fix] = []
    if not ref.custom_build:
        fixes.append(
            PinFix(
                summary=f"pin {ref.display_name}=={ref.version} (pip install --no-deps, "
                "every other package held at its version)",
                requirement=f"{ref.display_name}=={ref.version}",
                dist=name,
            )
        )
    if why_files_cannot_serve(reference, target) is None:
        why = (
            "a custom build: never replaced from an index"
            if ref.custom_build
            else "no index needed"
        )
        fixes.append(
            SyncDistFix(
                summary=f"copy {ref.display_name} {ref.version}'s installed files "
                f"from the reference ({why})",
                dist=name,
            )
        )
    return fixes


def _flag_fixes(related: list[Failure], analysis: Analysis, startup: Startup) -> list[Fix]:
    """Launch-flag values that avoid every one of these failures and break nothing new."""
    if analysis.graph is None or not startup.entrypoint:
        return []
    bad = {(f.module, f.missing_name) for f in related if f.context == "module"}
    if not bad:
        return []
    current_fatal = analysis.fatal_keys()
    offered: list[Fix] = []
    for pack in startup.packs:
        for rule in pack.flags:
            if not rule.workaround or not any(f.root.flag == rule.flag for f in related):
                continue
            current = analysis.flags.get(rule.flag, rule.default)
            candidates = list(rule.prefer) + [v for v in rule.values if v not in rule.prefer]
            for value in candidates:
                if value == current:
                    continue
                alt = Analysis(
                    analysis.graph,
                    startup,
                    with_flag(startup.command, rule.flag, value),
                    analysis.index,
                )
                alt_fatal = alt.fatal_keys()
                if alt_fatal & bad or not alt_fatal <= current_fatal:
                    continue
                gives_up = rule.values[value].gives_up or "nothing the rule pack knows of"
                offered.append(
                    FlagFix(
                        summary=f"launch with {rule.flag} {value} (gives up: {gives_up})",
                        flag=rule.flag,
                        value=value,
                        gives_up=gives_up,
                        used_when=rule.values[value].used_when,
                    )
                )
    return offered


def classify_dist(
    diff: Difference,
    reference: Snapshot,
    target: Snapshot,
    analysis: Analysis,
    startup: Startup,
    side: ReferenceSide,
) -> Finding:
    """The verdict of a distribution that differs: from the imports startup runs, then no
    lower than `risky` where startup imports a part of it unguarded that envsync could not
    check, or runs a dependent whose requirement on it the target violates (`benign` and
    `degraded` need proof)."""
    found = violations(diff.subject, reference, target, analysis) if diff.kind != "extra" else []
    finding = _verdict(diff, reference, target, analysis, startup, side, found)
    names = import_names(diff.subject, reference, target)
    checked = version_checks(diff.subject, names, reference, target, analysis)
    if checked:
        finding = _checked(diff, finding, checked)
    # a violated requirement lifts a verdict where the reading found nothing wrong with the
    # distribution; where it found failing imports of it, those are what the requirement
    # asks for, and they decide (the requirement stays evidence)
    fails = any(f.top in names for f in analysis.failures)
    required = None if fails else _required(found)
    if finding.severity == "risky" and required is not None:
        return replace(finding, reason=f"{finding.reason[:-1]}; {required[0]}.")
    if SEVERITY_RANK[finding.severity] <= SEVERITY_RANK["risky"]:
        return finding
    # `unknown` claims nothing about startup: only a requirement lifts it; `degraded` and
    # `benign` say startup works, which an unguarded import of a changed version disproves
    claims = finding.severity in ("degraded", "benign")
    floor = (_unguarded(diff, names, analysis) if claims else None) or required
    if floor is None:
        return finding
    return lifted(finding, _shown_name(diff), *floor)


def _checked(diff: Difference, finding: Finding, checked: list[Checked]) -> Finding:
    """A version check startup runs that raises on the target's version alone decides as
    surely as it runs (fatal at module level); one that raises on both hosts is evidence."""
    evidence = tuple(c.evidence for c in checked)
    first = checked[0]
    if not first.caused or SEVERITY_RANK[first.severity] >= SEVERITY_RANK[finding.severity]:
        return replace(finding, evidence=tuple(dict.fromkeys((*finding.evidence, *evidence))))
    return replace(
        finding,
        severity=first.severity,
        decided_by="version-check",
        reason=f"{_shown_name(diff)}: {first.reason}.",
        evidence=tuple(dict.fromkeys((*evidence, *finding.evidence))),
    )


def _shown_name(diff: Difference) -> str:
    shown = {"missing": "missing on the target", "extra": "only on the target"}.get(
        diff.kind, f"{diff.reference} on the reference, {diff.target} on the target"
    )
    return f"{diff.subject} {shown}"


def _unguarded(
    diff: Difference, names: set[str], analysis: Analysis
) -> tuple[str, Evidence] | None:
    """An import of a changed version that startup runs unguarded at module level and that
    envsync could not check (a name from a module whose names it cannot read: a module
    `__getattr__`, an extension, a computed table): nothing showed that part loads."""
    if diff.kind != "version" or analysis.graph is None or analysis.index is None:
        return None
    for importer, how in analysis.reached.items():
        facts = analysis.graph.modules.get(importer)
        if facts is None or how.context not in ("module", "if"):
            continue
        for edge in facts.imports:
            if edge.context not in ("module", "if") or edge.module.partition(".")[0] not in names:
                continue
            unread = [n for n in edge.names if analysis.index.lookup(edge.module, n)[0] is None]
            if not unread:
                continue
            context = weaker(how.context, edge.context)
            at = f"{short_file(facts.file, importer) or importer}:{edge.line}"
            chain = " -> ".join(path_to(analysis.reached, importer))
            return (
                f"startup imports {', '.join(unread)} from it {CONTEXT_WORDS[context]}, "
                f"unguarded ({importer}, {at}), and envsync cannot read whether {edge.module} "
                "defines it",
                Evidence(
                    source="import-graph",
                    detail=f"{importer} imports {edge.module} {CONTEXT_WORDS[context]}; "
                    f"envsync cannot read whether it defines {', '.join(unread)}",
                    file=facts.file,
                    line=edge.line,
                    statement=edge.statement,
                    context=f"{edge.context}; startup path: {chain}",
                ),
            )
    return None


def _required(found: list[Violation]) -> tuple[str, Evidence] | None:
    """A dependent startup runs requires another version than the target has."""
    for v in found:
        if v.reached and v.reference_meets:
            return f"{v.words}, which the target violates and startup runs it", v.evidence
    return None


def _verdict(
    diff: Difference,
    reference: Snapshot,
    target: Snapshot,
    analysis: Analysis,
    startup: Startup,
    side: ReferenceSide,
    found: list[Violation],
) -> Finding:
    """The verdict from the reading: its imports that fail, then those that fail on the
    reference too, then how surely startup imports it, then a door it may be behind."""
    name = diff.subject
    names = import_names(name, reference, target)
    requirements = [v.evidence for v in found]
    fixes = dist_fixes(name, reference, target) if diff.kind != "extra" else []
    related, shared = _failures_of(names, analysis, side)
    if related:
        return failing_finding(diff, related, analysis, startup, target, side, requirements, fixes)
    if shared:
        return _failing_on_both(diff, shared, analysis, requirements, fixes)
    if analysis.graph is None:
        return _without_graph(diff, found, requirements, fixes)
    use = analysis.imports.surest(names) if analysis.imports else None
    if use is not None and use[2] in RUNS:
        return _imported(diff, use, analysis.graph, requirements, fixes)
    if use is not None:
        return _imported_in_function(diff, use, analysis, analysis.graph, requirements, fixes)
    return _unreached(diff, analysis, target, requirements, fixes)


def _failures_of(
    names: set[str], analysis: Analysis, side: ReferenceSide
) -> tuple[list[Failure], list[Failure]]:
    """The failing imports of these names that are this difference's doing, and those at
    module level that stop the reference's startup as well."""
    related = [f for f in analysis.failures if f.top in names]
    # A statement that stops the reference's startup as well is not this difference's doing.
    shared = [f for f in related if f.context == "module" and side.fails_too(f)]
    # A guarded or conditional import that cannot succeed on the reference either is not
    # what this difference breaks: it is no reason for the verdict.
    related = [f for f in related if f not in shared and not side.fails_too(f)]
    return related, shared


def failing_finding(
    diff: Difference,
    related: list[Failure],
    analysis: Analysis,
    startup: Startup,
    target: Snapshot,
    side: ReferenceSide,
    requirements: list[Evidence],
    fixes: list[Fix],
) -> Finding:
    """Imports of it that fail: the first decides (as surely as its context runs), with
    the launch flags that avoid them where it stops startup."""
    # Failures come surest first, then in the order startup runs them: the first is
    # the one that stops startup; every one of them is evidence.
    worst = related[0]
    severity: Severity = SEVERITY_OF_CONTEXT[worst.context]
    evidence: list[Evidence] = []
    for f in related:
        evidence += failure_evidence(f, analysis)
        works = side.works(f) if f.context == "module" else None
        if works is not None:
            evidence.append(works)
    if severity == "fatal" and side.why_unchecked:
        evidence.append(Evidence(source="facts", detail=side.why_unchecked))
    evidence = list(dict.fromkeys(evidence))
    if severity == "fatal":
        fixes = fixes + _flag_fixes(related, analysis, startup)
    return finding_about(
        diff,
        severity=severity,
        reason=failure_reason(worst, analysis, target, side),
        decided_by=evidence[0].source,
        evidence=tuple(evidence + requirements),
        fixes=tuple(fixes),
    )


def _failing_on_both(
    diff: Difference,
    shared: list[Failure],
    analysis: Analysis,
    requirements: list[Evidence],
    fixes: list[Fix],
) -> Finding:
    """`unknown`: its imports fail on the reference too, so this difference explains none."""
    first = shared[0]
    return finding_about(
        diff,
        severity="unknown",
        reason=f"{_shown_name(diff)}: envsync reads `{first.edge.statement}` "
        f"({statement_at(first)}) as failing on the reference too ({first.message()}), "
        "so this difference does not explain it and envsync cannot tell what it does.",
        decided_by=failure_evidence(first, analysis)[0].source,
        evidence=tuple(dict.fromkeys(e for f in shared for e in failure_evidence(f, analysis)))
        + tuple(requirements),
        fixes=tuple(fixes),
    )


def _without_graph(
    diff: Difference, found: list[Violation], requirements: list[Evidence], fixes: list[Fix]
) -> Finding:
    """No startup graph: `risky` where another package requires it, `unknown` otherwise."""
    caused = any(v.reference_meets for v in found)
    why = (
        "a package another one requires"
        if caused
        else "no startup import graph to tell whether startup uses it"
    )
    return finding_about(
        diff,
        severity="risky" if caused else "unknown",
        reason=f"{_shown_name(diff)} ({why}).",
        decided_by="requirements" if caused else "facts",
        evidence=tuple(requirements),
        fixes=tuple(fixes),
    )


def _imported(
    diff: Difference,
    use: tuple[str, ImportEdge, Context],
    graph: StartupGraph,
    requirements: list[Evidence],
    fixes: list[Fix],
) -> Finding:
    """`risky`: startup imports it where that import runs, and nothing showed it breaks."""
    importer, edge, context = use
    file = graph.modules[importer].file
    return finding_about(
        diff,
        severity="risky",
        reason=f"{_shown_name(diff)}: startup imports it "
        f"({importer}, {CONTEXT_WORDS[context]}); not shown to break.",
        decided_by="import-graph",
        evidence=(
            Evidence(
                source="import-graph",
                detail=f"{importer} imports {edge.module}",
                file=file,
                line=edge.line,
                statement=edge.statement,
                context=edge.context,
            ),
            *requirements,
        ),
        fixes=tuple(fixes),
    )


def _imported_in_function(
    diff: Difference,
    use: tuple[str, ImportEdge, Context],
    analysis: Analysis,
    graph: StartupGraph,
    requirements: list[Evidence],
    fixes: list[Fix],
) -> Finding:
    """`unknown`: a module startup runs imports it inside a function, which runs if startup
    calls it, and envsync does not read which functions startup calls."""
    importer, edge, _ = use
    facts = graph.modules[importer]
    at = f"{short_file(facts.file, importer) or importer}:{edge.line}"
    return finding_about(
        diff,
        severity="unknown",
        reason=f"{_shown_name(diff)}: startup may import it: {importer} imports it inside a "
        f"function ({at}), and envsync does not read which functions startup calls.",
        decided_by="import-graph",
        evidence=(
            Evidence(
                source="import-graph",
                detail=f"{importer} imports {edge.module} inside a function",
                file=facts.file,
                line=edge.line,
                statement=edge.statement,
                context=edge.context
                + f"; startup path: {' -> '.join(path_to(analysis.reached, importer))}",
            ),
            *requirements,
        ),
        fixes=tuple(fixes),
    )


def _unreached(
    diff: Difference,
    analysis: Analysis,
    target: Snapshot,
    requirements: list[Evidence],
    fixes: list[Fix],
) -> Finding:
    """No import of it that startup may run: `unknown` behind a door envsync cannot see
    past, `benign` where no path from startup reaches it."""
    name = diff.subject
    door = analysis.behind(target).door_to(name)
    if door is not None:
        return door_finding(
            diff,
            door,
            head=f"{_shown_name(diff)}: startup may import it",
            behind=name,
            context=f"{door.context}; startup path: "
            + " -> ".join(path_to(analysis.reached, door.module)),
            words=door_words(door),
            more=requirements,
            fixes=fixes,
        )
    return finding_about(
        diff,
        severity="benign",
        reason=f"{_shown_name(diff)}: no import path from startup reaches it (envsync read "
        f"{len(analysis.reached)} modules startup may run, in every package).",
        decided_by="import-graph",
        evidence=tuple(requirements),
        fixes=tuple(fixes),
    )


def door_words(door: Door) -> str:
    """Why envsync cannot see past a door, in a few words."""
    if door.what == "an extension module":
        return "its compiled code may import any module of its distribution or of those it requires"
    if door.prefix:
        return f"the module name is computed; it starts with {door.prefix!r}"
    if door.line is not None:
        return "the module name is computed at run time"
    return "envsync cannot read what it imports"
