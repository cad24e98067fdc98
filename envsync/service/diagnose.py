"""What a crash the smoke test saw means: the finding of `diff REF HOST` it matches, and the
next command that fixes it. `crash_cause` is pure; `diagnose` collects both hosts and
compares them to find out."""

from __future__ import annotations

from dataclasses import dataclass, replace

from envsync.classify import failing_module, finding_for_error
from envsync.compare import diff
from envsync.findings import Finding, Fix, FlagFix, PinFix, Report
from envsync.inventory import HostSpec
from envsync.model import Snapshot
from envsync.session import Session
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


@dataclass(frozen=True, slots=True, kw_only=True)
class Diagnosis:
    """A crash's exception against `diff REF HOST`."""

    reference: str
    host: str
    frame: str | None  # the traceback's last frame, when the log had one
    import_error: bool  # False: not an import error, envsync has no finding for it
    cause: Cause | None = None  # None when not an import error
    # What collecting the hosts for it noted, kept to be shown after the crash itself.
    notes: tuple[str, ...] = ()
    against: str | None = None  # REF is the host's own state: "ct129@good, recorded …"


def diagnose(
    session: Session, spec: HostSpec, exception: str, frame: str | None
) -> Diagnosis | None:
    """The crash traced to a finding of `diff REF HOST` (REF: the inventory's reference;
    when there is none, or it is the host itself: the host's last good state), or None
    when there is nothing to trace it against."""
    ref = session.inventory.reference
    against = None
    if not ref or ref == spec.name:
        from envsync.history import good_state

        good = good_state(session, spec.name)
        if good is None:
            return None
        ref = f"{spec.name}@good"
        against = f"{ref}, recorded {good.when}"
    if failing_module(exception) is None:
        return Diagnosis(
            reference=ref, host=spec.name, frame=frame, import_error=False, against=against
        )
    notes: list[str] = []
    comparison = diff(replace(session, notes=notes.append), ref, spec.name)
    cause = crash_cause(exception, comparison.report, comparison.reference, comparison.snapshot)
    return Diagnosis(
        reference=ref,
        host=spec.name,
        frame=frame,
        import_error=True,
        cause=cause,
        notes=tuple(notes),
        against=against,
    )
