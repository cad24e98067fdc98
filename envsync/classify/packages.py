"""A distribution that differs (missing, another version, only on the target): its verdict
from the imports startup runs, the requirements that ask for it, and its fixes.
"""

from __future__ import annotations

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from envsync.classify.doors import Door
from envsync.classify.graph import Failure, path_to
from envsync.classify.launched import Startup
from envsync.classify.startup import (
    CONTEXT_WORDS,
    SEVERITY_OF_CONTEXT,
    Analysis,
    ReferenceSide,
    failure_evidence,
    failure_reason,
    finding_about,
    import_names,
    short_file,
    statement_at,
)
from envsync.findings import Difference, Evidence, Finding, Fix, FlagFix, PinFix, SyncDistFix
from envsync.launch import with_flag
from envsync.markers import applies
from envsync.model import Snapshot, why_files_cannot_serve
from envsync.vocab import RUNS, Severity


def _requirement_evidence(name: str, reference: Snapshot, target: Snapshot) -> list[Evidence]:
    """Requires-Dist of target packages that the reference satisfies and the target does not."""
    out = []
    ref_dist = reference.distribution(name)
    tgt_dist = target.distribution(name)
    for requirer in target.distributions:
        for text in requirer.requires:
            try:
                req = Requirement(text)
            except InvalidRequirement:
                continue
            if canonicalize_name(req.name) != name:
                continue
            if applies(req, target) is not True:
                continue  # not for the target's platform, or an extra; or not readable
            ok_ref = ref_dist is not None and _satisfies(req, ref_dist.version)
            ok_tgt = tgt_dist is not None and _satisfies(req, tgt_dist.version)
            if ok_ref and not ok_tgt:
                have = f"has {tgt_dist.version}" if tgt_dist else "lacks it"
                out.append(
                    Evidence(
                        source="requirements",
                        detail=f"{requirer.display_name} {requirer.version} requires {text}; "
                        f"the reference satisfies it, the target {have}",
                    )
                )
    return out


def _satisfies(req: Requirement, version: str) -> bool:
    try:
        return req.specifier.contains(Version(version), prereleases=True)
    except InvalidVersion:
        return False


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
    name = diff.subject
    names = import_names(name, reference, target)
    shown = {"missing": "missing on the target", "extra": "only on the target"}.get(
        diff.kind, f"{diff.reference} on the reference, {diff.target} on the target"
    )
    requirements = _requirement_evidence(name, reference, target) if diff.kind != "extra" else []
    fixes = dist_fixes(name, reference, target) if diff.kind != "extra" else []
    related = [f for f in analysis.failures if f.top in names]
    # A statement that stops the reference's startup as well is not this difference's doing.
    shared = [f for f in related if f.context == "module" and side.fails_too(f)]
    related = [f for f in related if f not in shared]
    if related:
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
            fixes += _flag_fixes(related, analysis, startup)
        return finding_about(
            diff,
            severity=severity,
            reason=failure_reason(worst, analysis, target, side),
            decided_by=evidence[0].source,
            evidence=tuple(evidence + requirements),
            fixes=tuple(fixes),
        )
    if shared:
        first = shared[0]
        return finding_about(
            diff,
            severity="unknown",
            reason=f"{name} {shown}: envsync reads `{first.edge.statement}` "
            f"({statement_at(first)}) as failing on the reference too ({first.message()}), "
            "so this difference does not explain it and envsync cannot tell what it does.",
            decided_by=failure_evidence(first, analysis)[0].source,
            evidence=tuple(dict.fromkeys(e for f in shared for e in failure_evidence(f, analysis)))
            + tuple(requirements),
            fixes=tuple(fixes),
        )
    if analysis.graph is None:
        severity = "risky" if requirements else "unknown"
        why = (
            "a package another one requires"
            if requirements
            else "no startup import graph to tell whether startup uses it"
        )
        return finding_about(
            diff,
            severity=severity,
            reason=f"{name} {shown} ({why}).",
            decided_by="requirements" if requirements else "facts",
            evidence=tuple(requirements),
            fixes=tuple(fixes),
        )
    use = analysis.imports.surest(names) if analysis.imports else None
    if use is not None and use[2] in RUNS:
        importer, edge, context = use
        file = analysis.graph.modules[importer].file
        return finding_about(
            diff,
            severity="risky",
            reason=f"{name} {shown}: startup imports it ({importer}, {CONTEXT_WORDS[context]}); "
            "not shown to break.",
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
    if use is not None:
        # Inside a function of a module startup runs: it runs if startup calls it, and
        # envsync does not read which functions startup calls.
        importer, edge, _ = use
        facts = analysis.graph.modules[importer]
        at = f"{short_file(facts.file, importer) or importer}:{edge.line}"
        return finding_about(
            diff,
            severity="unknown",
            reason=f"{name} {shown}: startup may import it: {importer} imports it inside a "
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
    door = analysis.behind(target).door_to(name)
    if door is not None:
        return finding_about(
            diff,
            severity="unknown",
            reason=f"{name} {shown}: startup may import it: envsync stops reading at "
            f"{door.describe()} ({door_words(door)}), and {name} could be behind it.",
            decided_by="import-graph",
            evidence=(
                Evidence(
                    source="import-graph",
                    detail=f"envsync stops reading at {door.describe()}",
                    file=door.file,
                    line=door.line,
                    context=f"{door.context}; startup path: "
                    + " -> ".join(path_to(analysis.reached, door.module)),
                ),
                *requirements,
            ),
            fixes=tuple(fixes),
        )
    return finding_about(
        diff,
        severity="benign",
        reason=f"{name} {shown}: no import path from startup reaches it (envsync read "
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
