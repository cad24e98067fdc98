"""Apply a Plan to a host: back up first, journal each step, roll back on the first failure.

The one stage with side effects. Every change goes through the host's Runner: pip runs
with the target's own interpreter (and so its own pip configuration and index), files move
as tar archives between the reference's and the target's agent (envsync/apply/agent.py).
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from envsync.apply.agent import ERROR_MARKER
from envsync.errors import AgentError, ApplyError, EnvsyncError, RollbackError, StalePlan
from envsync.inventory import HostSpec
from envsync.model import Snapshot, Unavailable
from envsync.plan import FlagStep, PinStep, Plan, Step, SyncDistStep, SyncFileStep
from envsync.runner import CommandResult, Runner

AGENT_TIMEOUT = 600.0
# pip's words (pip 20 to 26), then uv's, when an index cannot serve a requirement.
_NOT_ON_INDEX = (
    "No matching distribution found",
    "Could not find a version",
    "not found in the package registry",
    "not found in the provided package locations",
    "no versions of",
)
PIP_TIMEOUT = 1800.0
# The agent travels as the -c argument (stdin carries its archives); the first line drops
# the current directory from sys.path, as the probe's bootstrap does.
_PREFIX = "import sys;sys.path[:1]==['']and sys.path.pop(0)\n"
# The lock's own operations, and reads of the reference, are not done under the lock.
_UNLOCKED_OPS = frozenset({"hold", "locked", "unlock", "pack", "watch"})


@cache
def agent_source() -> str:
    return _PREFIX + Path(__file__).with_name("agent.py").read_text(encoding="utf-8")


class Agent:
    """The agent on one host, through that host's runner.

    With `lock` (the token of the target's lock, envsync/apply/hostlock.py) every operation
    checks that this command still holds the lock and counts as running under it.
    """

    def __init__(self, spec: HostSpec, runner: Runner, *, lock: str | None = None) -> None:
        self.spec = spec
        self.runner = runner
        self.lock = lock

    def argv(self, op: dict[str, Any]) -> list[str]:
        if self.lock is not None and op["op"] not in _UNLOCKED_OPS:
            op = {**op, "lock": self.lock}
        return [self.spec.python, "-c", agent_source(), json.dumps(op)]

    def raw(
        self, op: dict[str, Any], payload: bytes | None = None, *, timeout: float = AGENT_TIMEOUT
    ) -> CommandResult:
        result = self.runner.run(self.argv(op), input=payload, timeout=timeout)
        if result.returncode != 0:
            text = result.stderr.decode("utf-8", "replace")
            marked = next(
                (ln for ln in reversed(text.splitlines()) if ln.startswith(ERROR_MARKER)), None
            )
            kind, message = "crashed", result.stderr_tail(3) or "no output"
            if marked is not None:
                try:
                    error = json.loads(marked[len(ERROR_MARKER) :])
                    kind, message = str(error["kind"]), str(error["message"])
                except (ValueError, KeyError, TypeError):
                    pass
            raise AgentError(f"{self.spec.name}: {op['op']}: {message}", kind=kind)
        return result

    def call(
        self, op: dict[str, Any], payload: bytes | None = None, *, timeout: float = AGENT_TIMEOUT
    ) -> dict[str, Any]:
        stdout = self.raw(op, payload, timeout=timeout).stdout
        out = stdout.decode("utf-8", "replace").strip().splitlines()
        try:
            answer = json.loads(out[-1]) if out else {}
        except (ValueError, RecursionError):
            answer = None
        if not isinstance(answer, dict):
            raise AgentError(
                f"{self.spec.name}: {op['op']}: the agent answered no JSON object", kind="crashed"
            )
        return answer


@dataclass(frozen=True, slots=True, kw_only=True)
class Applied:
    backup: str
    steps: int
    duration_s: float


def _constraints(target: Snapshot, replaced: Sequence[str]) -> str:
    """Every other installed distribution held at its current version."""
    lines = [
        f"{d.display_name}=={d.version}"
        for d in target.distributions
        if d.name not in replaced and not d.display_name.startswith("-")
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
    """The target's own pip, or uv aimed at the target's interpreter: --no-deps, others held."""
    if step.installer == "uv":
        executable = (
            target.interpreter.executable
            if not isinstance(target.interpreter, Unavailable)
            else python
        )
        head = [step.uv or "uv", "pip", "install", "--python", executable, "--no-deps"]
    else:
        head = [python, "-m", "pip", "install", "--no-deps", "--no-input"]
        head.append("--disable-pip-version-check")
    return [*head, "--constraint", constraints, *options, *step.requirements]


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

    `lock` is the token of the target's lock (hostlock.target_lock) this command holds.
    """
    from envsync.plan import fingerprint

    if fingerprint(target) != plan.target_fingerprint:
        raise StalePlan(
            f"{target_spec.name}: the target changed since the plan was made "
            "(packages, watched files or service flags differ); refusing to apply",
            tip="make a new plan with `envsync repair` and review it",
        )
    _check_paths(plan)
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
    try:
        made = agent.call({"op": "backup", "id": ident, "dists": dists, "files": files})
    except AgentError as e:
        raise ApplyError(f"{e.message}; the backup failed, nothing was changed") from e
    backup = str(made["backup"])
    ctx = _StepContext(
        plan=plan,
        agent=agent,
        target=target,
        backup=backup,
        runners=runners,
        reference_spec=reference_spec,
        reference=reference,
        pip_options=tuple(pip_options),
    )
    try:
        for i, step in enumerate(plan.steps, 1):
            if on_step is not None:
                on_step(i, step)
            agent.call({"op": "journal", "id": ident, "event": f"step {i} started: {step.summary}"})
            _run_step(step, ctx)
            agent.call({"op": "journal", "id": ident, "event": f"step {i} done"})
        # Applied once the journal says so: an interrupt before that is undone like a failure.
        agent.call({"op": "journal", "id": ident, "event": "applied", "state": "applied"})
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
        agent.call({"op": "restore", "id": ident})
    except EnvsyncError as e:
        raise RollbackError(
            f"{why}; rolling back ALSO failed: {e.message}",
            tip="the host restores an unfinished apply by itself once this envsync is gone; "
            f"`envsync rollback {agent.spec.name}` makes sure once the host is reachable",
        ) from e
    raise ApplyError(f"{why}; everything done before it was rolled back")


@dataclass(frozen=True, slots=True, kw_only=True)
class _StepContext:
    """What every step of one apply runs with: the target's agent and fresh snapshot, the
    backup it made, and the reference (a host, or None when it is a file)."""

    plan: Plan
    agent: Agent
    target: Snapshot
    backup: str
    runners: Callable[[HostSpec], Runner]
    reference_spec: HostSpec | None
    reference: Snapshot | None
    pip_options: tuple[str, ...]

    def pin(self, step: PinStep) -> None:
        agent, target, backup, spec = self.agent, self.target, self.backup, self.agent.spec
        reference_spec, runners = self.reference_spec, self.runners
        constraints = f"{backup}/constraints.txt"
        agent.call({"op": "write", "path": constraints, "text": _constraints(target, step.dists)})
        argv = install_argv(step, target, spec.python, constraints, self.pip_options)
        # Through the agent, so that the target's lock knows the installer is running.
        try:
            result = agent.call({"op": "run", "argv": argv}, timeout=PIP_TIMEOUT)
        except AgentError as e:
            if e.kind == "not-found":
                raise ApplyError(f"{argv[0]} not found on {spec.name}") from e
            raise
        if result["returncode"] == 0:
            return
        stderr = result["stderr"]
        unavailable = any(m in stderr for m in _NOT_ON_INDEX)
        if not (unavailable and step.fallback and reference_spec is not None):
            why = f"; {step.no_fallback}" if unavailable and step.no_fallback else ""
            tail = " | ".join(x.strip() for x in stderr.strip().splitlines()[-2:] if x.strip())
            raise ApplyError(f"{step.installer} exited {result['returncode']}: {tail}{why}")
        # The index cannot serve it: the reference's installed files can.
        _sync_dists(step.dists, agent, target, Agent(reference_spec, runners(reference_spec)))

    def flag(self) -> None:
        agent, plan = self.agent, self.plan
        agent.call({"op": "set-service", "flags": dict(plan.flags)})

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
        archive = source.raw({"op": "pack", "paths": ref_paths}).stdout
        agent.call(
            {"op": "unpack", "paths": tgt_paths, "remove": sorted(removed.values())}, archive
        )


def _run_step(step: Step, ctx: _StepContext) -> None:
    match step:
        case PinStep():
            ctx.pin(step)
        case FlagStep():
            ctx.flag()
        case SyncDistStep():
            source, _ = ctx.source(step)
            _sync_dists(step.dists, ctx.agent, ctx.target, source)
        case SyncFileStep():
            ctx.sync_files(step)


def _sync_dists(dists: Sequence[str], agent: Agent, target: Snapshot, source: Agent) -> None:
    """Replace each distribution's installed files with the reference's (per RECORD)."""
    for dist in dists:
        archive = source.raw({"op": "pack", "root": "", "dist": dist}).stdout
        agent.call({"op": "remove-dist", "name": dist})
        root = _location(target, dist) or "purelib"
        agent.call({"op": "unpack", "root": root}, archive)


def rollback(
    spec: HostSpec, runner: Runner, ident: str = "latest", *, lock: str | None = None
) -> dict[str, Any]:
    """Restore the host's latest (or a named) backup; works after a killed apply too."""
    try:
        return Agent(spec, runner, lock=lock).call({"op": "restore", "id": ident})
    except AgentError as e:
        if e.kind == "no-backup":
            raise RollbackError(f"{spec.name}: no envsync backup on this host") from e
        raise RollbackError(e.message) from e
