"""`watch`: check hosts on a schedule, or once (from a systemd timer or cron), and say only
what changed since the last run: the host's environment (against its latest recorded
state) and its findings (against `--lock`, else its own last good state).

Each host's memory of the last run is `watch.json` in its state folder; each change seen is
recorded as a `watch` state, so `history` shows when it happened. `textfile` writes the
hosts' status in node_exporter's textfile format for Prometheus.
"""

from __future__ import annotations

import contextlib
import json
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import Any

from envsync.collect.identity import compared, environment
from envsync.documents import read_json_object, write_atomic
from envsync.errors import CollectError, InputError, OutputError, StateError
from envsync.exitcodes import ExitCode
from envsync.model.vocab import FAIL_ON_DEFAULT, SEVERITIES, SEVERITY_RANK, Severity
from envsync.sources.history import Change, change_text, changes
from envsync.sources.hostidentity import machine_of
from envsync.sources.session import Session
from envsync.sources.states import (
    StateStore,
    last_good,
    load,
    record,
    states_of,
    utc_text,
)

MEMORY = "watch.json"
_DURATION = re.compile(r"^(\d+(?:\.\d+)?)(s|m|h)$")
_UNIT = {"s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(text: str) -> float:
    """Seconds of `30s`, `10m`, `1.5h`; ValueError for anything else."""
    match = _DURATION.match(text.strip())
    if match is None or float(match.group(1)) <= 0:
        raise ValueError(f"{text!r} is not a duration such as 30s, 10m or 1h")
    return float(match.group(1)) * _UNIT[match.group(2)]


@dataclass(frozen=True, slots=True, kw_only=True)
class WatchOptions:
    hosts: tuple[str, ...] = ()  # default: defaults.target
    lock: str | None = None  # compare with this lock (or HOST@...); None: each host's @good
    fail_on: Severity = FAIL_ON_DEFAULT
    every: float | None = None  # seconds between runs; None: once


# ---------------------------------------------------------------------------------------
# What a run reports: one class per kind of event


@dataclass(frozen=True, slots=True, kw_only=True)
class Changed:
    """The host's environment changed since its latest recorded state."""

    host: str
    since: str  # when that state was recorded
    changes: tuple[Change, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class FirstSeen:
    """No state of the host was recorded before: this run recorded its first."""

    host: str
    against: str | None = None  # what its findings are compared with (None: nothing yet)


@dataclass(frozen=True, slots=True, kw_only=True)
class FindingSeen:
    """A finding against the reference that the last run did not have (or had, and this
    one has not: `gone`)."""

    host: str
    against: str
    gone: bool
    severity: Severity
    kind: str
    subject: str
    reference: str | None
    target: str | None
    reason: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class Reach:
    """The host could not be watched (an unreachable host, a damaged state), or can again."""

    host: str
    up: bool
    error: str | None = None


Event = Changed | FirstSeen | FindingSeen | Reach


@dataclass(frozen=True, slots=True, kw_only=True)
class HostStatus:
    """A host as this run left it: what the Prometheus file says."""

    host: str
    up: bool
    against: str | None = None  # what its findings were compared with (None: nothing)
    counts: Mapping[str, int] = field(default_factory=dict)  # findings by severity
    blocking: int = 0  # findings at or above fail_on
    changes: int = 0  # changes seen since the last run
    last_good: float | None = None  # when its last good state was recorded (epoch seconds)
    code: ExitCode = ExitCode.OK  # what this host makes a `--once` exit with
    digest: str | None = None  # its environment's digest (identity.environment)


@dataclass(frozen=True, slots=True, kw_only=True)
class WatchRun:
    at: str  # when the run started (UTC)
    events: tuple[Event, ...]
    statuses: tuple[HostStatus, ...]

    @property
    def exit_code(self) -> ExitCode:
        """`--once`: 3 (or 2) when a host could not be watched, 1 when one has blocking
        findings, else 0; as `check` exits."""
        codes = [s.code for s in self.statuses]
        for code in (ExitCode.COLLECT, ExitCode.USAGE, ExitCode.DRIFT):
            if code in codes:
                return code
        return ExitCode.OK


# ---------------------------------------------------------------------------------------
# One run


def _hosts(session: Session, options: WatchOptions) -> tuple[str, ...]:
    hosts = options.hosts or ((session.inventory.target,) if session.inventory.target else ())
    if not hosts:
        raise InputError("watch: name the HOSTs to watch, or set defaults.target in the inventory")
    for name in hosts:
        session.host(name)  # a host, not a file or a recorded state: its states are kept
    return hosts


def _store(session: Session) -> StateStore:
    if session.states is None:
        raise InputError("watch needs a state folder", tip="give the session a StateStore")
    return session.states


def _memory(store: StateStore, host: str) -> dict[str, Any]:
    """What the last run saw of the host ({} the first time, or when unreadable)."""
    path = store.folder(host) / MEMORY
    if not path.is_file():
        return {}
    try:
        return read_json_object(path, StateError, "watch memory", plain=True)
    except StateError:
        return {}  # rewritten at the end of this run


def _key(finding: Any) -> list[Any]:
    return [finding.severity, finding.kind, finding.subject, finding.reference, finding.target]


def watch_once(session: Session, options: WatchOptions) -> WatchRun:
    """Check each host once, and say what changed since the last run."""
    session = session.fresh()  # each run looks anew
    store = _store(session)
    at = utc_text(datetime.now(timezone.utc))
    events: list[Event] = []
    statuses = [
        _watch_host(session, store, host, options, events) for host in _hosts(session, options)
    ]
    return WatchRun(at=at, events=tuple(events), statuses=tuple(statuses))


def _watch_host(
    session: Session, store: StateStore, host: str, options: WatchOptions, events: list[Event]
) -> HostStatus:
    from envsync.compare import targets as compare  # the classifier: only when a run starts

    memory = _memory(store, host)
    quiet = replace(session, notes=lambda message: None)
    try:
        good = last_good(store, host)
        against = options.lock or (f"{host}@good" if good is not None else None)
        report = None
        if against is not None:
            comparison = compare.diff(quiet, against, host, command="watch")
            snap, report = comparison.snapshot, comparison.report
        else:
            snap = quiet.collect_one(host)
        states = states_of(store, host, machine_of(snap))
        latest = states[-1] if states else None
        seen: tuple[Change, ...] = ()
        if latest is None or latest.digest != compared(snap)[:16]:
            if latest is None:
                events.append(FirstSeen(host=host, against=against))
            else:
                seen = changes(load(latest), snap)
                events.append(Changed(host=host, since=latest.when, changes=seen))
            record(store, snap, "watch")
    except (CollectError, InputError, OutputError) as e:
        code = ExitCode.COLLECT if isinstance(e, CollectError) else ExitCode.USAGE
        if memory.get("up", True) or memory.get("error") != str(e):
            events.append(Reach(host=host, up=False, error=str(e)))
        _remember(store, host, {**memory, "up": False, "error": str(e)})
        return HostStatus(host=host, up=False, code=code)
    if memory.get("up") is False:
        events.append(Reach(host=host, up=True))
    found = report.findings if report is not None else ()
    keys = [_key(f) for f in found]
    before = memory.get("findings", []) if memory.get("against") == against else []
    for finding, key in zip(found, keys, strict=True):
        if key not in before:
            events.append(_finding_event(host, against or "", finding, gone=False))
    for old in before:
        if isinstance(old, list) and len(old) == 5 and old not in keys:
            severity, kind, subject, reference, target = old
            events.append(
                FindingSeen(
                    host=host,
                    against=against or "",
                    gone=True,
                    severity=severity if severity in SEVERITY_RANK else "unknown",
                    kind=str(kind),
                    subject=str(subject),
                    reference=reference,
                    target=target,
                )
            )
    _remember(store, host, {"up": True, "against": against, "findings": keys})
    threshold = SEVERITY_RANK[options.fail_on]
    counts: dict[str, int] = {s: sum(1 for f in found if f.severity == s) for s in SEVERITIES}
    blocking = sum(1 for f in found if SEVERITY_RANK[f.severity] <= threshold)
    good = last_good(store, host)
    return HostStatus(
        host=host,
        up=True,
        digest=environment(snap),
        # As the report names its reference (a lock's host, `h@good`): as `check` says it.
        against=report.reference if report is not None else None,
        counts=counts,
        blocking=blocking,
        changes=len(seen),
        last_good=good.at.timestamp() if good is not None else None,
        code=ExitCode.DRIFT if blocking else ExitCode.OK,
    )


def _finding_event(host: str, against: str, finding: Any, *, gone: bool) -> FindingSeen:
    return FindingSeen(
        host=host,
        against=against,
        gone=gone,
        severity=finding.severity,
        kind=finding.kind,
        subject=finding.subject,
        reference=finding.reference,
        target=finding.target,
        reason=finding.reason,
    )


def _remember(store: StateStore, host: str, memory: dict[str, Any]) -> None:
    folder = store.folder(host)
    with contextlib.suppress(OSError):
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    write_atomic(folder / MEMORY, json.dumps(memory, indent=1) + "\n")


def watch(
    session: Session,
    options: WatchOptions,
    on_run: Callable[[WatchRun], None],
    wait: Callable[[float], bool],
) -> WatchRun:
    """Run `watch_once` now and then every `options.every` seconds, handing each run to
    `on_run`, until `wait(seconds)` returns False (it is told to stop) or, without
    `every`, after one run; the last run is returned."""
    _hosts(session, options)  # a bad command line fails before the first run
    while True:
        started = time.monotonic()
        run = watch_once(session, options)
        on_run(run)
        if options.every is None:
            return run
        if not wait(max(0.0, options.every - (time.monotonic() - started))):
            return run


# ---------------------------------------------------------------------------------------
# What a run says: lines for people, JSON lines for a log, a Prometheus textfile


def event_lines(run: WatchRun) -> list[str]:
    from envsync.model.findings import short_hash  # a file's hashes as the table shows them

    out = []
    for event in run.events:
        match event:
            case FirstSeen(host=host, against=None):
                out.append(
                    f"{host}: first watched; its state is recorded (no good state to compare "
                    "it with yet: a ready deploy or smoke, or a lock, records one)"
                )
            case FirstSeen(host=host, against=against):
                out.append(f"{host}: first watched, against {against}; its state is recorded")
            case Changed(host=host, since=since, changes=changed):
                out.append(f"{host}: changed since its state of {since}:")
                out += [f"  {change_text(c)}" for c in changed] or ["  (nothing diff compares)"]
            case FindingSeen(host=host, against=against, gone=True) as f:
                out.append(f"{host}: gone against {against}: {f.severity} {f.kind} {f.subject}")
            case FindingSeen(host=host, against=against) as f:
                values = f"{short_hash(f.reference) or '—'} → {short_hash(f.target) or '—'}"
                out.append(
                    f"{host}: new against {against}: {f.severity} {f.kind} {f.subject} "
                    f"({values}): {f.reason}"
                )
            case Reach(host=host, up=False, error=error):
                out.append(f"{host}: cannot be watched: {error}")
            case Reach(host=host):
                out.append(f"{host}: watched again")
    return [f"{run.at} {line}" if not line.startswith("  ") else line for line in out]


def unchanged_line(run: WatchRun, fail_on: Severity = FAIL_ON_DEFAULT) -> str:
    """A run that saw no change, in one line: the hosts and where they stand."""
    from envsync.model.nodeset import fold

    hosts = [s.host for s in run.statuses]
    blocking = [s.host for s in run.statuses if s.up and s.blocking]
    down = [s.host for s in run.statuses if not s.up]
    where = []
    if blocking:
        where.append(f"{fold(blocking)} with findings at or above {fail_on}")
    if down:
        where.append(f"{fold(down)} still not watched")
    standing = "; ".join(where) or "none at or above " + fail_on
    return f"{run.at} no change on {fold(hosts)} since the last run ({standing})"


def log_lines(run: WatchRun) -> list[str]:
    """One JSON object per event (JSON lines), each with the run's time."""
    from envsync.model.codec import to_data

    names = {Changed: "changed", FirstSeen: "first-seen", FindingSeen: "finding", Reach: "reach"}
    return [
        json.dumps({"at": run.at, "event": names[type(e)], **to_data(e)}, sort_keys=False)
        for e in run.events
    ]


def append_lines(path: str, lines: Sequence[str]) -> None:
    """Append whole lines to a log in one write each run (O_APPEND: a line is never torn,
    whoever else appends), to a regular file only: a link is not followed (envsync runs
    as root, the link could name any file), a FIFO is not waited on (open_plain)."""
    import os

    from envsync.documents import open_plain

    if not lines:
        return
    data = ("\n".join(lines) + "\n").encode()
    try:
        fd = open_plain(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    except OSError as e:
        raise OutputError(f"{path}: cannot write: {e.strerror}") from e
    try:
        os.write(fd, data)
    except OSError as e:
        raise OutputError(f"{path}: cannot write: {e.strerror}") from e
    finally:
        os.close(fd)


def textfile(run: WatchRun, *, fail_on: Severity = FAIL_ON_DEFAULT) -> str:
    """The hosts' status in node_exporter's textfile format (one write per run, atomic), in
    the vocabulary `check --format prometheus` writes (report/prometheus.py)."""
    from envsync.report.prometheus import HostMetrics, hosts_textfile

    hosts = [
        HostMetrics(
            host=s.host,
            up=s.up,
            reference=s.against,
            counts=s.counts,
            blocking=s.blocking,
            digest=s.digest,
            changes=s.changes,
            last_good=s.last_good,
        )
        for s in run.statuses
    ]
    return hosts_textfile(hosts, fail_on=fail_on, now=time.time())


def write_textfile(path: str, run: WatchRun, *, fail_on: Severity = FAIL_ON_DEFAULT) -> None:
    from pathlib import Path

    write_atomic(Path(path), textfile(run, fail_on=fail_on))
