"""The flag step: keep a launch flag for the service on the target (its effective command),
a workaround that gives something up instead of changing a package.

Its data, its check (a `--flag` and a plain word, nothing a shell or systemd substitutes),
its description, how it is applied (service.json gets the plan's flags), what it backs up
(nothing more: every backup records the service's flags) and the step a FlagFix becomes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Literal

from envsync.model.environment import Snapshot
from envsync.model.findings import Finding, FlagFix
from envsync.repair.steps.context import BacksUp, StepContext


@dataclass(frozen=True, slots=True, kw_only=True)
class FlagStep:
    """Keep a launch flag for the service on the target (its effective command)."""

    kind: Literal["flag"] = "flag"
    summary: str
    findings: tuple[str, ...]
    flag: str
    value: str
    gives_up: str


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


def make_step(fix: FlagFix, finding: Finding) -> FlagStep:
    """The step that launches with the flag `fix` names, for `finding`."""
    return FlagStep(
        summary=f"launch with {fix.flag} {fix.value} (gives up: {fix.gives_up})",
        findings=(finding.subject,),
        flag=fix.flag,
        value=fix.value,
        gives_up=fix.gives_up,
    )


def merge(step: FlagStep, subject: str) -> FlagStep:
    """The same flag's step, addressing one more finding."""
    return replace(step, findings=(*step.findings, subject))


def problems(step: FlagStep, i: int) -> list[str]:
    """What makes step `i` unsafe to apply: a flag or value a plan may not set."""
    why = flag_problem(step.flag, step.value)
    return [f"step {i} (flag) sets {step.flag!r}: {why}"] if why else []


def describe(step: FlagStep) -> list[str]:
    """The lines `describe` prints under the step's summary and findings."""
    return [f"     gives up: {step.gives_up}"]


def backs_up(step: FlagStep, target: Snapshot) -> BacksUp:
    """No distribution, no file: every backup records the service's flags already."""
    return BacksUp()


def apply(step: FlagStep, ctx: StepContext) -> None:
    """Keep the plan's flags (every step's, and those the target keeps) in service.json."""
    ctx.agent.set_flags(ctx.flags)
