"""The states of each host that envsync records on the machine it runs on: a host's past.

A state is a host's snapshot at a moment, and why it was recorded: `ready` (a deploy or
smoke test saw the service come up), `lock` (`envsync lock HOST`), or `watch` (`envsync
watch` saw the host change). The good ones (`ready`, `lock`) make `HOST@good`; every one
counts for `HOST@latest`, `HOST@-1` (the one before the latest) and `HOST@TIME` (the latest
at or before that time).

Each host has a folder of its own under the state folder (`$ENVSYNC_STATE_DIR`, else
`$XDG_STATE_HOME/envsync/states`, `~/.local/state` by default), named for the host and its
identity (`ct200~3f2a9c1d0b7e`: its address or exec prefix, its interpreter, and the
machine id its probe read, an app-specific digest of /etc/machine-id), so that two
inventories that both call a host ct200, or a host re-imaged at the same address, never
share a past. Each folder says in `identity.json` what it is the past of; `NAME~KEY.current`
names the folder of the machine last recorded at that address, which a state is read from
when no live host says which machine it is. A folder of the layout before identities (the
name alone) is taken as the past of the first host of that name that touches it, with a
note (`history` repeats it); one JSON file per state,
named for when, why and what (`20261201T100203.123456Z-ready-3f2a9c1d0b7e4a55.json`), so
that finding a state reads no file. A state is recorded only when the host's digest (of
what `diff` compares: packages, watched files, torch, GPU, system, variables; never when it
was collected) differs from its latest state's; the last `keep` are kept, and always the
latest good one. Snapshots are stored as envsync saves them (secrets redacted), without the
startup import graph: ten times the size, and `diff` reads it from the live target, as it
does with a lock.

Each state is sealed with this machine's key (envsync/seal.py, kept apart from the states):
a state whose content was edited, even with its digest made again to match, or one copied
from another machine, is refused with the way out, never used as a host's past.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Literal, cast

from envsync.collect.identity import compared
from envsync.documents import open_plain, read_json_object, read_plain, write_atomic
from envsync.errors import DecodeError, StateError
from envsync.model.codec import from_data, to_data
from envsync.model.environment import SNAPSHOT_SCHEMA_VERSION, Snapshot
from envsync.model.inventory import HostSpec
from envsync.seal import mac, secret, state_home, verifies
from envsync.sources.hostidentity import (
    IDENTITY,
    MIGRATED,
    address_key,
    identity_text,
    machine_in,
    machine_of,
    with_machine,
)

STATE_SCHEMA_VERSION = 1
KEEP = 20  # states kept per host by default (and always the latest good one)

Why = Literal["ready", "lock", "watch"]
WHYS: tuple[Why, ...] = ("ready", "lock", "watch")
GOOD: frozenset[Why] = frozenset(("ready", "lock"))

_NAME = re.compile(r"^(\d{8}T\d{6}\.\d{6}Z)-(" + "|".join(WHYS) + r")-([0-9a-f]{16})\.json$")
_STAMP = "%Y%m%dT%H%M%S.%fZ"
_SAFE_HOST = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,100}$")


class Unread:
    """No machine id given: the folder of the machine last recorded at the address."""


UNREAD = Unread()


def default_dir(environ: Mapping[str, str]) -> Path:
    """Where states are kept: `$ENVSYNC_STATE_DIR`, else `$XDG_STATE_HOME/envsync/states`."""
    explicit = environ.get("ENVSYNC_STATE_DIR")
    return Path(explicit) if explicit else state_home(environ) / "states"


def utc_text(when: datetime) -> str:
    """A time as states and reports spell it: `2026-12-01T10:02:03Z`."""
    return when.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True, slots=True, kw_only=True)
class StateStore:
    """The state folder, how many states of a host it keeps, and (bound to an inventory)
    each host's identity: a host's past is that of what it is, not of its name."""

    root: Path
    keep: int = KEEP
    identities: Mapping[str, str] = field(default_factory=dict)  # name -> address_key()
    described: Mapping[str, str] = field(default_factory=dict)  # name -> identity_text()

    def bound(self, hosts: Iterable[HostSpec]) -> StateStore:
        """This store with the identity of where each of `hosts` is reached; which machine
        answers there, its probe says (record), or the last one recorded there."""
        specs = list(hosts)
        return replace(
            self,
            identities={s.name: address_key(s) for s in specs},
            described={s.name: identity_text(s) for s in specs},
        )

    def _base(self, host: str) -> str:
        if _SAFE_HOST.match(host):
            return host
        return "_" + hashlib.sha256(host.encode()).hexdigest()[:24]

    def folder(self, host: str, machine: str | Unread | None = UNREAD) -> Path:
        """The host's folder: its name (a digest of a name that is no safe file name),
        then `~` and its identity when it is known: of `machine` when given, else of the
        machine last recorded at its address."""
        key = self.identities.get(host)
        base = self._base(host)
        if key is None:
            return self.root / base
        if isinstance(machine, Unread):
            return self._current(host, base, key)
        return self.root / f"{base}~{with_machine(key, machine)}"

    def _pointer(self, base: str, key: str) -> Path:
        return self.root / f"{base}~{key}.current"

    def _current(self, host: str, base: str, key: str) -> Path:
        """The folder the pointer names; with none, the address's own folder, which takes
        over a folder of the layout before identities on first touch."""
        pointer = self._pointer(base, key)
        with contextlib.suppress(OSError, UnicodeDecodeError):
            name = read_plain(pointer, 256).decode().strip()
            if re.fullmatch(re.escape(base) + r"~[0-9a-f]{12}", name):
                return self.root / name
        own = self.root / f"{base}~{key}"
        old = self.root / base
        if own.exists() or not _holds_states(old):
            return own
        try:
            os.rename(old, own)  # atomic: of two first touches, one takes it
        except OSError:
            return own if own.exists() else old  # read where it is, when it cannot move
        with contextlib.suppress(OSError):
            write_atomic(own / MIGRATED, f"{old}\n")
            self._describe(own, host, None)
        return own

    def _describe(self, folder: Path, host: str, machine: str | None) -> None:
        data = {"host": host, "where": self.described.get(host), "machine_id": machine}
        write_atomic(folder / IDENTITY, json.dumps(data, sort_keys=True) + "\n")

    def settle(self, host: str, machine: str | None) -> tuple[Path, Path | None]:
        """The folder of `host` as `machine` answers at its address, made the current one;
        and the folder that was current before, when it held another machine's states. A
        folder of no known machine (recorded before machine ids were read, or taken over
        from the layout before identities) is this machine's, the first one seen there."""
        key = self.identities.get(host)
        if key is None:
            self.folder(host).mkdir(parents=True, exist_ok=True, mode=0o700)
            return self.folder(host), None
        base = self._base(host)
        before = self._current(host, base, key)
        folder = self.folder(host, machine)
        unknown = self.root / f"{base}~{key}"
        if folder != unknown and not folder.exists() and machine_in(unknown) is None:
            with contextlib.suppress(OSError):
                if _holds_states(unknown):
                    os.rename(unknown, folder)
                    before = folder if before == unknown else before
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        if machine_in(folder) != machine or not (folder / IDENTITY).exists():
            self._describe(folder, host, machine)
        pointer = self._pointer(base, key)
        named = None
        with contextlib.suppress(OSError):
            named = read_plain(pointer, 256).decode("ascii", "replace").strip()
        if named != folder.name:
            write_atomic(pointer, folder.name + "\n")
        return folder, before if before != folder and _holds_states(before) else None

    def elsewhere(self, host: str, machine: str | Unread | None = UNREAD) -> list[Path]:
        """The folders of states recorded under this name for another identity (another
        address, interpreter or machine, or before hosts were kept by identity), that
        hold a state."""
        base = self._base(host)
        own = self.folder(host, machine)
        try:
            names = os.listdir(self.root)
        except OSError:
            return []
        found = []
        for name in sorted(names):
            path = self.root / name
            if path == own or not (name == base or name.startswith(base + "~")):
                continue
            if _holds_states(path):
                found.append(path)
        return found


def _holds_states(folder: Path) -> bool:
    try:
        return any(_NAME.match(n) for n in os.listdir(folder))
    except OSError:
        return False


@dataclass(frozen=True, slots=True, kw_only=True)
class State:
    """One recorded state of a host, as its file name tells (no file read)."""

    host: str
    at: datetime  # when it was recorded (UTC)
    why: Why
    digest: str  # the first 16 hex digits of its digest
    path: Path

    @property
    def good(self) -> bool:
        return self.why in GOOD

    @property
    def when(self) -> str:
        return utc_text(self.at)


# ---------------------------------------------------------------------------------------
# What follows the @ of HOST@...: one class per kind


@dataclass(frozen=True, slots=True, kw_only=True)
class LastGood:
    """`@good`: the latest state recorded as good (ready, lock)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Back:
    """`@latest` (0), `@-1` (the state before the latest), `@-2`..."""

    steps: int


@dataclass(frozen=True, slots=True, kw_only=True)
class AtTime:
    """`@2026-11-30T14:00`: the latest state recorded at or before that time."""

    until: datetime  # aware


Selector = LastGood | Back | AtTime

SELECTOR_TIP = (
    "write HOST@good (its last ready or locked state), HOST@latest, HOST@-1 (the state "
    "before the latest), or HOST@2026-11-30T14:00 (local time; Z or +01:00 for another zone)"
)
_TIME = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2}):(\d{2})(?::(\d{2}))?)?(Z|[+-]\d{2}:?\d{2})?$"
)


def split_name(name: str) -> tuple[str, str] | None:
    """("ct129", "good") of "ct129@good"; None for a name with no `@`."""
    host, at, selector = name.rpartition("@")
    return (host, selector) if at and host else None


def parse_selector(text: str, name: str) -> Selector:
    """What follows the @; StateError for anything else."""
    if text == "good":
        return LastGood()
    if text in ("latest", "0"):
        return Back(steps=0)
    if re.fullmatch(r"-[1-9][0-9]{0,5}", text):
        return Back(steps=int(text[1:]))
    match = _TIME.match(text)
    if match is not None:
        try:
            return AtTime(until=_moment(*match.groups()))
        except (ValueError, OverflowError) as e:
            raise StateError(f"{name}: {text} is not a time: {e}", tip=SELECTOR_TIP) from e
    raise StateError(f"{name}: @{text} does not name a recorded state", tip=SELECTOR_TIP)


def _moment(
    year: str, month: str, day: str, hour: str, minute: str, second: str, zone: str | None
) -> datetime:
    """The moment a HOST@TIME names, in UTC; ValueError or OverflowError for one that no
    clock has (a zone past 24 hours, a year before 1 or after 9999 once in UTC)."""
    when = datetime(
        int(year), int(month), int(day), int(hour or 0), int(minute or 0), int(second or 0)
    )
    if zone is None:
        aware = when.astimezone()  # local time, as the user's clock says
    elif zone == "Z":
        aware = when.replace(tzinfo=timezone.utc)
    else:
        sign = 1 if zone[0] == "+" else -1
        digits = zone[1:].replace(":", "")
        offset = timedelta(hours=int(digits[:2]), minutes=int(digits[2:]))
        aware = when.replace(tzinfo=timezone(sign * offset))
    aware.astimezone(timezone.utc)  # overflows here, not later in a message
    return aware


# ---------------------------------------------------------------------------------------
# Reading

# The latest time a state may be named for: one after it must still have a time.
_LAST = datetime(9999, 1, 1, tzinfo=timezone.utc)


def states_of(store: StateStore, host: str, machine: str | Unread | None = UNREAD) -> list[State]:
    """The host's recorded states, oldest first (an absent folder: none): of `machine`
    when given, else of the machine last recorded at its address."""
    folder = store.folder(host, machine)
    try:
        names = os.listdir(folder)
    except FileNotFoundError:
        return []
    except OSError as e:
        raise StateError(f"{folder}: cannot read the state folder: {e.strerror}") from e
    found = []
    for entry in names:
        match = _NAME.match(entry)
        if match is None:
            continue  # a temporary file of a write in progress, the watch's memory
        stamp, why, short = match.groups()
        try:
            at = datetime.strptime(stamp, _STAMP).replace(tzinfo=timezone.utc)
        except ValueError:
            at = _LAST
        if at >= _LAST:
            raise StateError(
                f"{folder / entry}: not a state envsync recorded (named for no time it can "
                f"use: {stamp})",
                tip=f"remove it; `envsync history {host}` lists the others",
            )
        found.append(State(host=host, at=at, why=cast(Why, why), digest=short, path=folder / entry))
    return sorted(found, key=lambda s: s.at)


def last_good(store: StateStore, host: str) -> State | None:
    return next((s for s in reversed(states_of(store, host)) if s.good), None)


def pick(store: StateStore, host: str, selector: Selector, name: str) -> State:
    """The state `name` (HOST@...) names; StateError, with what there is, when none."""
    states = states_of(store, host)
    tip = (
        f"a ready `envsync deploy {host}` or `envsync smoke {host}`, or `envsync lock {host}`, "
        "records one"
    )
    if not states:
        raise StateError(f"{name}: no state of {host} is recorded in {store.folder(host)}", tip=tip)
    listed = f"`envsync history {host}` lists them"
    match selector:
        case LastGood():
            good = [s for s in states if s.good]
            if not good:
                raise StateError(
                    f"{name}: none of the {len(states)} recorded state(s) of {host} is good "
                    "(ready or locked)",
                    tip=tip,
                )
            return good[-1]
        case Back(steps=steps):
            if steps >= len(states):
                raise StateError(
                    f"{name}: {host} has {len(states)} recorded state(s), "
                    f"{host}@latest to {host}@-{len(states) - 1}"
                    if len(states) > 1
                    else f"{name}: {host} has one recorded state, {host}@latest",
                    tip=listed,
                )
            return states[-1 - steps]
        case AtTime(until=until):
            before = [s for s in states if s.at <= until]
            if not before:
                raise StateError(
                    f"{name}: no state of {host} was recorded at or before {utc_text(until)} "
                    f"(the first: {states[0].when})",
                    tip=listed,
                )
            return before[-1]


def load(state: State) -> Snapshot:
    """The snapshot of a state, as recorded; StateError when its file is gone, damaged or
    another host's."""
    damaged = f"{state.path}: a damaged state of {state.host}"
    tip = f"remove it; `envsync history {state.host}` lists the others"
    try:
        data = read_json_object(state.path, StateError, "state", plain=True)
    except StateError as e:  # unreadable, not JSON, not an object: the line says which
        raise StateError(e.message, tip=tip) from e
    if data.get("schema_version") != STATE_SCHEMA_VERSION:
        raise StateError(
            f"{damaged} (state schema_version {data.get('schema_version')!r}, this envsync "
            f"reads {STATE_SCHEMA_VERSION})",
            tip=tip,
        )
    if data.get("host") != state.host:
        raise StateError(
            f"{state.path}: a state of {data.get('host')!r}, not of {state.host}",
            tip=f"remove it from {state.path.parent}, or move it to that host's folder",
        )
    if not str(data.get("digest", "")).startswith(state.digest):
        raise StateError(f"{damaged} (its digest is not the one its name says)", tip=tip)
    snap = data.get("snapshot")
    if not isinstance(snap, dict) or snap.get("schema_version") != SNAPSHOT_SCHEMA_VERSION:
        raise StateError(f"{damaged} (no snapshot this envsync reads)", tip=tip)
    try:
        found = from_data(Snapshot, snap, "state.snapshot")
    except DecodeError as e:
        raise StateError(f"{damaged}: {e}", tip=tip) from e
    key = secret()
    seal = data.pop("seal", None)
    if key is not None and not verifies(key, SEALED_AS, _body(data), seal):
        raise StateError(
            f"{state.path}: a state of {state.host} whose seal does not verify (edited, "
            "recorded on another machine, or before states were sealed)",
            tip=f"record the host again (`envsync lock {state.host}`), and remove this one",
        )
    return found


SEALED_AS = "state"  # the name a state's seal is made under (seal.mac)


def _body(data: Mapping[str, Any]) -> bytes:
    """A state's text as its seal covers it: the document without its seal."""
    return json.dumps(data, separators=(",", ":")).encode()


def load_named(store: StateStore, host: str, selector: Selector, name: str) -> Snapshot:
    """The snapshot HOST@... names, standing in for the host: named as written (`ct129@good`),
    and a recorded state, not a live host (its files cannot be copied)."""
    return replace(load(pick(store, host, selector, name)), host=name, source="state")


# ---------------------------------------------------------------------------------------
# Recording


@contextlib.contextmanager
def _locked(folder: Path) -> Iterator[None]:
    """One recorder at a time per host folder (a deploy and a watch may end together)."""
    import fcntl

    path = folder / ".lock"
    try:
        fd = open_plain(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    except OSError as e:
        raise StateError(
            f"{path}: cannot lock the state folder: {e.strerror}",
            tip=f"remove {path}: envsync makes it again",
        ) from e
    with os.fdopen(fd, "a") as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        yield


def _document(snapshot: Snapshot, why: Why, at: datetime, full: str) -> dict[str, Any]:
    return {
        "schema_version": STATE_SCHEMA_VERSION,
        "host": snapshot.host,
        "at": utc_text(at),
        "why": why,
        "digest": full,
        "startup_graph": False,  # see the module's docstring
        "snapshot": to_data(replace(snapshot, startup=None)),
    }


@dataclass(frozen=True, slots=True, kw_only=True)
class Recorded:
    state: State  # the host's latest state now
    new: bool  # False: the host was unchanged since it (nothing written)
    # The folder of the states recorded at this address before, when they are another
    # machine's (its machine id changed: re-imaged, or another container behind the prefix).
    other_machine: Path | None = None


def record(
    store: StateStore, snapshot: Snapshot, why: Why, *, now: datetime | None = None
) -> Recorded:
    """Record a live host's snapshot as its latest state, unless its latest state has the
    same digest; an unchanged host seen good for the first time (it was only watched)
    gets a good state in place of that one. Oldest states beyond `keep` are removed, never
    the latest good one. Every file is written atomically."""
    host = snapshot.host
    full = compared(snapshot)
    machine = machine_of(snapshot)
    try:
        folder, other = store.settle(host, machine)
    except OSError as e:
        where = store.folder(host, machine)
        raise StateError(f"{where}: cannot create the state folder: {e.strerror}") from e
    with _locked(folder):
        states = states_of(store, host, machine)
        latest = states[-1] if states else None
        unchanged = latest is not None and latest.digest == full[:16]
        if latest is not None and unchanged and (latest.good or why not in GOOD):
            return Recorded(state=latest, new=False, other_machine=other)
        at = now or datetime.now(timezone.utc)
        if latest is not None and at <= latest.at:
            at = latest.at + timedelta(microseconds=1)  # the clock went back: keep the order
        path = folder / f"{at.strftime(_STAMP)}-{why}-{full[:16]}.json"
        document = _document(snapshot, why, at, full)
        key = secret()
        if key is not None:  # bound to this machine's key: an edited state is never used
            document["seal"] = mac(key, SEALED_AS, _body(document))
        text = json.dumps(document, separators=(",", ":")) + "\n"
        write_atomic(path, text)
        state = State(host=host, at=at, why=why, digest=full[:16], path=path)
        if latest is not None and latest.digest == state.digest:
            latest.path.unlink(missing_ok=True)  # the watched state, now a good one
        _prune(store, host, machine)
        return Recorded(state=state, new=True, other_machine=other)


def _prune(store: StateStore, host: str, machine: str | None) -> None:
    states = states_of(store, host, machine)
    good = next((s for s in reversed(states) if s.good), None)
    extra = len(states) - max(1, store.keep)
    for state in states:
        if extra <= 0:
            break
        if state is good:
            continue
        state.path.unlink(missing_ok=True)
        extra -= 1
