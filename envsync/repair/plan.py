"""Findings -> a Plan of ordered steps (pure): pins, distribution and file syncs, flags.

A plan is data: it is printed, saved as JSON, and applied later, and it is tied to the
target snapshot it was made from by a fingerprint, so that applying it to a host that has
changed since is refused.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from envsync.collect.identity import plan_target
from envsync.documents import read_json_object
from envsync.errors import DecodeError, InputError, PlanError
from envsync.exhaustive import assert_never
from envsync.model.codec import from_data, to_data
from envsync.model.environment import (
    Distribution,
    Snapshot,
    Unavailable,
    why_files_cannot_serve,
    why_no_files,
)
from envsync.model.findings import Finding, Fix, FlagFix, PinFix, Report, SyncDistFix, SyncFileFix
from envsync.model.launch import with_flags
from envsync.model.markers import applies
from envsync.model.vocab import ONLY, ONLY_DEFAULT, PREFER, SEVERITIES, Installer, Only, Prefer

# 3: a pin names no installer program (2: its `uv` path; 1: every step had every field).
PLAN_SCHEMA_VERSION = 3


@dataclass(frozen=True, slots=True, kw_only=True)
class PinStep:
    """Install NAME==VERSION (and the dependencies it needs) with --no-deps, others held."""

    kind: Literal["pin"] = "pin"
    summary: str
    findings: tuple[str, ...]  # subjects of the findings it addresses
    requirements: tuple[str, ...]  # NAME==VERSION, the finding's and its dependencies'
    dists: tuple[str, ...]  # the distributions it replaces or installs
    # When the target's index cannot serve a version, copy the distributions from the
    # reference instead (only when interpreter and platform match), or why not.
    fallback: bool = False
    no_fallback: str | None = None
    # The target's own pip, or uv (`uv pip --python`): the program is the one the target's
    # fresh snapshot finds at apply time, never a path from the plan.
    installer: Installer = "pip"


@dataclass(frozen=True, slots=True, kw_only=True)
class SyncDistStep:
    """Replace the distributions' installed files with the reference's (per RECORD)."""

    kind: Literal["sync-dist"] = "sync-dist"
    summary: str
    findings: tuple[str, ...]
    dists: tuple[str, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class SyncFileStep:
    """Copy a watched distribution's differing files from the reference, remove extras."""

    kind: Literal["sync-file"] = "sync-file"
    summary: str
    findings: tuple[str, ...]
    dist: str  # the watched distribution the files belong to
    files: tuple[str, ...] = ()  # paths relative to the distribution's location
    remove: tuple[str, ...] = ()  # paths to delete (not on the reference)


@dataclass(frozen=True, slots=True, kw_only=True)
class FlagStep:
    """Keep a launch flag for the service on the target (its effective command)."""

    kind: Literal["flag"] = "flag"
    summary: str
    findings: tuple[str, ...]
    flag: str
    value: str
    gives_up: str


# One class per kind of step (vocab.FixKind), told apart by `kind` in a saved plan.
Step = PinStep | SyncDistStep | SyncFileStep | FlagStep

# PEP 508's name, PEP 440's characters: nothing an installer could read as an option, a
# path, a URL or a second requirement.
_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?")
_VERSION = re.compile(r"[A-Za-z0-9][A-Za-z0-9.+!_-]*")


def name_problem(name: str) -> str | None:
    """Why `name` is not a distribution name an installer may be handed (None: it is)."""
    return None if _NAME.fullmatch(name) else "not a valid distribution name (PEP 508)"


def requirement_problem(text: str) -> str | None:
    """Why `text` is not a plain `NAME==VERSION` an installer may be handed (None: it is):
    no option, path, URL, marker or second requirement can hide in one that is."""
    name, sep, version = text.partition("==")
    if not sep:
        return "not NAME==VERSION"
    why = name_problem(name)
    if why:
        return why
    if not _VERSION.fullmatch(version):
        return "not a valid version (PEP 440)"
    try:
        Version(version)
    except InvalidVersion:
        return "not a valid version (PEP 440)"
    return None


def pin_of(dist: Distribution, host: str) -> str:
    """`NAME==VERSION` of a distribution, for an installer; InputError (nothing has run)
    when the snapshot's name or version is not one."""
    req = f"{dist.display_name}=={dist.version}"
    why = requirement_problem(req)
    if why:
        raise InputError(
            f"{host}: refusing to hand an installer {req!r}: {why}; nothing was changed",
            tip="a snapshot or lock is data: check where this one came from",
        )
    return req


def plan_problems(plan: Plan) -> list[str]:
    """What makes a plan unsafe to apply: a requirement that is not `NAME==VERSION`, a
    distribution that is not a name (empty when there is nothing)."""
    problems = []
    for i, step in enumerate(plan.steps, 1):
        names: tuple[str, ...] = ()
        match step:
            case PinStep():
                for req in step.requirements:
                    why = requirement_problem(req)
                    if why:
                        problems.append(f"step {i} (pin) hands the installer {req!r}: {why}")
                names = step.dists
            case SyncDistStep():
                names = step.dists
            case SyncFileStep():
                names = (step.dist,)
            case FlagStep():
                why = flag_problem(step.flag, step.value)
                if why:
                    problems.append(f"step {i} (flag) sets {step.flag!r}: {why}")
            case _:
                assert_never(step)
        for name in names:
            why = name_problem(name)
            if why:
                problems.append(f"step {i} ({step.kind}) names the distribution {name!r}: {why}")
    return problems


# A service flag a plan may set: `--name`, never an interpreter, a program or a position of
# the command; its value a word (`none`, `triton`), never a path, a program or anything a
# shell or systemd substitutes (`$`, `%`, backquotes).
_FLAG = re.compile(r"^--[A-Za-z0-9][A-Za-z0-9_-]{0,80}$")
_FLAG_VALUE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:+-]{0,80}$")


def flag_problem(flag: str, value: str) -> str | None:
    """Why a plan may not set `flag` to `value` on the service (None: it may)."""
    if not _FLAG.match(flag):
        return "not a --flag (a plan sets launch flags only, never the program or its arguments)"
    if not _FLAG_VALUE.match(value):
        return f"the value {value!r} is not a plain word (no path, no program, no substitution)"
    return None


def flags_problems(plan: Plan, current: Mapping[str, str], known: Iterable[str]) -> list[str]:
    """What a saved plan's flags change that it may not: a flag the service's entrypoint
    does not define (`known`: the flags the rule packs choose backends by, and those of the
    service's command), or an entry of service.json that no step of the plan sets and that
    the target does not keep already."""
    defined = set(known)
    stepped = {s.flag: s.value for s in plan.steps if isinstance(s, FlagStep)}
    problems = []
    for flag, value in plan.flags.items():
        why = flag_problem(flag, value)
        if why is None and flag not in defined:
            why = "not a flag the service's entrypoint defines"
        if why is None and stepped.get(flag, current.get(flag)) != value:
            why = "service.json would change without a step of the plan that says so"
        if why:
            problems.append(f"its flags set {flag!r}: {why}")
    for flag in stepped:
        if flag not in defined:
            problems.append(f"a step sets {flag!r}: not a flag the service's entrypoint defines")
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


def _dependencies(
    name: str, reference: Snapshot, target: Snapshot, seen: set[str], held: list[str]
) -> list[Distribution]:
    """Reference distributions that `name` needs and the target lacks or has at another
    version, transitively: `--no-deps` brings none of them along by itself."""
    ref = reference.distribution(name)
    out: list[Distribution] = []
    for text in ref.requires if ref else ():
        try:
            req = Requirement(text)
        except InvalidRequirement:
            continue
        if applies(req, target) is False:
            continue  # an optional extra, another platform: not needed to import it there
        dep = canonicalize_name(req.name)
        if dep in seen:
            continue
        seen.add(dep)
        have_ref = reference.distribution(dep)
        have_tgt = target.distribution(dep)
        if have_ref is None or (have_tgt is not None and have_tgt.version == have_ref.version):
            continue
        if have_tgt is not None and have_tgt.custom_build:
            held.append(f"{dep}: {have_tgt.version} on the target is a custom build; not replaced")
            continue
        out.append(have_ref)
        out += _dependencies(dep, reference, target, seen, held)
    return out


def choose_installer(
    target: Snapshot, named: Installer | None = None
) -> tuple[Installer | Literal[""], str | None]:
    """("pip", None) or ("uv", its command) for installing on the target, or ("", why not).

    The inventory's `installer` wins; else the target's own pip, else uv on the host.
    A target whose tools are not known (an older snapshot) is taken to have pip.
    """
    tools = target.installers
    uv = tools.uv if tools is not None else None
    if named == "pip":
        return "pip", None
    if named == "uv":
        return "uv", uv or "uv"
    if tools is None or tools.pip is not None:
        return "pip", None
    if uv:
        return "uv", uv
    return "", "the target's Python has no pip, and uv is not on the host's PATH"


def _install_tip(target: Snapshot) -> str:
    python = (
        target.interpreter.executable
        if not isinstance(target.interpreter, Unavailable)
        else "<target python>"
    )
    return (
        f"install pip into the target (`{python} -m ensurepip`), or put uv on the host's "
        f'PATH and set installer = "uv" in hosts.{target.host}'
    )


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
    steps: list[Step] = []
    skipped: list[str] = []
    pinned: set[str] = set()
    files: dict[str, list[tuple[str, Finding]]] = {}
    flags: dict[str, FlagStep] = {}
    patch_sets = _patch_sets(report)
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
            case FlagFix(flag=flag) if flag in flags:
                flags[flag] = _merge(flags[flag], finding.subject)
            case FlagFix():
                flags[fix.flag] = _flag_step(fix, finding)
            case SyncFileFix() | SyncDistFix() if no_files is not None:
                skipped.append(
                    f"{finding.subject}: {fix.kind} needs the reference's files: {no_files}"
                )
            case SyncFileFix():
                files.setdefault(fix.dist, []).append((fix.path, finding))
            case PinFix() | SyncDistFix() if fix.dist not in pinned:
                step = _replace_dist(fix, finding, reference, target, pinned, skipped, installer)
                if step is not None:
                    steps.append(step)
            case PinFix() | SyncDistFix():
                pass  # its distribution is replaced by a step already planned
            case _:
                assert_never(fix)
    skipped += _left_below(below, files, only)
    for dist, items in sorted(files.items()):
        steps.append(_sync_files(dist, items, patch_sets.get(dist, []), only))
    steps += flags.values()
    new_flags = {s.flag: s.value for s in flags.values()}
    return Plan(
        reference=reference.host,
        target=target.host,
        target_fingerprint=plan_target(target),
        prefer=prefer,
        only=only,
        steps=tuple(steps),
        skipped=tuple(skipped),
        command=with_flags(command, new_flags),
        flags={**(target.service_flags or {}), **new_flags},
    )


def _flag_step(fix: FlagFix, finding: Finding) -> FlagStep:
    """The step that launches with the flag `fix` names, for `finding`."""
    return FlagStep(
        summary=f"launch with {fix.flag} {fix.value} (gives up: {fix.gives_up})",
        findings=(finding.subject,),
        flag=fix.flag,
        value=fix.value,
        gives_up=fix.gives_up,
    )


def _left_below(below: list[Finding], files: Mapping[str, object], only: Only) -> list[str]:
    """Why each finding below --only is left, but for those whose patch set moves anyway."""
    # A file of a patch set that another finding moves comes along (`_sync_files`).
    return [
        f"{finding.subject}: {finding.severity} (--only {only})"
        for finding in below
        if not any(isinstance(x, SyncFileFix) and x.dist in files for x in finding.fixes)
    ]


def _patch_sets(report: Report) -> dict[str, list[tuple[str, Finding]]]:
    """Each distribution's files that the report's findings would sync, with their finding."""
    # A watched package's differing files are one patch set: they move together.
    patch_sets: dict[str, list[tuple[str, Finding]]] = {}
    for finding in report.findings:
        for each in finding.fixes:
            if isinstance(each, SyncFileFix):
                patch_sets.setdefault(each.dist, []).append((each.path, finding))
    return patch_sets


def _sync_files(
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


def _replace_dist(
    fix: PinFix | SyncDistFix,
    finding: Finding,
    reference: Snapshot,
    target: Snapshot,
    pinned: set[str],
    skipped: list[str],
    installer: Installer | None,
) -> PinStep | SyncDistStep | None:
    """The step that replaces `fix.dist` (with the dependencies it needs) on the target:
    a pin with what the target can install with, else a copy from the reference; None
    (and why, in `skipped`) when envsync leaves it alone. PlanError when nothing can."""
    tgt = target.distribution(fix.dist)
    if isinstance(fix, PinFix) and tgt is not None and tgt.custom_build:
        # The finding's own subject may be replaced, but not a local build.
        skipped.append(
            f"{fix.dist}: {tgt.version} on the target is a custom build; "
            "envsync does not replace it (sync-dist or by hand)"
        )
        return None
    ref = reference.distribution(fix.dist)
    if ref is None:
        skipped.append(f"{fix.dist}: not on the reference")
        return None
    held: list[str] = []
    deps = _dependencies(fix.dist, reference, target, {fix.dist}, held)
    skipped += held
    group = [ref, *(d for d in deps if d.name not in pinned)]
    pinned.update(d.name for d in group)
    names = tuple(d.name for d in group)
    copying = f"copy {', '.join(f'{d.display_name} {d.version}' for d in group)} "
    if isinstance(fix, SyncDistFix):
        return SyncDistStep(
            summary=copying + "from the reference", findings=(finding.subject,), dists=names
        )
    how, uv = choose_installer(target, installer)
    why_not = why_files_cannot_serve(reference, target)
    if how:
        reqs = tuple(pin_of(d, reference.host) for d in group)
        extra = f" (with {', '.join(reqs[1:])}, which it needs)" if len(reqs) > 1 else ""
        tool = "pip install" if how == "pip" else "uv pip install"
        return PinStep(
            summary=f"pin {reqs[0]}{extra}: {tool} --no-deps, others held",
            findings=(finding.subject,),
            requirements=reqs,
            dists=names,
            fallback=why_not is None,
            no_fallback=why_not,
            installer=how,
        )
    # Nothing on the target can install: the reference's files can, if they fit.
    if why_not is not None:
        wanted_req = f"{group[0].display_name}=={group[0].version}"
        raise PlanError(
            f"{target.host}: cannot install {wanted_req}: "
            f"{uv}, and the reference's installed files cannot serve it "
            f"({why_not}); nothing was changed",
            tip=_install_tip(target),
        )
    return SyncDistStep(
        summary=copying + f"from the reference ({uv})", findings=(finding.subject,), dists=names
    )


def _merge(step: FlagStep, subject: str) -> FlagStep:
    return replace(step, findings=(*step.findings, subject))


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
        match step:
            case PinStep():
                tool = (
                    "python -m pip install"
                    if step.installer == "pip"
                    else "uv pip install --python <target python>"
                )
                lines.append(
                    f"     runs: {tool} --no-deps --constraint <every other package "
                    f"at its version> -- {' '.join(step.requirements)}"
                )
                if step.fallback:
                    lines.append(
                        "     if the target's index cannot serve it: copy the installed files "
                        "from the reference (same interpreter and platform)"
                    )
                elif step.no_fallback:
                    lines.append(
                        f"     no copy from the reference if pip cannot: {step.no_fallback}"
                    )
            case SyncDistStep():
                lines.append(
                    f"     replaces the installed files of {', '.join(step.dists)} (per RECORD)"
                )
            case SyncFileStep():
                shown = [*step.files[:5], *(f"remove {p}" for p in step.remove[:5])]
                lines.append(f"     files: {', '.join(shown)}")
            case FlagStep():
                lines.append(f"     gives up: {step.gives_up}")
            case _:
                assert_never(step)
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
