"""What a crash the smoke test saw means: the finding of `diff REF HOST` it matches, and the
next command that fixes it. `crash_cause` is pure; `diagnose` collects both hosts and
compares them to find out."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from envsync.classify import blame, failing_module, raised_chain
from envsync.compare.targets import diff
from envsync.model.environment import Raised, Snapshot
from envsync.model.findings import Finding, Fix, FlagFix, PinFix, Report
from envsync.model.inventory import HostSpec
from envsync.model.vocab import FixKind, Prefer
from envsync.sources.session import Session

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
    how: str = ""  # a finding: how the exception was traced to it (a message, a frame)


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


def crash_cause(
    exception: str,
    report: Report,
    reference: Snapshot,
    target: Snapshot,
    raised: Sequence[Raised] = (),
) -> Cause:
    """The finding a crash's exception comes from, whatever its type: the modules its
    messages name, else the code that raised it (`raised`: the traceback's chain, as the
    log printed it; without it, only the exception's line is read)."""
    module = failing_module(exception)
    chain = list(raised) or raised_chain(exception)
    found = blame(report.findings, chain, reference, target)
    if found is None:
        return Cause(module=module, finding=None, why_not=_not_drift(module, reference, target))
    finding = report.findings[found.index]
    fixes = tuple(
        (
            fix,
            f"envsync repair {report.reference} {report.target} "
            f"--prefer {_PREFER_FOR[fix.kind]} --apply",
        )
        for fix in finding.fixes
        if isinstance(fix, PinFix | FlagFix)
    )
    return Cause(module=module, finding=finding, fixes=fixes, how=found.how)


@dataclass(frozen=True, slots=True, kw_only=True)
class Diagnosis:
    """A crash's exception against `diff REF HOST`."""

    reference: str
    host: str
    frame: str | None  # the traceback's last frame, when the log had one
    cause: Cause
    # What collecting the hosts for it noted, kept to be shown after the crash itself.
    notes: tuple[str, ...] = ()
    against: str | None = None  # REF is the host's own state: "ct129@good, recorded …"


def diagnose(
    session: Session,
    spec: HostSpec,
    exception: str,
    frame: str | None,
    raised: Sequence[Raised] = (),
) -> Diagnosis | None:
    """The crash traced to a finding of `diff REF HOST` (REF: the inventory's reference;
    when there is none, or it is the host itself: the host's last good state), or None
    when there is nothing to trace it against. Any exception: an ImportError, a
    ValueError from a registry, a RuntimeError from an operator registration, an OSError
    from the loader (`raised`: its traceback's chain)."""
    ref = session.inventory.reference
    against = None
    if not ref or ref == spec.name:
        from envsync.sources.history import good_state

        good = good_state(session, spec.name)
        if good is None:
            return None
        ref = f"{spec.name}@good"
        against = f"{ref}, recorded {good.when}"
    notes: list[str] = []
    comparison = diff(replace(session, notes=notes.append), ref, spec.name)
    cause = crash_cause(
        exception, comparison.report, comparison.reference, comparison.snapshot, raised
    )
    return Diagnosis(
        reference=ref,
        host=spec.name,
        frame=frame,
        cause=cause,
        notes=tuple(notes),
        against=against,
    )
