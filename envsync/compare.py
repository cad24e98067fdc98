"""Compare a target with a reference: startup of the service, graph options, findings.

The orchestration behind `diff` and `check` (the CLI prints; this module does not).
Imported only by those commands: deepdiff and the classifier are not light.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

from envsync.classify import ProbeOutcome, Startup, classify
from envsync.classify.importcheck import import_probe
from envsync.classify.rules import (
    RulePack,
    active_roots,
    all_modules,
    entrypoint_of,
    packs_for,
    parse_flags,
    with_flag,
)
from envsync.collect import ProbeOptions
from envsync.diff import differences
from envsync.errors import InputError
from envsync.findings import Report
from envsync.inventory import HostSpec, Inventory
from envsync.model import Snapshot
from envsync.runner import Runner
from envsync.snapshot import HostSource, Source, resolve


@dataclass(frozen=True, slots=True)
class Target:
    name: str
    source: Source
    startup: Startup
    options: ProbeOptions  # what the probe collects on it (with the startup graph)


def startup_for(source: Source, inventory: Inventory, packs: tuple[RulePack, ...]) -> Startup:
    """The service's command and entrypoint on this host, and the rule packs for it."""
    service = source.spec.service if isinstance(source, HostSource) else inventory.service
    command = tuple(service.command) if service else ()
    entrypoint = (service.entrypoint or entrypoint_of(command)) if service else None
    return Startup(entrypoint=entrypoint, command=command, packs=packs_for(entrypoint, packs))


def prepare(
    name: str,
    inventory: Inventory,
    packs: tuple[RulePack, ...],
    options: ProbeOptions,
) -> Target:
    """What to collect on a target: its startup graph from every module rules may run."""
    source = resolve(name, inventory)
    startup = startup_for(source, inventory, packs)
    if startup.entrypoint and isinstance(source, HostSource):
        watch = tuple(w.replace("-", "_") for w in source.spec.watch)
        options = replace(
            options,
            roots=all_modules(startup.entrypoint, startup.packs),
            internal=tuple(dict.fromkeys((startup.entrypoint.partition(".")[0], *watch))),
        )
    return Target(name=name, source=source, startup=startup, options=options)


def with_service_flags(target: Target, flags: Mapping[str, str] | None) -> Target:
    """The target with the launch flags envsync keeps on the host applied to its command."""
    if not flags or not target.startup.command:
        return target
    command = target.startup.command
    for flag, value in flags.items():
        command = with_flag(command, flag, value)
    return replace(target, startup=replace(target.startup, command=command))


def compare(
    reference: Snapshot,
    target: Target,
    snap: Snapshot,
    *,
    runners: Callable[[HostSpec], Runner],
    probe: bool = False,
    probe_timeout: float = 180.0,
) -> Report:
    target = with_service_flags(target, snap.service_flags)
    outcomes: list[ProbeOutcome] = []
    if probe:
        if not isinstance(target.source, HostSource) or not target.startup.entrypoint:
            raise InputError("--probe needs a live target host with a service entrypoint")
        graph = snap.startup
        flags = parse_flags(target.startup.command)
        roots = active_roots(target.startup.entrypoint, target.startup.packs, flags)
        modules = [
            r.module
            for r in roots
            if graph is None
            or (r.module in graph.modules and graph.modules[r.module].kind != "missing")
        ]
        if modules:
            spec = target.source.spec
            outcomes = import_probe(spec, runners(spec), modules, probe_timeout)
    return classify(reference, snap, differences(reference, snap), target.startup, outcomes)
