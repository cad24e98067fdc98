"""Compare a target with a reference: the service's startup on the target, and findings.

The orchestration behind `diff`, `check` and `repair` (the CLI prints; this module does
not). Imported only by those commands: deepdiff and the classifier are not light.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from envsync.classify import Startup, classify
from envsync.classify.rules import RulePack, active_roots, all_modules, packs_for
from envsync.collect import ProbeOptions
from envsync.collect.importcheck import check_imports
from envsync.command import effective_command, entrypoint, parse_flags
from envsync.diff import differences
from envsync.errors import InputError
from envsync.findings import Report
from envsync.inventory import HostSpec, Inventory, ServiceSpec
from envsync.model import ImportOutcome, Snapshot
from envsync.runner import Runner
from envsync.snapshot import HostSource, Source, resolve, service_of


@dataclass(frozen=True, slots=True)
class Target:
    name: str
    source: Source
    service: ServiceSpec | None  # the service this target runs
    entrypoint: str | None
    packs: tuple[RulePack, ...]
    options: ProbeOptions  # what the probe collects on it (with the startup graph)

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
    entry = entrypoint(service)
    target_packs = packs_for(entry, packs)
    if entry and isinstance(source, HostSource):
        watch = tuple(w.replace("-", "_") for w in source.spec.watch)
        options = replace(
            options,
            roots=all_modules(entry, target_packs),
            internal=tuple(dict.fromkeys((entry.partition(".")[0], *watch))),
        )
    return Target(
        name=name,
        source=source,
        service=service,
        entrypoint=entry,
        packs=target_packs,
        options=options,
    )


def startup(target: Target, snap: Snapshot) -> Startup:
    """The target's startup: the effective command (with the flags kept on the host)."""
    command = (
        effective_command(target.service, target.spec, snap.service_flags)
        if target.service is not None
        else ()
    )
    return Startup(entrypoint=target.entrypoint, command=command, packs=target.packs)


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
        roots = active_roots(run.entrypoint, run.packs, parse_flags(run.command))
        modules = [
            r.module
            for r in roots
            if graph is None
            or (r.module in graph.modules and graph.modules[r.module].kind != "missing")
        ]
        if modules:
            outcomes = check_imports(spec, runners(spec), modules, import_timeout)
    return classify(reference, snap, differences(reference, snap), run, outcomes)
