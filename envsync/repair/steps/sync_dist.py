"""The sync-dist step: replace distributions' installed files with the reference's (per
RECORD): a custom build no index serves, or a pin when the target has nothing to install with.

Its data, its check, its description, how it is applied (also by a pin that falls back to
the reference's files), what it backs up, and the step a SyncDistFix becomes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from envsync.model.environment import Distribution, Snapshot
from envsync.model.findings import Finding, SyncDistFix
from envsync.repair.steps.context import BacksUp, StepContext, location
from envsync.repair.steps.dependencies import replaced_group
from envsync.repair.steps.names import names_problems
from envsync.runner.agent import Agent


@dataclass(frozen=True, slots=True, kw_only=True)
class SyncDistStep:
    """Replace the distributions' installed files with the reference's (per RECORD)."""

    kind: Literal["sync-dist"] = "sync-dist"
    summary: str
    findings: tuple[str, ...]
    dists: tuple[str, ...]


def make_step(
    fix: SyncDistFix,
    finding: Finding,
    reference: Snapshot,
    target: Snapshot,
    pinned: set[str],
    skipped: list[str],
) -> SyncDistStep | None:
    """The step that copies `fix.dist` (with the dependencies it needs) from the reference;
    None (and why, in `skipped`) when the reference has none."""
    group = replaced_group(fix.dist, reference, target, pinned, skipped)
    if group is None:
        return None
    return copy_step(group, finding)


def copy_step(group: Sequence[Distribution], finding: Finding, why: str = "") -> SyncDistStep:
    """The step that copies `group` from the reference (`why`: said after it, when a pin
    could not install it)."""
    copying = f"copy {', '.join(f'{d.display_name} {d.version}' for d in group)} "
    return SyncDistStep(
        summary=copying + "from the reference" + why,
        findings=(finding.subject,),
        dists=tuple(d.name for d in group),
    )


def problems(step: SyncDistStep, i: int) -> list[str]:
    """What makes step `i` unsafe to apply: a distribution that is not a name."""
    return names_problems(i, step.kind, step.dists)


def describe(step: SyncDistStep) -> list[str]:
    """The lines `describe` prints under the step's summary and findings."""
    return [f"     replaces the installed files of {', '.join(step.dists)} (per RECORD)"]


def backs_up(step: SyncDistStep, target: Snapshot) -> BacksUp:
    """The distributions it replaces, whole."""
    return BacksUp(dists=step.dists)


def apply(step: SyncDistStep, ctx: StepContext) -> None:
    """Copy the distributions from the reference host."""
    source, _ = ctx.source(step.kind)
    sync_dists(step.dists, ctx.agent, ctx.target, source, ctx.ident)


def sync_dists(
    dists: Sequence[str], agent: Agent, target: Snapshot, source: Agent, ident: str
) -> None:
    """Replace each distribution's installed files with the reference's (the files its
    RECORD names, as the backup `ident` recorded them on the target)."""
    for dist in dists:
        archive = source.pack_dist(dist)
        agent.remove_dist(dist, ident)
        root = location(target, dist) or "purelib"
        agent.unpack(root, archive, ident=ident)
