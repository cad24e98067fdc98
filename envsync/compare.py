"""Compare a target with a reference: the service's startup on the target, and findings.

The orchestration behind `diff`, `check` and `repair` (the CLI prints; this module does
not). Imported only by those commands: deepdiff and the classifier are not light.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from envsync.classify import Startup, classify
from envsync.classify.rules import (
    RulePack,
    all_modules,
    for_version,
    packs_for,
)
from envsync.collect import ProbeOptions
from envsync.collect.importcheck import check_imports
from envsync.diff import differences
from envsync.errors import InputError
from envsync.findings import Report
from envsync.inventory import HostSpec, Inventory, ServiceSpec
from envsync.launch import effective_command, entrypoint, parse_flags
from envsync.model import ImportOutcome, Snapshot
from envsync.runner import Runner
from envsync.snapshot import HostSource, Source, resolve, service_of


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
    import_check: bool = False,
    import_timeout: float,
) -> Report:
    run = startup(target, snap)
    outcomes: list[ImportOutcome] = []
    if import_check:
        spec = target.spec
        if spec is None or not run.entrypoint:
            raise InputError("--probe needs a live target host with a service entrypoint")
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
            outcomes = check_imports(spec, runners(spec), modules, import_timeout)
    return classify(reference, snap, differences(reference, snap), run, outcomes)
