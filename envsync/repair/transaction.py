"""Apply a Plan to a host: back up first, journal each step, roll back on the first failure.

The one stage with side effects. Every change goes through the host's Runner: pip runs
with the target's own interpreter (and so its own pip configuration and index), files move
as tar archives between the reference's and the target's agent (envsync/hostside/agent/,
through its client envsync/runner/agent.py). What each kind of step backs up and runs is
its module's, in steps/.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from envsync.collect.identity import plan_target
from envsync.errors import (
    AgentError,
    ApplyError,
    EnvsyncError,
    InputError,
    RollbackError,
    StalePlan,
)
from envsync.model.environment import Snapshot
from envsync.model.inventory import HostSpec
from envsync.repair import steps
from envsync.repair.plan import Plan, plan_problems
from envsync.repair.steps import Step
from envsync.repair.steps.context import StepContext
from envsync.runner import Runner
from envsync.runner.agent import Agent, BackupInfo, Restored


def leaving_tip(message: str) -> str:
    """What to do about a path that leaves the environment (the host agent names the link
    and where it points, or the RECORD line that names a path outside)."""
    if "a link to" in message:
        return (
            "replace the link with a copy of what it points to, or change the environment "
            "it points into on its own; then run the command again"
        )
    return (
        "a RECORD line naming a path outside the environment is no installer's: remove the "
        "line from that RECORD, then run the command again"
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class Applied:
    backup: str
    steps: int
    duration_s: float


def apply_plan(
    plan: Plan,
    *,
    target_spec: HostSpec,
    target: Snapshot,
    runners: Callable[[HostSpec], Runner],
    reference_spec: HostSpec | None,
    reference: Snapshot | None,
    pip_options: Sequence[str] = (),
    on_step: Callable[[int, Step], None] | None = None,
    lock: str | None = None,
) -> Applied:
    """Apply `plan` to the target whose fresh snapshot is `target`; roll back on failure.

    `lock` is the token of the target's lock (mutex.target_mutex) this command holds.
    """
    if plan_target(target) != plan.target_fingerprint:
        raise StalePlan(
            f"{target_spec.name}: the target changed since the plan was made "
            "(packages, watched files or service flags differ); refusing to apply",
            tip="make a new plan with `envsync repair` and review it",
        )
    for step in plan.steps:
        steps.check_paths(step, plan.target)
    problems = plan_problems(plan)
    if problems:
        raise InputError(
            f"{plan.target}: refusing the plan: {problems[0]}; nothing was changed",
            tip="make a new plan with `envsync repair` and review it",
        )
    started = time.perf_counter()
    agent = Agent(target_spec, runners(target_spec), lock=lock)
    ident = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + "-" + secrets.token_hex(3)
    saved = [steps.backs_up(step, target) for step in plan.steps]
    dists = sorted({d for each in saved for d in each.dists})
    files = [f for each in saved for f in each.files]
    summary = "; ".join(step.summary for step in plan.steps)
    try:
        made = agent.backup(ident, dists=dists, files=files, summary=summary)
    except AgentError as e:
        if e.kind == "unfinished":
            raise ApplyError(
                e.message,
                tip="run the same command again: its plan was made from the half-changed state",
            ) from e
        if e.kind == "leaves-environment":
            raise ApplyError(e.message, tip=leaving_tip(e.message)) from e
        raise ApplyError(f"{e.message}; the backup failed, nothing was changed") from e
    backup = made.path
    ctx = StepContext(
        flags=plan.flags,
        agent=agent,
        target=target,
        backup=backup,
        ident=ident,
        runners=runners,
        reference_spec=reference_spec,
        reference=reference,
        pip_options=tuple(pip_options),
        claims=made.claims,
    )
    try:
        for i, step in enumerate(plan.steps, 1):
            if on_step is not None:
                on_step(i, step)
            agent.journal(ident, f"step {i} started: {step.summary}")
            steps.apply(step, ctx)
            agent.journal(ident, f"step {i} done")
        # Applied once the journal says so: an interrupt before that is undone like a failure.
        agent.journal(ident, "applied", state="applied")
    except EnvsyncError as e:
        _rollback_after(agent, ident, f"step {i} ({step.kind}: {step.summary}) failed: {e.message}")
    except BaseException:
        _rollback_after(agent, ident, f"step {i} ({step.kind}) was interrupted")
        raise
    return Applied(backup=backup, steps=len(plan.steps), duration_s=time.perf_counter() - started)


def _rollback_after(agent: Agent, ident: str, why: str) -> None:
    try:
        # forced: under this lock since the backup, no later apply to protect; what
        # appeared meanwhile that the apply did not write is kept (and named)
        done = agent.restore(ident, force=True)
    except EnvsyncError as e:
        raise RollbackError(
            f"{why}; rolling back ALSO failed: {e.message}",
            tip="the host restores an unfinished apply by itself once this envsync is gone; "
            f"`envsync rollback {agent.spec.name}` makes sure once the host is reachable",
        ) from e
    kept = ""
    if done.found:
        shown = ", ".join(done.found[:5]) + (
            f" and {len(done.found) - 5} more" if len(done.found) > 5 else ""
        )
        kept = f"; kept what this apply did not write: {shown}"
    raise ApplyError(f"{why}; everything done before it was rolled back{kept}")


def rollback(
    spec: HostSpec,
    runner: Runner,
    ident: str = "latest",
    *,
    force: bool = False,
    lock: str | None = None,
) -> Restored:
    """Restore the latest apply not rolled back (or a named backup), as a transaction over
    its record; works after a killed apply or a killed restore too (run it again)."""
    name = spec.name
    try:
        return Agent(spec, runner, lock=lock).restore(ident, force=force)
    except AgentError as e:
        command = f"envsync rollback {name}" + (f" --backup {ident}" if ident != "latest" else "")
        rerun = f"`{command}`"
        match e.kind:
            case "no-backup":
                raise RollbackError(f"{name}: no envsync backup in this environment") from e
            case "changed-since":
                raise RollbackError(
                    e.message,
                    tip="a change made after the apply (a pip install, an edit) would be lost; "
                    f"check those paths, then `{command} --force` restores the backup over them",
                ) from e
            case "partial":
                raise RollbackError(
                    f"{e.message}; rerun {rerun}, which finishes it",
                    tip="fix the cause first (room on the disk, a file that is read-only)",
                ) from e
            case "crashed" | "lock-lost":
                raise RollbackError(
                    f"{name}: the restore ended before it finished ({e.message}): "
                    "the target may be partly restored",
                    tip=f"rerun {rerun}: it takes the target from wherever this one stopped",
                ) from e
            case "not-restored":
                # what is outside, through a link, is beyond any rerun; a path that
                # changed under the restore is put back by one
                tip = (
                    leaving_tip(e.message)
                    if "outside this environment" in e.message
                    else f"find what changed those paths under the restore, then `{command} "
                    "--force` puts them back"
                )
                raise RollbackError(e.message, tip=tip) from e
            case "no-space" | "cannot-restore":
                raise RollbackError(
                    e.message, tip=f"make room or fix the file, then rerun {rerun}"
                ) from e
        raise RollbackError(e.message) from e


def backups(spec: HostSpec, runner: Runner) -> tuple[BackupInfo, ...]:
    """The environment's backups, oldest first, with their states."""
    return Agent(spec, runner).backups()
