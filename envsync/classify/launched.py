"""What the classifier is asked before it runs, in a module light enough to import first:
where the service's startup begins (`entrypoint`, with the rule packs' console scripts),
the service's startup as envsync understands it for one target, and the native symbols to
ask the live reference about. A command whose verdict is kept (envsync/compare/verdicts.py) never
imports the rest of the classifier.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from envsync.classify.rules import Root, RulePack, ScriptRule, active_roots
from envsync.model.environment import (
    NativeFacts,
    NativeUndefinedSymbol,
    ServedModel,
    Snapshot,
    Unavailable,
)
from envsync.model.inventory import ServiceSpec
from envsync.model.launch import effective_command, launch_of


@dataclass(frozen=True, slots=True, kw_only=True)
class Entrypoint:
    """Where the service's startup begins, as envsync reads it from the service."""

    # A module, or a launch root the probe resolves on the host ("console:NAME",
    # "script:PATH"); None: envsync cannot tell (then `unreadable` says why).
    root: str | None
    launcher: tuple[str, ...] = ()  # roots the launch command runs before the entrypoint
    shown: str | None = None  # how a report names it ("-m sglang.launch_server")
    unreadable: str | None = None
    isolated: bool = False  # -I / -P: a script's folder is not put first on sys.path
    as_main: bool = False  # the root runs as __main__ (`-m`, the inventory's entrypoint)


def script_rule(name: str, args: Sequence[str], packs: Sequence[RulePack]) -> ScriptRule | None:
    """The rule for a console script run with these arguments (its subcommand), if any."""
    sub = next((a for a in args if not a.startswith("-")), None)
    for pack in packs:
        for rule in pack.scripts:
            if rule.name == name and rule.subcommand in (None, sub):
                return rule
    return None


def entrypoint(service: ServiceSpec | None, packs: Sequence[RulePack] = ()) -> Entrypoint:
    """The service's entrypoint: `entrypoint` in the inventory, else what its command
    starts (a module, a script, a console script, which a rule pack may map to the module
    whose startup it runs)."""
    if service is None or not service.command:
        return Entrypoint(
            root=None, unreadable="no service entrypoint in the inventory (no [service] command)"
        )
    if service.entrypoint:
        # "taken from `-m` in the command otherwise": it runs as `-m` runs it
        return Entrypoint(root=service.entrypoint, shown=service.entrypoint, as_main=True)
    # Read with {inventory_dir} and {port} filled: a script's path may hold them.
    launch = launch_of(effective_command(service, None, None))
    if launch.shape == "module" and launch.target:
        return Entrypoint(
            root=launch.target,
            shown=f"-m {launch.target}",
            isolated=launch.isolated,
            as_main=True,
        )
    if launch.shape == "script" and launch.target:
        return Entrypoint(
            root=f"script:{launch.target}",
            shown=f"script {launch.target}",
            isolated=launch.isolated,
        )
    if launch.shape == "console" and launch.target:
        console = f"console:{launch.target}"
        rule = script_rule(launch.target, launch.args, packs)
        if rule is not None:
            sub = f" {rule.subcommand}" if rule.subcommand else ""
            return Entrypoint(
                root=rule.entrypoint,
                launcher=(console, *rule.modules),
                shown=f"{launch.target}{sub}, which runs {rule.entrypoint}",
            )
        return Entrypoint(root=console, shown=f"console script {launch.target}")
    return Entrypoint(
        root=None,
        unreadable=f"envsync cannot read what the command starts ({launch.why}); "
        'set entrypoint = "pkg.module" in [service]',
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class Startup:
    """The service's startup as envsync understands it for one target."""

    entrypoint: str | None  # the module startup runs (a script: __main__)
    command: tuple[str, ...]
    packs: tuple[RulePack, ...]
    launcher: tuple[str, ...] = ()  # modules the launch command runs first (console scripts)
    shown: str | None = None  # the entrypoint as a report names it ("script /srv/serve.py")
    unreadable: str | None = None  # why envsync cannot tell what the command starts
    unresolved: tuple[str, ...] = ()  # launch roots the target does not have ("console:x")
    model: ServedModel | Unavailable | None = None  # the served model, as read on the target
    # the environment variables set where the service runs (its [service].env, the host's)
    env: tuple[str, ...] = ()

    def roots(self, flags: Mapping[str, str]) -> tuple[Root, ...]:
        """The modules startup imports under these launch flags, the launcher's first
        (none without an entrypoint): what the classifier reads from and the real-import
        check imports, so that both judge the same startup."""
        if not self.entrypoint:
            return ()
        return active_roots(
            self.entrypoint, self.packs, flags, self.launcher, self.shown, self.model
        )

    def governed(self) -> frozenset[str]:
        """Modules a rule pack's flag chooses: startup runs them as the pack says."""
        return frozenset(
            m
            for pack in self.packs
            for rule in pack.flags
            for value in rule.values.values()
            for m in value.modules
        )


def native_of(snap: Snapshot) -> NativeFacts | None:
    return snap.native if isinstance(snap.native, NativeFacts) else None


def questions(reference: Snapshot, target: Snapshot) -> list[tuple[str, str]]:
    """(load key, symbol) of each symbol the target's loads miss that loads on the
    reference: what to ask the reference host (which of its files defines it)."""
    ours, theirs = native_of(target), native_of(reference)
    if ours is None or theirs is None:
        return []
    out = []
    for load in ours.loads:
        there = theirs.load(load.key)
        if there is None or there.verdict.kind != "ok":
            continue
        for reason in load.verdict.reasons:
            if isinstance(reason, NativeUndefinedSymbol):
                out.append((load.key, reason.symbol))
    return out
