"""What the classifier is asked before it runs, in a module light enough to import first:
the service's startup as envsync understands it for one target, and the native symbols to
ask the live reference about. A command whose verdict is kept (envsync/verdicts.py) never
imports the rest of the classifier.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from envsync.classify.rules import Root, RulePack, active_roots
from envsync.model import NativeFacts, NativeUndefinedSymbol, ServedModel, Snapshot, Unavailable

# (load key, symbol) -> the file of the reference's lookup scope that defines it
Providers = Mapping[tuple[str, str], str]


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
