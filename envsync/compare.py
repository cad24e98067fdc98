"""Compare targets with a reference: the service's startup on each target, and findings.

The stage behind `diff`, `check` and `repair`: `diff` (one target), `diff_fleet` (several,
collected in parallel) and `check` (hosts against a lock) collect and compare, and return
their reports (the CLI prints them; this module does not). Imported only by those
commands: deepdiff and the classifier are not light.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from envsync.classify import Startup, classify
from envsync.classify.rules import (
    RulePack,
    all_modules,
    for_version,
    load_packs,
    packs_for,
)
from envsync.collect import ProbeOptions
from envsync.collect.importcheck import NO_IMPORT_CHECK, ImportCheck, check_imports
from envsync.diff import differences
from envsync.documents import check_writable
from envsync.errors import CollectError, InputError, SnapshotError
from envsync.findings import Finding, Report
from envsync.inventory import HostSpec, Inventory, ServiceSpec
from envsync.launch import effective_command, entrypoint, parse_flags
from envsync.model import ImportOutcome, Snapshot
from envsync.runner import Runner
from envsync.session import Request, Session
from envsync.snapshot import HostSource, Source, StateSource, resolve, service_of
from envsync.states import split_name
from envsync.vocab import SEVERITY_RANK, Severity


@dataclass(frozen=True, slots=True)
class Target:
    name: str
    source: Source
    service: ServiceSpec | None  # the service this target runs
    entrypoint: str | None  # a module, or a launch root the probe resolves (console:, script:)
    packs: tuple[RulePack, ...]
    options: ProbeOptions  # what the probe collects on it (with the startup graph)
    launcher: tuple[str, ...] = ()  # roots the launch command runs before the entrypoint
    shown: str | None = None  # how the entrypoint reads in a report
    unreadable: str | None = None  # why envsync cannot tell what the command starts

    @property
    def spec(self) -> HostSpec | None:
        return self.source.spec if isinstance(self.source, HostSource) else None


def prepare(
    name: str,
    inventory: Inventory,
    packs: tuple[RulePack, ...],
    options: ProbeOptions,
) -> Target:
    """What to collect on a target: its startup graph from every module rules may run."""
    source = resolve(name, inventory)
    service = service_of(source, inventory)
    entry = entrypoint(service, packs)
    target_packs = packs_for(entry.root, packs)
    if entry.root and isinstance(source, HostSource):
        watch = tuple(w.replace("-", "_") for w in source.spec.watch)
        tops = [r.partition(".")[0] for r in (*entry.launcher, entry.root) if ":" not in r]
        options = replace(
            options,
            roots=all_modules(entry.root, target_packs, entry.launcher),
            internal=tuple(dict.fromkeys((*tops, *watch))),
            workdir=service.workdir if service else None,
            isolated=entry.isolated,
        )
    return Target(
        name=name,
        source=source,
        service=service,
        entrypoint=entry.root,
        packs=target_packs,
        options=options,
        launcher=entry.launcher,
        shown=entry.shown,
        unreadable=entry.unreadable,
    )


def startup(target: Target, snap: Snapshot) -> Startup:
    """The target's startup: the effective command (with the flags kept on the host), and
    its launch roots as they resolved on the target."""
    command = (
        effective_command(target.service, target.spec, snap.service_flags)
        if target.service is not None
        else ()
    )
    resolved = snap.startup.resolved if snap.startup is not None else {}
    entry = target.entrypoint
    if entry is not None and ":" in entry:
        entry = resolved.get(entry, entry).partition(":")[0] if entry in resolved else entry
    launcher = tuple(resolved[r].partition(":")[0] if r in resolved else r for r in target.launcher)
    return Startup(
        entrypoint=entry,
        command=command,
        # a flag's default as the target's version of the package has it
        packs=for_version(target.packs, {d.name: d.version for d in snap.distributions}),
        launcher=tuple(r for r in launcher if ":" not in r),
        shown=target.shown,
        unreadable=target.unreadable,
        unresolved=tuple(
            r for r in (target.entrypoint, *target.launcher) if r and ":" in r and r not in resolved
        ),
    )


def compare(
    reference: Snapshot,
    target: Target,
    snap: Snapshot,
    *,
    runners: Callable[[HostSpec], Runner],
    import_check: ImportCheck = NO_IMPORT_CHECK,
) -> Report:
    run = startup(target, snap)
    outcomes: list[ImportOutcome] = []
    if import_check.run:
        spec = target.spec
        if spec is None or not run.entrypoint:
            raise InputError("--import-check needs a live target host with a service entrypoint")
        graph = snap.startup
        modules = [
            r.module
            for r in run.roots(parse_flags(run.command))
            # running a script would start the service itself: its imports are read statically
            if r.module != "__main__"
            and (
                graph is None
                or (r.module in graph.modules and graph.modules[r.module].kind != "missing")
            )
        ]
        if modules:
            outcomes = check_imports(spec, runners(spec), modules, import_check.timeout)
    report = classify(reference, snap, differences(reference, snap), run, outcomes)
    if reference.source == "state":  # the target's own past: what arrived since, and when
        from envsync.history import since_notes

        report = replace(report, notes=(*report.notes, *since_notes(reference, snap)))
    return report


# ---------------------------------------------------------------------------------------
# The stages: collect and compare


@dataclass(frozen=True, slots=True, kw_only=True)
class Comparison:
    """One target compared with the reference: both snapshots, and the report."""

    target: Target
    reference: Snapshot
    snapshot: Snapshot  # the target's
    report: Report


@dataclass(frozen=True, slots=True, kw_only=True)
class FleetComparison:
    """Several targets against one reference (or a lock)."""

    reports: tuple[Report, ...]  # in the order the targets were named
    failures: tuple[CollectError, ...] = ()  # the targets that could not be collected

    @property
    def drift(self) -> bool:
        return any(r.findings for r in self.reports)


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckResult(FleetComparison):
    """`check`: the hosts against a lock, and the findings that fail the gate."""

    fail_on: Severity
    blocking: tuple[Finding, ...] = ()  # findings at or above fail_on


def pair_names(
    inventory: Inventory, reference: str | None, target: str | None, command: str
) -> tuple[str, str]:
    """REF and TGT as named, else the inventory's defaults; InputError without them."""
    ref = reference or inventory.reference
    tgt = target or inventory.target
    if not ref or not tgt:
        raise InputError(
            f"{command}: name REF and TGT, or set defaults.reference and defaults.target "
            "in the inventory"
        )
    return ref, tgt


def targets(session: Session, names: Sequence[str]) -> list[Target]:
    """What to collect on each of these targets (the rule packs read once)."""
    packs = load_packs(session.inventory.rules)
    return [prepare(n, session.inventory, packs, session.probe) for n in names]


def _reference_request(session: Session, ref_name: str, among: Sequence[Target]) -> Request:
    """The reference, collected with the targets' startup roots too: an import that fails
    on a target is read on the reference as well, so a fatal finding says it works there."""
    rooted = [t.options for t in among if t.options.roots]
    if not rooted or not isinstance(resolve(ref_name, session.inventory), HostSource):
        return ref_name, None
    (own,) = targets(session, [ref_name])
    base = own.options if own.options.roots else rooted[0]
    every = [base, *rooted]
    return ref_name, replace(
        base,
        roots=tuple(dict.fromkeys(r for o in every for r in o.roots)),
        internal=tuple(dict.fromkeys(i for o in every for i in o.internal)),
        lazy_graph=True,
    )


def _compare_each(
    session: Session,
    among: Sequence[Target],
    *,
    reference: Snapshot | Request,
    import_check: ImportCheck,
) -> FleetComparison:
    """Collect the targets (and the reference, when it is a request) in parallel and
    compare each target as it arrives, keeping only its report (targets that answer
    before the reference wait for it). A reference that cannot be collected is raised."""
    requests: list[Request] = [(t.name, t.options) for t in among]
    ref: Snapshot | None = None
    if isinstance(reference, Snapshot):
        ref, first = reference, 0  # first: the index of the first target among the requests
    else:
        requests.insert(0, reference)
        first = 1
    waiting: dict[int, Snapshot] = {}
    done: dict[int, Report] = {}
    failures: dict[int, CollectError] = {}
    for i, result in session.collect_each(requests):
        if i < first:
            if isinstance(result, CollectError):
                raise result
            ref = result
        elif isinstance(result, CollectError):
            failures[i - first] = result
        else:
            waiting[i - first] = result
        del result
        if ref is not None:
            for j in list(waiting):
                snap = waiting.pop(j)
                done[j] = compare(
                    ref, among[j], snap, runners=session.runners, import_check=import_check
                )
    return FleetComparison(
        reports=tuple(done[j] for j in sorted(done)),
        failures=tuple(failures[j] for j in sorted(failures)),
    )


def _writable(outputs: Sequence[str | Path]) -> None:
    """Fail before a long collection when an output can never be written."""
    for path in outputs:
        if path:
            check_writable(Path(path))


def diff(
    session: Session,
    reference: str | None = None,
    target: str | None = None,
    *,
    import_check: ImportCheck = NO_IMPORT_CHECK,
    outputs: Sequence[str | Path] = (),
    command: str = "diff",
) -> Comparison:
    """Collect the reference and the target together and compare them (the inventory's
    defaults.reference and defaults.target when not named). `outputs`: files the caller
    will write, checked before anything is collected."""
    ref_name, tgt_name = pair_names(session.inventory, reference, target, command)
    _writable(outputs)
    resolve(ref_name, session.inventory)  # both names are checked before anything is collected
    (tgt,) = targets(session, [tgt_name])
    ref, snap = session.collect_all(
        [_reference_request(session, ref_name, [tgt]), (tgt_name, tgt.options)]
    )
    report = compare(ref, tgt, snap, runners=session.runners, import_check=import_check)
    return Comparison(target=tgt, reference=ref, snapshot=snap, report=report)


def diff_fleet(
    session: Session,
    reference: str,
    names: Sequence[str],
    *,
    import_check: ImportCheck = NO_IMPORT_CHECK,
    outputs: Sequence[str | Path] = (),
) -> FleetComparison:
    """`diff REF HOST...`: every target collected in parallel, compared as it arrives."""
    _writable(outputs)
    resolve(reference, session.inventory)  # every name is checked before anything is collected
    among = targets(session, names)
    return _compare_each(
        session,
        among,
        reference=_reference_request(session, reference, among),
        import_check=import_check,
    )


def _names_state(session: Session, lock: str) -> bool:
    """`check --lock HOST@good`: a host's recorded state in place of a lock file."""
    if Path(lock).is_file() or split_name(lock) is None:
        return False
    try:
        return isinstance(session.resolve(lock), StateSource)
    except SnapshotError:  # a file's name (env@2.lock) that is not there: said as such
        return False


def check(
    session: Session,
    lock: str | Path,
    hosts: Sequence[str] = (),
    *,
    fail_on: Severity,
    import_check: ImportCheck = NO_IMPORT_CHECK,
    outputs: Sequence[str | Path] = (),
) -> CheckResult:
    """The CI gate: each host (default: defaults.target) against a lock; the findings at
    or above `fail_on` block."""
    from envsync.lock import read_lock

    names = list(hosts) or ([session.inventory.target] if session.inventory.target else [])
    if not names:
        raise InputError("check: name the HOSTs to check, or set defaults.target in the inventory")
    _writable(outputs)
    if _names_state(session, str(lock)):
        reference = session.collect_one(str(lock))  # a recorded state: HOST@good
    elif not Path(lock).is_file():
        raise InputError(
            f"{lock}: no such lock file", tip="create one with `envsync lock HOST > env.lock`"
        )
    else:
        reference = read_lock(Path(lock))
    fleet = _compare_each(
        session, targets(session, names), reference=reference, import_check=import_check
    )
    threshold = SEVERITY_RANK[fail_on]
    return CheckResult(
        reports=fleet.reports,
        failures=fleet.failures,
        fail_on=fail_on,
        blocking=tuple(
            f for r in fleet.reports for f in r.findings if SEVERITY_RANK[f.severity] <= threshold
        ),
    )
