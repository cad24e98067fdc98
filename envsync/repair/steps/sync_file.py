"""The sync-file step: copy a watched distribution's differing files from the reference and
remove the ones the reference lacks; a package's patched files move together.

Its data, its checks (its names; its paths stay inside the package directory), its
description, how it is applied (each host's own place for each file), what it backs up, and
the step the SyncFileFixes of one distribution become, with the rest of its patch set along.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from envsync.errors import StalePlan
from envsync.model.environment import Snapshot
from envsync.model.findings import Finding, Report, SyncFileFix
from envsync.model.vocab import SEVERITIES, Only
from envsync.repair.steps.context import BacksUp, StepContext, file_paths
from envsync.repair.steps.names import names_problems


@dataclass(frozen=True, slots=True, kw_only=True)
class SyncFileStep:
    """Copy a watched distribution's differing files from the reference, remove extras."""

    kind: Literal["sync-file"] = "sync-file"
    summary: str
    findings: tuple[str, ...]
    dist: str  # the watched distribution the files belong to
    files: tuple[str, ...] = ()  # paths relative to the distribution's location
    remove: tuple[str, ...] = ()  # paths to delete (not on the reference)


def patch_sets(report: Report) -> dict[str, list[tuple[str, Finding]]]:
    """Each distribution's files that the report's findings would sync, with their finding."""
    # A watched package's differing files are one patch set: they move together.
    found: dict[str, list[tuple[str, Finding]]] = {}
    for finding in report.findings:
        for each in finding.fixes:
            if isinstance(each, SyncFileFix):
                found.setdefault(each.dist, []).append((each.path, finding))
    return found


def make_step(
    dist: str,
    items: list[tuple[str, Finding]],
    patch_set: list[tuple[str, Finding]],
    only: Only,
) -> SyncFileStep:
    """The step that syncs the chosen files of `dist`, and the rest of its patch set along."""
    chosen = {id(f) for _, f in items}
    along = [(p, f) for p, f in patch_set if id(f) not in chosen]
    items = sorted([*items, *along], key=lambda item: item[0])
    copy = tuple(sorted(p for p, f in items if f.reference is not None))
    remove = tuple(sorted(p for p, f in items if f.reference is None))
    what = [f"copy {len(copy)} file(s)"] if copy else []
    what += [f"remove {len(remove)} file(s)"] if remove else []
    # Files below --only that come too: said with their severity and the reason.
    kinds = "/".join(s for s in SEVERITIES if any(f.severity == s for _, f in along))
    whole = (
        f"; includes {len(along)} {kinds} file(s) that --only {only} would leave: "
        f"{dist}'s patched files move together"
        if along
        else ""
    )
    return SyncFileStep(
        summary=f"{' and '.join(what)} of {dist} from the reference (backed up first{whole})",
        findings=tuple(f.subject for _, f in items),
        files=copy,
        remove=remove,
        dist=dist,
    )


def problems(step: SyncFileStep, i: int) -> list[str]:
    """What makes step `i` unsafe to apply: a distribution that is not a name."""
    return names_problems(i, step.kind, (step.dist,))


def describe(step: SyncFileStep) -> list[str]:
    """The lines `describe` prints under the step's summary and findings."""
    shown = [*step.files[:5], *(f"remove {p}" for p in step.remove[:5])]
    return [f"     files: {', '.join(shown)}"]


def check_paths(step: SyncFileStep, target: str) -> None:
    """Its files are relative to their package directory and stay inside it (StalePlan,
    naming the plan's `target`, when one does not)."""
    for rel in (*step.files, *step.remove):
        parts = rel.replace("\\", "/").split("/")
        if not rel or rel.startswith("/") or ".." in parts or "\0" in rel:
            raise StalePlan(
                f"{target}: refusing the plan: step {step.kind} names {rel!r}, "
                "which is not inside its package directory",
                tip="make a new plan with `envsync repair` and review it",
            )


def backs_up(step: SyncFileStep, target: Snapshot) -> BacksUp:
    """The target's files it copies over or removes (ApplyError: one has no place there)."""
    return BacksUp(files=tuple(file_paths(target, step.dist, (*step.files, *step.remove)).values()))


def apply(step: SyncFileStep, ctx: StepContext) -> None:
    """Copy the files from the reference host, remove the ones it lacks."""
    agent, target = ctx.agent, ctx.target
    source, reference = ctx.source(step.kind)
    # Each host's own place for each file: site-packages, or an editable install's
    # source tree (written in place, never through git).
    ref_paths = file_paths(reference, step.dist, step.files)
    tgt_paths = file_paths(target, step.dist, step.files)
    removed = file_paths(target, step.dist, step.remove)
    archive = source.pack_paths(ref_paths)
    agent.unpack_paths(tgt_paths, archive, remove=sorted(removed.values()), ident=ctx.ident)
