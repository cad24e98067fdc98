"""The pin step: install the reference's versions (and the dependencies they need) from the
target's own index, with the target's pip or uv, `--no-deps`, every other package held.

Its data, its check, its description, how it is applied (the installer's command line, its
fallback to the reference's files when the index cannot serve a version), what it backs up,
and the step a PinFix becomes: a pin with what the target can install with, else a copy of
the reference's files (sync-dist) when they fit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from envsync.errors import AgentError, ApplyError, InputError, PlanError
from envsync.hostside.shared import normalize
from envsync.model.environment import (
    Distribution,
    Snapshot,
    Unavailable,
    why_files_cannot_serve,
)
from envsync.model.findings import Finding, PinFix
from envsync.model.vocab import Installer
from envsync.repair.steps.context import BacksUp, StepContext
from envsync.repair.steps.dependencies import replaced_group
from envsync.repair.steps.names import names_problems, requirement_problem
from envsync.repair.steps.sync_dist import SyncDistStep, copy_step, sync_dists
from envsync.runner.agent import Agent

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


def make_step(
    fix: PinFix,
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
    if tgt is not None and tgt.custom_build:
        # The finding's own subject may be replaced, but not a local build.
        skipped.append(
            f"{fix.dist}: {tgt.version} on the target is a custom build; "
            "envsync does not replace it (sync-dist or by hand)"
        )
        return None
    group = replaced_group(fix.dist, reference, target, pinned, skipped)
    if group is None:
        return None
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
            dists=tuple(d.name for d in group),
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
    return copy_step(group, finding, f" ({uv})")


def problems(step: PinStep, i: int) -> list[str]:
    """What makes step `i` unsafe to apply: a requirement that is not `NAME==VERSION`, a
    distribution that is not a name."""
    out = []
    for req in step.requirements:
        why = requirement_problem(req)
        if why:
            out.append(f"step {i} (pin) hands the installer {req!r}: {why}")
    return out + names_problems(i, step.kind, step.dists)


def describe(step: PinStep) -> list[str]:
    """The lines `describe` prints under the step's summary and findings."""
    tool = (
        "python -m pip install"
        if step.installer == "pip"
        else "uv pip install --python <target python>"
    )
    lines = [
        f"     runs: {tool} --no-deps --constraint <every other package "
        f"at its version> -- {' '.join(step.requirements)}"
    ]
    if step.fallback:
        lines.append(
            "     if the target's index cannot serve it: copy the installed files "
            "from the reference (same interpreter and platform)"
        )
    elif step.no_fallback:
        lines.append(f"     no copy from the reference if pip cannot: {step.no_fallback}")
    return lines


def backs_up(step: PinStep, target: Snapshot) -> BacksUp:
    """The distributions it replaces or installs, whole."""
    return BacksUp(dists=step.dists)


def _constraints(target: Snapshot, replaced: Sequence[str]) -> str:
    """Every other installed distribution held at its current version (one that is not a
    plain NAME==VERSION is no line of it: a constraints file reads options too)."""
    lines = [
        f"{d.display_name}=={d.version}"
        for d in target.distributions
        if d.name not in replaced and requirement_problem(f"{d.display_name}=={d.version}") is None
    ]
    return "\n".join(lines) + "\n"


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


def apply(step: PinStep, ctx: StepContext) -> None:
    """Run the target's installer; copy the reference's files instead when the index cannot
    serve a version (and the step may), or when the installer would remove files another
    distribution's RECORD claims."""
    agent, target, backup, spec = ctx.agent, ctx.target, ctx.backup, ctx.agent.spec
    reference_spec, runners = ctx.reference_spec, ctx.runners
    names = {normalize(d) for d in step.dists}
    claims = [c.message for c in ctx.claims if c.dist in names]
    if claims:
        # pip's uninstall would remove another distribution's files: never run it
        if not (step.fallback and reference_spec is not None):
            raise ApplyError(f"refusing to run {step.installer}: {claims[0]}")
        source = Agent(reference_spec, runners(reference_spec))
        sync_dists(step.dists, agent, target, source, ctx.ident)
        return
    constraints = f"{backup}/constraints.txt"
    agent.write(constraints, _constraints(target, step.dists))
    argv = install_argv(step, target, spec.python, constraints, ctx.pip_options)
    # Through the agent, so that the target's lock knows the installer is running.
    try:
        result = agent.run(argv, ident=ctx.ident, timeout=PIP_TIMEOUT)
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
    sync_dists(step.dists, agent, target, source, ctx.ident)
