"""Findings -> a Plan of ordered steps (pure): pins, distribution and file syncs, flags.

A plan is data: it is printed, saved as JSON, and applied later, and it is tied to the
target snapshot it was made from by a fingerprint, so that applying it to a host that has
changed since is refused.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from envsync.collect.identity import plan_target
from envsync.documents import read_json_object
from envsync.errors import DecodeError, InputError
from envsync.exhaustive import assert_never
from envsync.model.codec import from_data, to_data
from envsync.model.environment import Snapshot, why_no_files
from envsync.model.findings import Finding, Fix, FlagFix, PinFix, Report, SyncDistFix, SyncFileFix
from envsync.model.launch import with_flags
from envsync.model.vocab import ONLY, ONLY_DEFAULT, PREFER, Installer, Only, Prefer
from envsync.repair import steps
from envsync.repair.steps import Step, flag, pin, sync_dist, sync_file
from envsync.repair.steps.flag import FlagStep, flag_problem

# 3: a pin names no installer program (2: its `uv` path; 1: every step had every field).
PLAN_SCHEMA_VERSION = 3


def plan_problems(plan: Plan) -> list[str]:
    """What makes a plan unsafe to apply: a requirement that is not `NAME==VERSION`, a
    distribution that is not a name, a flag it may not set (empty when there is nothing)."""
    return [why for i, step in enumerate(plan.steps, 1) for why in steps.problems(step, i)]


def flags_problems(plan: Plan, current: Mapping[str, str], known: Iterable[str]) -> list[str]:
    """What a saved plan's flags change that it may not: a flag the service's entrypoint
    does not define (`known`: the flags the rule packs choose backends by, and those of the
    service's command), or an entry of service.json that no step of the plan sets and that
    the target does not keep already."""
    defined = set(known)
    stepped = {s.flag: s.value for s in plan.steps if isinstance(s, FlagStep)}
    problems = []
    for name, value in plan.flags.items():
        why = flag_problem(name, value)
        if why is None and name not in defined:
            why = "not a flag the service's entrypoint defines"
        if why is None and stepped.get(name, current.get(name)) != value:
            why = "service.json would change without a step of the plan that says so"
        if why:
            problems.append(f"its flags set {name!r}: {why}")
    for name in stepped:
        if name not in defined:
            problems.append(f"a step sets {name!r}: not a flag the service's entrypoint defines")
    return problems


@dataclass(frozen=True, slots=True, kw_only=True)
class Plan:
    schema_version: int = PLAN_SCHEMA_VERSION
    reference: str
    target: str
    target_fingerprint: str
    prefer: Prefer
    only: Only
    steps: tuple[Step, ...] = ()
    skipped: tuple[str, ...] = ()  # findings left alone, and why
    command: tuple[str, ...] = ()  # the command the service runs once the plan is applied
    flags: Mapping[str, str] = field(default_factory=dict)  # effective flags after the plan


def _choose(finding: Finding, prefer: Prefer, command: Sequence[str]) -> Fix | None:
    flags = [f for f in finding.fixes if isinstance(f, FlagFix)]
    fixes = [f for f in finding.fixes if not isinstance(f, FlagFix)]
    if prefer == "workaround" and flags:
        return flags[0]
    if prefer == "auto":
        free = [f for f in flags if not any(u in command for u in f.used_when)]
        if free:
            return free[0]
    return fixes[0] if fixes else (flags[0] if flags and prefer != "fix" else None)


def make_plan(
    report: Report,
    reference: Snapshot,
    target: Snapshot,
    *,
    prefer: Prefer = PREFER[0],
    only: Only = ONLY_DEFAULT,
    installer: Installer | None = None,
) -> Plan:
    """The steps that address the report's findings on the target (run with the command
    the report was made for); nothing that needs what the hosts cannot give. PlanError
    when a step cannot run on the target at all (then nothing has run)."""
    wanted = ONLY[only]
    command = report.command
    no_files = why_no_files(reference)
    planned: list[Step] = []
    skipped: list[str] = []
    pinned: set[str] = set()
    files: dict[str, list[tuple[str, Finding]]] = {}
    flags: dict[str, FlagStep] = {}
    patch_sets = sync_file.patch_sets(report)
    below: list[Finding] = []
    for finding in report.findings:
        if finding.severity not in wanted:
            below.append(finding)
            continue
        fix = _choose(finding, prefer, command)
        match fix:
            case None if finding.kind == "commit":
                skipped.append(
                    f"{finding.subject}: envsync copies the files that differ; it never moves "
                    "a checkout (git checkout, reset or stash)"
                )
            case None:
                skipped.append(f"{finding.subject}: no fix envsync can apply")
            case FlagFix() if fix.flag in flags:
                flags[fix.flag] = flag.merge(flags[fix.flag], finding.subject)
            case FlagFix():
                flags[fix.flag] = flag.make_step(fix, finding)
            case SyncFileFix() | SyncDistFix() if no_files is not None:
                skipped.append(
                    f"{finding.subject}: {fix.kind} needs the reference's files: {no_files}"
                )
            case SyncFileFix():
                files.setdefault(fix.dist, []).append((fix.path, finding))
            case PinFix() if fix.dist not in pinned:
                step = pin.make_step(fix, finding, reference, target, pinned, skipped, installer)
                planned += [step] if step is not None else []
            case SyncDistFix() if fix.dist not in pinned:
                copy = sync_dist.make_step(fix, finding, reference, target, pinned, skipped)
                planned += [copy] if copy is not None else []
            case PinFix() | SyncDistFix():
                pass  # its distribution is replaced by a step already planned
            case _:
                assert_never(fix)
    skipped += _left_below(below, files, only)
    for dist, items in sorted(files.items()):
        planned.append(sync_file.make_step(dist, items, patch_sets.get(dist, []), only))
    planned += flags.values()
    new_flags = {s.flag: s.value for s in flags.values()}
    return Plan(
        reference=reference.host,
        target=target.host,
        target_fingerprint=plan_target(target),
        prefer=prefer,
        only=only,
        steps=tuple(planned),
        skipped=tuple(skipped),
        command=with_flags(command, new_flags),
        flags={**(target.service_flags or {}), **new_flags},
    )


def _left_below(below: list[Finding], files: Mapping[str, object], only: Only) -> list[str]:
    """Why each finding below --only is left, but for those whose patch set moves anyway."""
    # A file of a patch set that another finding moves comes along (`sync_file.make_step`).
    return [
        f"{finding.subject}: {finding.severity} (--only {only})"
        for finding in below
        if not any(isinstance(x, SyncFileFix) and x.dist in files for x in finding.fixes)
    ]


def container_note(target: str, exec_prefix: Sequence[str]) -> str:
    """What changing a host behind an exec prefix means: a restart discards it."""
    return (
        f"{target} is reached through `{shlex.join(exec_prefix)}`: these changes are made "
        "inside the running container (or pod), and restarting it from its image discards "
        f"them. The lasting fix is a new image: bake in `envsync lock "
        f"{target}` of the repaired container and the pins above."
    )


def describe(plan: Plan, *, exec_prefix: Sequence[str] = ()) -> str:
    """The plan in words: what each step runs and changes, and what it fixes.

    `exec_prefix`: the target's, when it is behind one (a container, pod or allocation).
    """
    lines = [f"plan for {plan.target} (reference {plan.reference}, --prefer {plan.prefer}):"]
    if not plan.steps:
        lines.append("  nothing to do")
    for i, step in enumerate(plan.steps, 1):
        lines.append(f"  {i}. {step.kind}: {step.summary}")
        lines.append(f"     fixes: {', '.join(step.findings)}")
        lines += steps.describe(step)
    if plan.flags:
        kept = ", ".join(f"{k} {v}" for k, v in sorted(plan.flags.items()))
        lines.append(f"  service.json on {plan.target} keeps the flags: {kept}")
    if plan.flags and plan.command:
        lines.append(f"  the service will run: {' '.join(plan.command)}")
    for note in plan.skipped:
        lines.append(f"  left alone: {note}")
    if exec_prefix and plan.steps:
        lines.append(f"  note: {container_note(plan.target, exec_prefix)}")
    return "\n".join(lines) + "\n"


def dumps_plan(plan: Plan) -> str:
    return json.dumps(to_data(plan), indent=2) + "\n"


def load_plan(path: Path) -> Plan:
    """A plan saved with `repair -o`; InputError when it is not one this envsync reads."""
    data = read_json_object(path, InputError, "plan")
    version = data.get("schema_version")
    if isinstance(version, int) and not isinstance(version, bool) and version < PLAN_SCHEMA_VERSION:
        raise InputError(
            f"{path}: a plan of schema_version {version}, saved by an older envsync; "
            f"this envsync applies plans of schema_version {PLAN_SCHEMA_VERSION} only",
            tip="make the plan again with `envsync repair -o FILE` and review it",
        )
    if version != PLAN_SCHEMA_VERSION:
        raise InputError(f"{path}: plan schema_version {version!r} is not supported")
    try:
        plan = from_data(Plan, data, "plan")
    except DecodeError as e:
        raise InputError(f"{path}: not an envsync plan: {e}") from e
    problems = plan_problems(plan)
    problems += [
        f"its flags set {k!r}: {why}" for k, v in plan.flags.items() if (why := flag_problem(k, v))
    ]
    if problems:
        raise InputError(
            f"{path}: refusing the plan: {problems[0]}"
            + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""),
            tip="a plan is data: make a new one with `envsync repair -o FILE` and review it",
        )
    return plan
