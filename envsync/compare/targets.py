"""Compare targets with a reference: the service's startup on each target, and findings.

The stage behind `diff`, `check` and `repair`: `diff` (one target), `diff_fleet` (several,
collected in parallel) and `check` (hosts against a lock) collect and compare, and return
their reports (the CLI prints them; this module does not). Imported only by those
commands: deepdiff and the classifier are not light.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

from envsync.classify.launched import Startup, entrypoint, script_rule
from envsync.classify.launched import questions as native_questions
from envsync.classify.rules import (
    RulePack,
    all_modules,
    for_version,
    load_packs,
    packs_for,
)
from envsync.collect import ModelQuery, ProbeOptions
from envsync.collect.identity import host_class
from envsync.collect.importcheck import NO_IMPORT_CHECK, ImportCheck, check_imports
from envsync.collect.native import Providers, reference_providers
from envsync.compare import verdicts
from envsync.compare.calls import asked_calls
from envsync.compare.classes import HostClass, fold_reports
from envsync.compare.gate import NodeFacts, node_facts, server_report
from envsync.documents import check_writable
from envsync.errors import CollectError, InputError, SnapshotError
from envsync.hostside.shared import LOADER_ENV
from envsync.model.changes import differences
from envsync.model.environment import ImportOutcome, Snapshot, Unavailable
from envsync.model.findings import Finding, Report
from envsync.model.inventory import HostSpec, Inventory, ServiceSpec
from envsync.model.launch import effective_command, launch_of, parse_flags
from envsync.model.vocab import SEVERITY_RANK, Severity
from envsync.runner import Runner
from envsync.sources.session import HostArg, Request, Session
from envsync.sources.source import HostSource, Source, StateSource, service_of
from envsync.sources.states import split_name

_Arg = TypeVar("_Arg", bound=HostArg)  # a HOST argument as written, or its source


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
    source: Source,
    inventory: Inventory,
    packs: tuple[RulePack, ...],
    options: ProbeOptions,
) -> Target:
    """What to collect on a target: its startup graph from every module rules may run."""
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
            model=model_query(service, source.spec, target_packs),
            loader_env=tuple(
                (k, v) for k, v in (service.env if service else {}).items() if k in LOADER_ENV
            ),
            main=entry.root if entry.as_main else None,
        )
    return Target(
        name=source.label,
        source=source,
        service=service,
        entrypoint=entry.root,
        packs=target_packs,
        options=options,
        launcher=entry.launcher,
        shown=entry.shown,
        unreadable=entry.unreadable,
    )


# The service's variables that say where the Hugging Face cache is.
_HF_VARIABLES = ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME")


def model_query(
    service: ServiceSpec | None, spec: HostSpec, packs: Sequence[RulePack]
) -> ModelQuery | None:
    """What the probe reads of the served model: only when a rule pack imports model
    modules by the model's architectures. The model is the command's first flag of the
    packs' `model_flags`, else a console script's model argument (`vllm serve MODEL`)."""
    registries = tuple(
        (item.module, item.registry) for p in packs for item in p.startup if item.selected_by
    )
    if not registries or service is None:
        return None
    command = effective_command(service, spec, None)
    flags = parse_flags(command)
    model = next((flags[f] for p in packs for f in p.model_flags if f in flags), None)
    launch = launch_of(command)
    rule = (
        script_rule(launch.target, launch.args, packs)
        if launch.shape == "console" and launch.target
        else None
    )
    if model is None and rule is not None and rule.model_argument:
        words = [a for a in launch.args if not a.startswith("-")]
        after = words[1:] if rule.subcommand and words and words[0] == rule.subcommand else words
        model = after[0] if after else None
    env = {k: v for k, v in service.env.items() if k in _HF_VARIABLES}
    return ModelQuery(model=model, revision=flags.get("--revision"), env=env, registries=registries)


def _model_note(run: Startup, snap: Snapshot) -> str | None:
    """Why the served model's modules cannot be told apart on the target, when it matters."""
    if not isinstance(snap.model, Unavailable):
        return None
    if not any(item.selected_by for p in run.packs for item in p.startup):
        return None
    return (
        f"{snap.host}: {snap.model.reason}: envsync cannot tell which model module serves "
        "the model, so a failing model module is judged as the model registry imports "
        "every one of them"
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
        model=snap.model,
        env=tuple(
            sorted(
                name
                for name, value in {
                    **snap.env,
                    **(target.service.env if target.service else {}),
                }.items()
                if value
            )
        ),
    )


def classify(*args: Any) -> Report:
    """The classifier, imported when a verdict is not kept (it is most of envsync's import
    time)."""
    from envsync.classify import classify as run

    return run(*args)


def compare(
    reference: Snapshot,
    target: Target,
    snap: Snapshot,
    *,
    runners: Callable[[HostSpec], Runner],
    import_check: ImportCheck = NO_IMPORT_CHECK,
    reference_host: HostSpec | None = None,
) -> Report:
    """The target's findings against the reference. With the import check, the startup
    modules are imported on the target, and when one fails, the same modules up to it on
    the reference (`reference_host`: a live reference), so that a failure both share is
    not put down to a difference; the live reference is also asked which of its files
    define the symbols the target's native loads miss."""
    run = startup(target, snap)
    outcomes: list[ImportOutcome] = []
    theirs: list[ImportOutcome] | None = None
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
        failed = [o.module for o in outcomes if not o.ok]
        if failed and reference_host is not None:
            upto = modules[: modules.index(failed[0]) + 1]
            theirs = check_imports(
                reference_host, runners(reference_host), upto, import_check.timeout
            )
    providers: Providers = {}
    asked = native_questions(reference, snap)
    if asked and reference_host is not None:
        providers = reference_providers(reference_host, runners(reference_host), reference, asked)
    # without an import check (a live run), the same inputs give the report they gave:
    # the calls made at import asked about too (the host's answer reads the files whose
    # digests the snapshot holds), so a kept report asks nothing
    kept = not outcomes and theirs is None and target.options.cache_dir != ""

    def verdict() -> tuple[Report, bool]:
        called, answered, index = asked_calls(
            target.spec, target.options, snap, reference, run, runners
        )
        diffs = differences(reference, called)
        found = classify(reference, called, diffs, run, outcomes, theirs, providers, index)
        return found, answered

    report = verdicts.once((reference, snap, run, providers) if kept else None, verdict)
    notes = list(report.notes)
    if reference.source == "state":  # the target's own past: what arrived since, and when
        from envsync.sources.history import since_notes

        notes += since_notes(reference, snap)
    note = _model_note(run, snap)
    if note:
        notes.append(note)
    return replace(report, notes=tuple(notes))


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
    unreachable: tuple[str, ...] = ()  # their names
    # The targets folded into classes (one environment and service each), each diffed once.
    classes: tuple[HostClass, ...] = ()
    # Kept only when asked (a canary rollout plans from them): the reference's snapshot,
    # and the first snapshot of each class, by its key.
    reference_snapshot: Snapshot | None = None
    samples: Mapping[str, Snapshot] = field(default_factory=dict)

    @property
    def drift(self) -> bool:
        return any(r.findings for r in self.reports)


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckResult(FleetComparison):
    """`check`: the hosts against a lock, and the findings that fail the gate."""

    fail_on: Severity
    blocking: tuple[Finding, ...] = ()  # findings at or above fail_on
    # The gates of the multi-node servers among the hosts (gate.py): their nodes against
    # one another.
    servers: tuple[Report, ...] = ()


def pair_names(
    inventory: Inventory, reference: _Arg | None, target: _Arg | None, command: str
) -> tuple[_Arg | str, _Arg | str]:
    """REF and TGT as named, else the inventory's defaults; InputError without them."""
    ref = reference or inventory.reference
    tgt = target or inventory.target
    if not ref or not tgt:
        raise InputError(
            f"{command}: name REF and TGT, or set defaults.reference and defaults.target "
            "in the inventory"
        )
    return ref, tgt


def targets(session: Session, names: Sequence[HostArg]) -> list[Target]:
    """What to collect on each of these targets (the rule packs read once)."""
    packs = load_packs(session.inventory.rules)
    return [prepare(session.resolve(n), session.inventory, packs, session.probe) for n in names]


def _reference_request(session: Session, ref_name: HostArg, among: Sequence[Target]) -> Request:
    """The reference, collected with the targets' startup roots too: an import that fails
    on a target is read on the reference as well, so a fatal finding says it works there."""
    rooted = [t.options for t in among if t.options.roots]
    if not rooted or not isinstance(session.resolve(ref_name), HostSource):
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


def class_key(target: Target, snap: Snapshot) -> str:
    """What makes two targets one class: the environment's digest, and the service it runs
    (a host's own service overrides make its startup another)."""
    # The command as written, not as run: a host's own port and interpreter path do not
    # make its startup another.
    service = target.service
    shape = [list(service.command), service.workdir] if service else []
    return host_class(
        snap, [shape, target.entrypoint, target.launcher, target.shown, target.unreadable]
    )


def _compare_each(
    session: Session,
    among: Sequence[Target],
    *,
    reference: Snapshot | Request,
    import_check: ImportCheck,
    on_snapshot: Callable[[int, Snapshot], None] | None = None,
    samples: bool = False,
) -> FleetComparison:
    """Collect the targets (and the reference, when it is a request) in parallel and
    compare each target as it arrives, keeping only its report (targets that answer
    before the reference wait for it); a target of a class already compared takes that
    report (classes.py). A reference that cannot be collected is raised. `on_snapshot`
    sees each target's snapshot before it is let go."""
    requests: list[Request] = [(t.source, t.options) for t in among]
    ref: Snapshot | None = None
    ref_host: HostSpec | None = None
    if isinstance(reference, Snapshot):
        ref, first = reference, 0  # first: the index of the first target among the requests
    else:
        requests.insert(0, reference)
        first = 1
        ref_host = _live(session, reference[0])
    waiting: dict[int, Snapshot] = {}
    done: dict[int, Report] = {}
    failures: dict[int, CollectError] = {}
    keys: dict[int, str] = {}
    first_of: dict[str, Report] = {}  # a class's key -> the report of its first host
    kept: dict[str, Snapshot] = {}
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
                if on_snapshot is not None:
                    on_snapshot(j, snap)
                keys[j] = key = class_key(among[j], snap)
                known = first_of.get(key)
                if known is None:
                    known = first_of[key] = compare(
                        ref,
                        among[j],
                        snap,
                        runners=session.runners,
                        import_check=import_check,
                        reference_host=ref_host,
                    )
                    if samples:
                        kept[key] = snap
                elif known.target != snap.host:
                    command = startup(among[j], snap).command  # the host's own port, python
                    known = replace(known, target=snap.host, command=command)
                done[j] = known
                del snap
    order = sorted(done)
    reports = tuple(done[j] for j in order)
    return FleetComparison(
        reports=reports,
        failures=tuple(failures[j] for j in sorted(failures)),
        unreachable=tuple(among[j].name for j in sorted(failures)),
        classes=fold_reports(reports, [keys[j] for j in order]),
        reference_snapshot=ref if samples else None,
        samples=kept,
    )


def _live(session: Session, name: HostArg) -> HostSpec | None:
    """The reference's host, when it is one (not a snapshot, lock or requirements file)."""
    source = session.resolve(name)
    return source.spec if isinstance(source, HostSource) else None


def _writable(outputs: Sequence[str | Path]) -> None:
    """Fail before a long collection when an output can never be written."""
    for path in outputs:
        if path:
            check_writable(Path(path))


def diff(
    session: Session,
    reference: HostArg | None = None,
    target: HostArg | None = None,
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
    session.resolve(ref_name)  # both names are checked before anything is collected
    (tgt,) = targets(session, [tgt_name])
    ref, snap = session.collect_all(
        [_reference_request(session, ref_name, [tgt]), (tgt.source, tgt.options)]
    )
    report = compare(
        ref,
        tgt,
        snap,
        runners=session.runners,
        import_check=import_check,
        reference_host=_live(session, ref_name),
    )
    return Comparison(target=tgt, reference=ref, snapshot=snap, report=report)


def diff_fleet(
    session: Session,
    reference: str,
    names: Sequence[str],
    *,
    import_check: ImportCheck = NO_IMPORT_CHECK,
    outputs: Sequence[str | Path] = (),
    samples: bool = False,
) -> FleetComparison:
    """`diff REF HOST...`: every target collected in parallel, compared as it arrives
    (HOSTs may be groups and node sets: Session.select). `samples`: keep the reference's
    snapshot and each class's first."""
    _writable(outputs)
    session.resolve(reference)  # every name is checked before anything is collected
    among = targets(session, session.select(names))
    return _compare_each(
        session,
        among,
        reference=_reference_request(session, reference, among),
        import_check=import_check,
        samples=samples,
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
    from envsync.sources.locks.lockfile import read_lock

    default = [session.inventory.target] if session.inventory.target else []
    names = session.select(hosts or default)
    if not names:
        raise InputError("check: name the HOSTs to check, or set defaults.target in the inventory")
    _writable(outputs)
    if _names_state(session, str(lock)):
        reference = session.collect_one(str(lock))  # a recorded state: HOST@good
    elif not Path(lock).is_file():
        from envsync.documents import not_found

        raise InputError(
            not_found(Path(lock), "lock file"),
            tip="create one with `envsync lock HOST > env.lock`",
        )
    else:
        reference = read_lock(Path(lock))
    among = targets(session, names)
    named = {source.label for source in names}
    servers = [g for g in session.inventory.servers() if len(set(g.hosts) & named) > 1]
    members = {h for g in servers for h in g.hosts}
    nodes: dict[str, NodeFacts] = {}

    def keep(j: int, snap: Snapshot) -> None:
        if among[j].name in members:
            nodes[among[j].name] = node_facts(among[j].name, snap)

    fleet = _compare_each(
        session, among, reference=reference, import_check=import_check, on_snapshot=keep
    )
    gates = tuple(server_report(g.name, [nodes[h] for h in g.hosts if h in nodes]) for g in servers)
    threshold = SEVERITY_RANK[fail_on]
    return CheckResult(
        reports=fleet.reports,
        failures=fleet.failures,
        unreachable=fleet.unreachable,
        classes=fleet.classes,
        fail_on=fail_on,
        blocking=tuple(
            f
            for r in (*fleet.reports, *gates)
            for f in r.findings
            if SEVERITY_RANK[f.severity] <= threshold
        ),
        servers=gates,
    )
