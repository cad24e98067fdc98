"""A host's past: what changed between its recorded states, when each package arrived, and
recording a host's state for the stages that see it good (deploy, smoke, lock) or changed.

`changes` and `arrivals` are pure; `history` reads the state folder (and, asked to, the
live host); `record_state` collects and records, and never fails the command that calls
it: that command has its verdict already.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from envsync.collect.identity import compared
from envsync.errors import CollectError, InputError, OutputError, StateError
from envsync.model.environment import Snapshot
from envsync.model.vocab import Kind
from envsync.sources.hostidentity import machine_of, migrated
from envsync.sources.session import Session
from envsync.sources.states import (
    UNREAD,
    State,
    StateStore,
    Unread,
    Why,
    last_good,
    load,
    record,
    states_of,
)

HISTORY_SCHEMA_VERSION = 1


@dataclass(frozen=True, slots=True, kw_only=True)
class Change:
    """One difference between a state and the one after it, as `diff` sees it."""

    kind: Kind  # version | missing (removed) | extra (added) | file | torch | gpu | ...
    subject: str  # the package, the file, or "section key" (torch version, gpu driver)
    before: str | None
    after: str | None
    package: str | None = None  # the distribution it concerns (a file: its owner)
    # A package that arrived (added, or at another version): when and by what, from its
    # own .dist-info (the time of its RECORD, its INSTALLER).
    installed_at: str | None = None
    installer: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Arrival:
    """A package of a state: when it was installed there, and by which installer."""

    name: str
    version: str
    installed_at: str | None = None
    installer: str | None = None


def changes(old: Snapshot, new: Snapshot) -> tuple[Change, ...]:
    """What changed from `old` to `new` (pure): the differences `diff old new` finds, each
    package that arrived with its install time."""
    from envsync.model.changes import differences

    out = []
    for d in differences(old, new):
        package = d.dist or (d.key if d.section == "distributions" else None)
        arrived = new.distribution(d.key) if d.kind in ("version", "extra") else None
        out.append(
            Change(
                kind=d.kind,
                subject=d.subject,
                before=d.reference,
                after=d.target,
                package=package,
                installed_at=arrived.installed_at if arrived else None,
                installer=arrived.installer if arrived else None,
            )
        )
    return tuple(out)


def arrivals(snapshot: Snapshot) -> tuple[Arrival, ...]:
    """Every package of a snapshot, latest installed first (unknown times last)."""
    found = [
        Arrival(name=d.name, version=d.version, installed_at=d.installed_at, installer=d.installer)
        for d in snapshot.distributions
    ]
    found.sort(key=lambda a: a.name)
    found.sort(key=lambda a: a.installed_at or "", reverse=True)
    return tuple(found)


def installed_text(change: Change) -> str:
    """ "installed 2026-12-01T10:05:12Z by pip", or "" when the time is not known."""
    if not change.installed_at:
        return ""
    by = f" by {change.installer}" if change.installer else ""
    return f"installed {change.installed_at}{by}"


def change_text(change: Change) -> str:
    """One change in words: "xgrammar 0.1.32 → 0.1.10 (installed … by pip)"."""
    from envsync.model.findings import short_hash

    when = installed_text(change)
    when = f" ({when})" if when else ""
    match change.kind:
        case "extra":
            return f"{change.subject} {change.after} added{when}"
        case "missing":
            return f"{change.subject} {change.before} removed"
        case "version":
            return f"{change.subject} {change.before} → {change.after}{when}"
        case _:
            before = short_hash(change.before) or "—"
            after = short_hash(change.after) or "—"
            return f"{change.subject}: {before} → {after}"


def since_notes(reference: Snapshot, target: Snapshot) -> tuple[str, ...]:
    """A report's notes when the reference is a recorded state of the target: each package
    that arrived or left since, with when it was installed."""
    since = f"since {reference.host} (collected {reference.collected_at})"
    return tuple(
        f"{since}: {change_text(c)}"
        for c in changes(reference, target)
        if c.kind in ("version", "extra", "missing")
    )


# ---------------------------------------------------------------------------------------
# Recording, for the stages


def record_state(
    session: Session, host: str, why: Why, snapshot: Snapshot | None = None
) -> State | None:
    """Record the host's state (collected now, quietly, unless given); None when the
    session keeps no states, or when it could not be recorded (a note says why)."""
    if session.states is None:
        return None
    try:
        snap = snapshot or replace(session, notes=_quiet).collect_one(host)
        recorded = record(session.states, snap, why)
    except (CollectError, StateError, OutputError) as e:
        session.note(f"{host}: its state was not recorded: {e}")
        return None
    if recorded.other_machine is not None:
        session.note(
            f"{host}: another machine answers at its address now (its machine id changed): "
            f"its past starts here; the states of the machine before are in "
            f"{recorded.other_machine}"
        )
    return recorded.state


def _quiet(message: str) -> None:
    """Collecting a state again after a verdict says nothing new."""


def good_state(session: Session, host: str) -> State | None:
    """The host's last good state, when the session keeps states and one is recorded."""
    if session.states is None:
        return None
    try:
        return last_good(session.states, host)
    except StateError:
        return None


# ---------------------------------------------------------------------------------------
# `history HOST`


@dataclass(frozen=True, slots=True, kw_only=True)
class Entry:
    """One state in a host's history, with what changed since the one before it."""

    ref: str  # how to name it: ct129@latest, ct129@-1, ...; `ct129` for the live host
    at: str  # when it was recorded (the live host: collected)
    why: str  # ready | lock | watch; now: the live host as collected, not recorded
    good: bool
    digest: str
    file: str | None = None  # its state file (None: the live host)
    first: bool = False  # the oldest recorded: nothing before it to compare
    changes: tuple[Change, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class History:
    schema_version: int = HISTORY_SCHEMA_VERSION
    host: str
    folder: str
    entries: tuple[Entry, ...]  # newest first
    # The packages of the newest entry, latest installed first.
    packages: tuple[Arrival, ...] = ()


def history(session: Session, host: str, *, live: bool = False) -> History:
    """The recorded states of `host`, newest first, each with what changed since the one
    before it; `live`: the host as it is now on top ("now": collected, not recorded),
    with what changed since its latest recorded state and its packages (what `history
    HOST` shows: a host changed by hand since is shown as it is, not as recorded). The
    states are those of the machine that answers now (live), else of the one last
    recorded at the host's address."""
    store = _store(session)
    machine: str | Unread | None = UNREAD
    states = states_of(store, host)
    # A state that cannot be read fails before any host is collected.
    entries, newest = _entries(host, states) if states else ([], None)
    now: Snapshot | None = None
    if live and (states or store.elsewhere(host)):
        try:
            now = session.collect_one(host)
        except CollectError as e:
            e.tip = e.tip or f"`envsync history {host} --no-live` reads its recorded states alone"
            raise
        machine = machine_of(now)
        if store.folder(host, machine) != store.folder(host):
            states = states_of(store, host, machine)  # another machine answers there now
            entries, newest = _entries(host, states) if states else ([], None)
    changed = _identity_changed(session, store, host, machine)
    if newest is None:
        if host not in session.inventory.hosts:
            session.inventory.host(host)  # an unknown name: its own error
        raise StateError(
            f"{host}: no state is recorded in {store.folder(host, machine)}"
            + (f"; {changed}" if changed else ""),
            tip=f"a ready `envsync deploy {host}` or `envsync smoke {host}`, or `envsync lock "
            f"{host}`, records one",
        )
    if changed:
        session.note(changed)
    if now is not None:
        entries.append(
            Entry(
                ref=host,
                at=now.collected_at or "",
                why="now",
                good=False,
                digest=compared(now)[:16],
                changes=changes(newest, now),
            )
        )
        newest = now
    return History(
        host=host,
        folder=str(store.folder(host, machine)),
        entries=tuple(reversed(entries)),
        packages=arrivals(newest),
    )


def _entries(host: str, states: list[State]) -> tuple[list[Entry], Snapshot]:
    """The entries of recorded states (oldest first), and the newest one's snapshot."""
    entries: list[Entry] = []
    before: Snapshot | None = None
    for i, state in enumerate(states):
        snap = load(state)  # two at a time: a long history is not held whole
        back = len(states) - 1 - i
        entries.append(
            Entry(
                ref=f"{host}@latest" if back == 0 else f"{host}@-{back}",
                at=state.when,
                why=state.why,
                good=state.good,
                digest=state.digest,
                file=str(state.path),
                first=before is None,
                changes=changes(before, snap) if before is not None else (),
            )
        )
        before = snap
    assert before is not None
    return entries, before


def _identity_changed(
    session: Session, store: StateStore, host: str, machine: str | Unread | None
) -> str | None:
    """What to say when states were recorded under this name for another machine (another
    address, exec prefix, interpreter or machine id), or before hosts were kept by
    identity: each folder, and what it is the past of."""
    if host not in session.inventory.hosts:
        return None
    from envsync.sources.hostidentity import describe_folder, identity_text

    spec = session.inventory.hosts[host]
    notes = []
    own = store.folder(host, machine)
    if migrated(own) is not None:
        notes.append(
            f"{host}: its states before envsync kept hosts by identity were recorded under "
            f"its name alone (in {migrated(own)}), and are taken as its past: if they are "
            f"another machine's, remove them from {own}"
        )
    others = store.elsewhere(host, machine)
    if others:
        where = "; ".join(describe_folder(p) for p in others)
        notes.append(
            f"{host}: its identity changed: states recorded under this name for another "
            f"machine (another address, interpreter or machine id), or before envsync kept "
            f"hosts by identity, are in {where}; they are not the past of {host} as it is "
            f"now ({identity_text(spec)}"
            + (f", machine id {machine}" if isinstance(machine, str) else "")
            + ")"
        )
    return "; ".join(notes) or None


def _store(session: Session) -> StateStore:
    if session.states is None:
        raise InputError("no state folder is known here", tip="give the session a StateStore")
    return session.states
