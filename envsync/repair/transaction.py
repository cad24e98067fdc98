"""Apply a Plan to a host: back up first, journal each step, roll back on the first failure.

The one stage with side effects. Every change goes through the host's Runner: pip runs
with the target's own interpreter (and so its own pip configuration and index), files move
as tar archives between the reference's and the target's agent (envsync/hostside/agent/,
through its client envsync/runner/agent.py).
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
from envsync.exhaustive import assert_never
from envsync.hostside.shared import normalize
from envsync.model.environment import Snapshot, Unavailable
from envsync.model.inventory import HostSpec
from envsync.repair.plan import Plan, plan_problems
from envsync.repair.steps import Step
from envsync.repair.steps.flag import FlagStep
from envsync.repair.steps.names import requirement_problem
from envsync.repair.steps.pin import PinStep
from envsync.repair.steps.sync_dist import SyncDistStep
from envsync.repair.steps.sync_file import SyncFileStep
from envsync.runner import Runner
from envsync.runner.agent import Agent, BackupInfo, Claim, Restored

# pip's words (pip 20 to 26), then uv's, when an index cannot serve a requirement.
_NOT_ON_INDEX = (
    "No matching distribution found",
    "Could not find a version",
    "not found in the package registry",
    "not found in the provided package locations",
    "no versions of",
)
PIP_TIMEOUT = 1800.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Applied:
    backup: str
    steps: int
    duration_s: float


def _constraints(target: Snapshot, replaced: Sequence[str]) -> str:
    """Every other installed distribution held at its current version (one that is not a
    plain NAME==VERSION is no line of it: a constraints file reads options too)."""
    lines = [
        f"{d.display_name}=={d.version}"
        for d in target.distributions
        if d.name not in replaced and requirement_problem(f"{d.display_name}=={d.version}") is None
    ]
    return "\n".join(lines) + "\n"


def _location(snapshot: Snapshot, dist: str) -> str | None:
    found = snapshot.distribution(dist)
    return found.location if found else None


def _file_paths(snapshot: Snapshot, dist: str, keys: Sequence[str]) -> dict[str, str]:
    """{file key: real path} on one host: in site-packages, or in the source tree of an
    editable install."""
    found = snapshot.distribution(dist)
    if found is None:
        raise ApplyError(f"{dist} is not installed on {snapshot.host}")
    out = {}
    for key in keys:
        path = found.file_path(key)
        if path is None:
            raise ApplyError(f"{snapshot.host}: no place for {key} in {dist}'s install")
        out[key] = path
    return out


def install_argv(
    step: PinStep, target: Snapshot, python: str, constraints: str, options: Sequence[str]
) -> list[str]:
    """The target's own pip, or uv aimed at the target's interpreter: --no-deps, others held.

    The program and its options come from the host's configuration (its inventory entry,
    its fresh snapshot: where uv is); the plan gives only validated `NAME==VERSION`s, and
    they come after `--`, where no installer reads an option.
    """
    for req in step.requirements:
        why = requirement_problem(req)
        if why:
            raise InputError(f"refusing to hand an installer {req!r}: {why}")
    if step.installer == "uv":
        executable = (
            target.interpreter.executable
            if not isinstance(target.interpreter, Unavailable)
            else python
        )
        uv = (target.installers.uv if target.installers is not None else None) or "uv"
        head = [uv, "pip", "install", "--python", executable, "--no-deps"]
    else:
        head = [python, "-m", "pip", "install", "--no-deps", "--no-input"]
        head.append("--disable-pip-version-check")
    return [*head, "--constraint", constraints, *options, "--", *step.requirements]


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
    _check_paths(plan)
    problems = plan_problems(plan)
    if problems:
        raise InputError(
            f"{plan.target}: refusing the plan: {problems[0]}; nothing was changed",
            tip="make a new plan with `envsync repair` and review it",
        )
    started = time.perf_counter()
    agent = Agent(target_spec, runners(target_spec), lock=lock)
    ident = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + "-" + secrets.token_hex(3)
    dists = sorted(
        {d for s in plan.steps if isinstance(s, PinStep | SyncDistStep) for d in s.dists}
    )
    files: list[str] = []
    for step in plan.steps:
        if isinstance(step, SyncFileStep):
            files += _file_paths(target, step.dist, (*step.files, *step.remove)).values()
    summary = "; ".join(step.summary for step in plan.steps)
    try:
        made = agent.backup(ident, dists=dists, files=files, summary=summary)
    except AgentError as e:
        if e.kind == "unfinished":
            raise ApplyError(
                e.message,
                tip="run the same command again: its plan was made from the half-changed state",
            ) from e
        raise ApplyError(f"{e.message}; the backup failed, nothing was changed") from e
    backup = made.path
    ctx = _StepContext(
        plan=plan,
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
            _run_step(step, ctx)
            agent.journal(ident, f"step {i} done")
        # Applied once the journal says so: an interrupt before that is undone like a failure.
        agent.journal(ident, "applied", state="applied")
    except EnvsyncError as e:
        _rollback_after(agent, ident, f"step {i} ({step.kind}: {step.summary}) failed: {e.message}")
    except BaseException:
        _rollback_after(agent, ident, f"step {i} ({step.kind}) was interrupted")
        raise
    return Applied(backup=backup, steps=len(plan.steps), duration_s=time.perf_counter() - started)


def _check_paths(plan: Plan) -> None:
    """A plan's files are relative to their package directory and stay inside it."""
    for step in plan.steps:
        if not isinstance(step, SyncFileStep):
            continue
        for rel in (*step.files, *step.remove):
            parts = rel.replace("\\", "/").split("/")
            if not rel or rel.startswith("/") or ".." in parts or "\0" in rel:
                raise StalePlan(
                    f"{plan.target}: refusing the plan: step {step.kind} names {rel!r}, "
                    "which is not inside its package directory",
                    tip="make a new plan with `envsync repair` and review it",
                )


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


@dataclass(frozen=True, slots=True, kw_only=True)
class _StepContext:
    """What every step of one apply runs with: the target's agent and fresh snapshot, the
    backup it made, and the reference (a host, or None when it is a file)."""

    plan: Plan
    agent: Agent
    target: Snapshot
    backup: str
    ident: str
    runners: Callable[[HostSpec], Runner]
    reference_spec: HostSpec | None
    reference: Snapshot | None
    pip_options: tuple[str, ...]
    claims: tuple[Claim, ...] = ()  # RECORD lines over other distributions' files

    def pin(self, step: PinStep) -> None:
        agent, target, backup, spec = self.agent, self.target, self.backup, self.agent.spec
        reference_spec, runners = self.reference_spec, self.runners
        names = {normalize(d) for d in step.dists}
        claims = [c.message for c in self.claims if c.dist in names]
        if claims:
            # pip's uninstall would remove another distribution's files: never run it
            if not (step.fallback and reference_spec is not None):
                raise ApplyError(f"refusing to run {step.installer}: {claims[0]}")
            source = Agent(reference_spec, runners(reference_spec))
            _sync_dists(step.dists, agent, target, source, self.ident)
            return
        constraints = f"{backup}/constraints.txt"
        agent.write(constraints, _constraints(target, step.dists))
        argv = install_argv(step, target, spec.python, constraints, self.pip_options)
        # Through the agent, so that the target's lock knows the installer is running.
        try:
            result = agent.run(argv, ident=self.ident, timeout=PIP_TIMEOUT)
        except AgentError as e:
            if e.kind == "not-found":
                raise ApplyError(f"{argv[0]} not found on {spec.name}") from e
            raise
        if result.returncode == 0:
            return
        stderr = result.stderr
        unavailable = any(m in stderr for m in _NOT_ON_INDEX)
        if not (unavailable and step.fallback and reference_spec is not None):
            why = f"; {step.no_fallback}" if unavailable and step.no_fallback else ""
            tail = " | ".join(x.strip() for x in stderr.strip().splitlines()[-2:] if x.strip())
            raise ApplyError(f"{step.installer} exited {result.returncode}: {tail}{why}")
        # The index cannot serve it: the reference's installed files can.
        source = Agent(reference_spec, runners(reference_spec))
        _sync_dists(step.dists, agent, target, source, self.ident)

    def flag(self) -> None:
        self.agent.set_flags(self.plan.flags)

    def source(self, step: Step) -> tuple[Agent, Snapshot]:
        """The reference's agent and snapshot, for a step that copies its files."""
        reference_spec, runners = self.reference_spec, self.runners
        if reference_spec is None or self.reference is None:
            raise ApplyError(f"{step.kind} needs the reference host, and it is a file here")
        source = Agent(reference_spec, runners(reference_spec))
        return source, self.reference

    def sync_files(self, step: SyncFileStep) -> None:
        agent, target = self.agent, self.target
        source, reference = self.source(step)
        # Each host's own place for each file: site-packages, or an editable install's
        # source tree (written in place, never through git).
        ref_paths = _file_paths(reference, step.dist, step.files)
        tgt_paths = _file_paths(target, step.dist, step.files)
        removed = _file_paths(target, step.dist, step.remove)
        archive = source.pack_paths(ref_paths)
        agent.unpack_paths(tgt_paths, archive, remove=sorted(removed.values()), ident=self.ident)


def _run_step(step: Step, ctx: _StepContext) -> None:
    match step:
        case PinStep():
            ctx.pin(step)
        case FlagStep():
            ctx.flag()
        case SyncDistStep():
            source, _ = ctx.source(step)
            _sync_dists(step.dists, ctx.agent, ctx.target, source, ctx.ident)
        case SyncFileStep():
            ctx.sync_files(step)
        case _:
            assert_never(step)


def _sync_dists(
    dists: Sequence[str], agent: Agent, target: Snapshot, source: Agent, ident: str
) -> None:
    """Replace each distribution's installed files with the reference's (the files its
    RECORD names, as the backup `ident` recorded them on the target)."""
    for dist in dists:
        archive = source.pack_dist(dist)
        agent.remove_dist(dist, ident)
        root = _location(target, dist) or "purelib"
        agent.unpack(root, archive, ident=ident)


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
            case "no-space" | "cannot-restore":
                raise RollbackError(
                    e.message, tip=f"make room or fix the file, then rerun {rerun}"
                ) from e
        raise RollbackError(e.message) from e


def backups(spec: HostSpec, runner: Runner) -> tuple[BackupInfo, ...]:
    """The environment's backups, oldest first, with their states."""
    return Agent(spec, runner).backups()
