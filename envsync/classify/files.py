"""A watched package's file (patched, added, missing) and a checkout at another commit:
whether startup runs it, and the file to copy.
"""

from __future__ import annotations

from collections.abc import Sequence

from envsync.classify.graph import Failure, path_to
from envsync.classify.launched import Startup
from envsync.classify.packages import failing_finding
from envsync.classify.startup import (
    Analysis,
    ReferenceSide,
    door_finding,
    finding_about,
    module_of,
)
from envsync.model.environment import GitState, Snapshot
from envsync.model.findings import Difference, Evidence, Finding, SyncFileFix
from envsync.model.vocab import RUNS, SEVERITY_RANK


def classify_commit(
    diff: Difference, reference: Snapshot, target: Snapshot, findings: Sequence[Finding]
) -> Finding:
    """A checkout at another commit matters as much as the worst of its differing files."""
    files = [
        f
        for f in findings
        if f.kind == "file" and any(x.kind == "sync-file" and x.dist == diff.dist for x in f.fixes)
    ]
    severity = min((f.severity for f in files), key=SEVERITY_RANK.__getitem__, default="benign")

    def where(snapshot: Snapshot, commit: str | None) -> str:
        dist = snapshot.distribution(diff.dist or "")
        git = dist.source.git if dist is not None and dist.source is not None else None
        branch = f" ({git.branch})" if isinstance(git, GitState) and git.branch else ""
        return f"{(commit or '?')[:12]}{branch} on {snapshot.host}"

    reason = (
        f"{diff.dist} at commit {where(reference, diff.reference)}, {where(target, diff.target)}"
    )
    if files:
        reason += (
            f"; {len(files)} of its files differ (each its own finding). envsync copies "
            "files; it never runs git checkout, reset or stash on a checkout."
        )
    else:
        reason += "; its files are the same on both hosts."
    return finding_about(diff, severity=severity, reason=reason, decided_by="facts")


def classify_file(
    diff: Difference,
    reference: Snapshot,
    target: Snapshot,
    analysis: Analysis,
    startup: Startup,
    side: ReferenceSide,
) -> Finding:
    """The verdict of a watched package's file that differs: by an import it makes fail
    (`_failing_here`), else by how surely startup imports its module (`risky` where it
    runs), with the copy (or removal) that fixes it."""
    what = _what_differs(diff, reference, target)
    fix = _sync_fix(diff)
    module = module_of(diff.subject)
    failing = _failing_here(module, analysis, side) if module else []
    if failing:
        return failing_finding(diff, failing, analysis, startup, target, side, [], [fix])
    how = analysis.reached.get(module) if module else None
    if how is None and module and module.endswith(".__main__"):
        how = None  # a package's __main__ runs only under `-m pkg`: reached as such
    if how is not None and how.context in RUNS:
        steps = path_to(analysis.reached, module)  # type: ignore[arg-type]
        chain = " -> ".join(steps) if len(steps) > 1 else how.root.label
        return finding_about(
            diff,
            severity="risky",
            reason=f"{what}: startup imports {module} ({chain}).",
            decided_by="import-graph",
            evidence=(
                Evidence(
                    source="import-graph", detail=f"startup path: {chain}", context=how.context
                ),
            ),
            fixes=(fix,),
        )
    if analysis.graph is None:
        severity, reason = (
            "risky",
            f"{what}: no startup import graph to tell whether startup runs it.",
        )
        decided = "facts"
    elif how is not None:
        steps = path_to(analysis.reached, module)  # type: ignore[arg-type]
        return finding_about(
            diff,
            severity="unknown",
            reason=f"{what}: startup may import {module}: only through an import inside a "
            f"function ({' -> '.join(steps)}), and envsync does not read which functions "
            "startup calls.",
            decided_by="import-graph",
            evidence=(
                Evidence(
                    source="import-graph",
                    detail=f"startup path: {' -> '.join(steps)}",
                    context=how.context,
                ),
            ),
            fixes=(fix,),
        )
    else:
        door = analysis.behind(target).door_to_module(module) if module else None
        if door is not None:
            return door_finding(
                diff,
                door,
                head=f"{what}: startup may import {module}",
                behind=str(module),
                context=door.context,
                fixes=(fix,),
            )
        severity, reason = "benign", f"{what}: no import path from startup reaches it."
        decided = "import-graph"
    return finding_about(
        diff,
        severity=severity,
        reason=reason,
        decided_by=decided,
        fixes=(fix,),
    )


def _failing_here(module: str, analysis: Analysis, side: ReferenceSide) -> list[Failure]:
    """The imports that cannot succeed on the target because of this file (its module
    absent there, not a regular file, or not compilable by the target's interpreter; or
    an import the file makes that the reference's copy does not: one both copies hold
    fails for the module it imports), and that succeed on the reference: they decide as
    surely as they run."""
    return [
        f
        for f in analysis.failures
        if (f.module == module or (f.importer == module and not side.states(f)))
        and not side.fails_too(f)
    ]


def _what_differs(diff: Difference, reference: Snapshot, target: Snapshot) -> str:
    """The file, how it differs, and whose local patch it is ("x.py differs (a local
    patch on the target)")."""
    ref_dist = reference.distribution(diff.dist or "")
    tgt_dist = target.distribution(diff.dist or "")
    path = diff.subject
    if diff.target is None:
        state = "missing on the target"
    elif diff.reference is None:
        state = "only on the target"
    else:
        state = "differs"
    whose = []
    if ref_dist is not None and (path in ref_dist.patched or path in ref_dist.added):
        whose.append("a local patch on the reference")
    if tgt_dist is not None and (path in tgt_dist.patched or path in tgt_dist.added):
        whose.append("a local patch on the target")
    return f"{path} {state}" + (f" ({', '.join(whose)})" if whose else "")


def _sync_fix(diff: Difference) -> SyncFileFix:
    """The reference's copy of the file, or its removal where the reference has none."""
    path = diff.subject
    return SyncFileFix(
        summary=f"remove {path} from the target (the reference has no such file)"
        if diff.reference is None
        else f"copy {path} from the reference (backed up first, hash checked after)",
        dist=diff.dist or "",
        path=path,
    )
