"""What a crash the smoke test saw means: the finding of `diff` it matches, and the next
command that fixes it (pure: the CLI collects, compares and prints)."""

from __future__ import annotations

from dataclasses import dataclass

from envsync.classify import failing_module, finding_for_error
from envsync.findings import Finding, Fix, FlagFix, PinFix, Report
from envsync.model import Snapshot
from envsync.vocab import FixKind, Prefer

# The repair that carries out a fix of this kind.
_PREFER_FOR: dict[FixKind, Prefer] = {
    "pin": "fix",
    "sync-dist": "fix",
    "sync-file": "fix",
    "flag": "workaround",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class Cause:
    """The crash's exception traced to a finding, and what to run next."""

    module: str | None  # the top-level module the exception is about, if it names one
    finding: Finding | None
    fixes: tuple[tuple[Fix, str], ...] = ()  # each fix with the command that applies it
    why_not: str = ""  # no finding: why the crash is not drift


def _not_drift(module: str | None, reference: Snapshot, target: Snapshot) -> str:
    owner = next((d for d in target.distributions if module and module in d.top_level), None)
    if owner is not None:
        theirs = reference.distribution(owner.name)
        if theirs is not None and theirs.version == owner.version:
            return (
                f"{owner.display_name} {owner.version} on both hosts: no difference from "
                f"{reference.host} explains it ({reference.host} may fail the same way)"
            )
    if module and owner is None and not any(module in d.top_level for d in reference.distributions):
        return f"no distribution provides {module} on either host: not a difference"
    return f"no difference from {reference.host} explains it"


def crash_cause(exception: str, report: Report, reference: Snapshot, target: Snapshot) -> Cause:
    module = failing_module(exception)
    i = finding_for_error(report.findings, exception, reference, target)
    if i is None:
        return Cause(module=module, finding=None, why_not=_not_drift(module, reference, target))
    finding = report.findings[i]
    fixes = tuple(
        (
            fix,
            f"envsync repair {report.reference} {report.target} "
            f"--prefer {_PREFER_FOR[fix.kind]} --apply",
        )
        for fix in finding.fixes
        if isinstance(fix, PinFix | FlagFix)
    )
    return Cause(module=module, finding=finding, fixes=fixes)
