"""A run of envsync over an inventory: one runner per host, how to collect, where notes go.

The stages (compare, repair, the service) take a Session; the CLI builds one from its
arguments, and a program using envsync as a library builds its own:

    with Session(inventory=load_inventory("envsync.toml"), runners=Runners()) as session:
        comparison = compare.diff(session, "ct129", "ct200")
"""

from __future__ import annotations

import contextlib
import threading
import weakref
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, as_completed, wait
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, replace
from typing import IO, Literal, Protocol, get_args

from envsync.collect import ProbeOptions, cache_note, share, waves
from envsync.errors import CollectError, InputError
from envsync.model.environment import Snapshot
from envsync.model.inventory import HostSpec, Inventory
from envsync.runner import Runners
from envsync.sources.snapshot import SnapshotDocument, take
from envsync.sources.source import GroupSource, HostSource, Named, Source, StateSource, resolve
from envsync.sources.states import StateStore, pick

JOBS = 8  # hosts collected at once by default
FIRST_WAVE_S = 60.0  # how long the others wait for the first host of a new command
# What collects the hosts: envsync's own runners, or Ansible (envsync/ansible/engine.py).
EngineName = Literal["envsync", "ansible"]
ENGINES: tuple[EngineName, ...] = get_args(EngineName)

HostArg = str | Source  # a HOST argument as written, or what it was resolved to
Request = tuple[HostArg, ProbeOptions | None]  # a HOST argument, and what to collect there
# A progress display for `total` collections: a context whose value is called once per host
# done (the CLI's is a bar on a terminal).
Progress = Callable[[int], AbstractContextManager[Callable[[], None]]]


class Engine(Protocol):
    """What collects hosts other than through envsync's own runners (`--engine ansible`):
    (index, host, options) in, each index's snapshot or CollectError out as it arrives."""

    def collect(
        self, requests: Sequence[tuple[int, HostSpec, ProbeOptions]]
    ) -> Iterator[tuple[int, Snapshot | CollectError]]: ...


def _quiet(message: str) -> None:
    """Notes go nowhere unless the session is given somewhere to send them."""


class Collected:
    """The snapshots a command collected of its live hosts, by the host and the probe's
    options: each host is collected once per command. What changes a host (an apply, a
    rollback, a crash kept or cleared) and taking its lock after it was collected make
    the command forget it, so that it is collected again. A snapshot is remembered while
    the command holds it (a weak reference): a fleet's command that lets each snapshot go
    once compared still holds at most `jobs` of them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by: dict[str, list[tuple[str, ProbeOptions, weakref.ref[Snapshot]]]] = {}

    def _entries(self, name: str) -> list[tuple[str, ProbeOptions, Snapshot]]:
        with self._lock:
            entries = list(self._by.get(name, ()))
        out = []
        for shape, options, ref in entries:
            snap = ref()
            if snap is not None:
                out.append((shape, options, snap))
        return out

    def get(self, spec: HostSpec, options: ProbeOptions) -> Snapshot | None:
        """The host's snapshot under these options; a request without a graph (no roots,
        no model) is also answered by one with a graph, the graph left out."""
        shape = repr(spec)
        plain = not options.roots and options.model is None
        entries = self._entries(spec.name)
        for kept_shape, kept, snap in entries:
            if kept_shape == shape and kept == options:
                return snap
        for kept_shape, kept, snap in entries:
            if plain and kept_shape == shape and _without_graph(kept) == options:
                return replace(snap, startup=None, native=None, model=None)
        return None

    def put(self, spec: HostSpec, options: ProbeOptions, snap: Snapshot) -> None:
        with self._lock:
            alive = [e for e in self._by.get(spec.name, ()) if e[2]() is not None]
            self._by[spec.name] = [*alive, (repr(spec), options, weakref.ref(snap))]

    def any(self, name: str) -> Snapshot | None:
        """A snapshot of the host collected since it last changed, under any options."""
        entries = self._entries(name)
        return entries[-1][2] if entries else None

    def forget(self, name: str) -> None:
        with self._lock:
            self._by.pop(name, None)


def _without_graph(options: ProbeOptions) -> ProbeOptions:
    return replace(
        options,
        roots=(),
        internal=(),
        workdir=None,
        isolated=False,
        loader_env=(),
        main=None,
        lazy_graph=False,
        model=None,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class Session:
    """What holds for a whole run: the inventory, the hosts' runners (one connection per
    host), how hosts are collected, and where progress notes go. A live host is collected
    once per session (per command, in the CLI), and again only after envsync changed it:
    a program that keeps a session across changes of its own takes `fresh()` for a new
    look."""

    inventory: Inventory
    runners: Runners
    probe: ProbeOptions = field(default_factory=ProbeOptions)  # --deep, --timeout, --no-cache
    allow_broken: bool = False
    jobs: int = JOBS
    notes: Callable[[str], None] = _quiet  # progress and summaries, as they happen
    progress: Progress | None = None
    engine: Engine | None = None  # None: envsync's own runners, `jobs` hosts at once
    # Where hosts' states are recorded and read (`HOST@good`); None: neither.
    states: StateStore | None = None
    # What this command collected of each live host (shared by the sessions `replace`
    # makes of this one; `fresh()` starts anew)
    collected: Collected = field(default_factory=Collected, repr=False, compare=False)
    # What each HOST argument of this command names (resolve): each resolved once
    resolved: dict[str, Named] = field(default_factory=dict, repr=False, compare=False)
    # The recorded states named in this command that were looked up (resolve): each once
    looked_up: set[str] = field(default_factory=set, repr=False, compare=False)

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close every connection the session opened."""
        self.runners.close()

    def note(self, message: str) -> None:
        self.notes(message)

    def fresh(self) -> Session:
        """This session, remembering nothing collected (a new round of `watch`)."""
        return replace(self, collected=Collected(), resolved={}, looked_up=set())

    def changed(self, host: str) -> None:
        """The host changed (or may have: its lock was taken after it was collected):
        collected again when next asked."""
        self.collected.forget(host)

    def host(self, name: HostArg) -> HostSpec:
        """An inventory host (or `local`), not a file: for stages that act on a host."""
        source = self._named(name)
        if isinstance(source, GroupSource):
            source = self.resolve(name)  # raises: one host is asked for
        if isinstance(source, StateSource):
            raise InputError(
                f"{source.label} is a recorded state of {source.spec.name}, not a host",
                tip=f"name the host itself: {source.spec.name}",
            )
        if not isinstance(source, HostSource):
            raise InputError(f"{source.label} is a file, not a host")
        return source.spec

    def resolve(self, name: HostArg) -> Source:
        """What a HOST argument names, resolved once in this command (a source is its own
        answer); a recorded state is looked up (not read) at once, so that a state that
        does not exist fails before any host is collected. One host: InputError for a
        group (`select` takes those)."""
        source = self._named(name)
        if isinstance(source, GroupSource):
            shown = ", ".join(m.label for m in source.members[:3])
            more = f" and {len(source.members) - 3} more" if len(source.members) > 3 else ""
            raise InputError(
                f"{source.label} names {len(source.members)} hosts ({shown}{more}); "
                "this takes one host",
                tip="name one of them",
            )
        if (
            isinstance(source, StateSource)
            and self.states is not None
            and source.name not in self.looked_up
        ):
            pick(self.states, source.spec.name, source.selector, source.name)
            self.looked_up.add(source.name)
        return source

    def select(self, names: Sequence[HostArg]) -> tuple[Source, ...]:
        """What several HOST arguments name, each resolved once: a group stands for its
        members, and a host named twice (itself, and in a group) is there once, where it
        was first named."""
        out: dict[str, Source] = {}
        for name in names:
            named = self._named(name)
            for source in named.members if isinstance(named, GroupSource) else (named,):
                out.setdefault(source.label, self.resolve(source))
        return tuple(out.values())

    def _named(self, name: HostArg | GroupSource) -> Named:
        """What `name` names, resolved once per command (a group's members with it: a
        member named again later is not read again)."""
        if not isinstance(name, str):
            return name
        named = self.resolved.get(name)
        if named is None:
            named = self.resolved[name] = resolve(name, self.inventory)
            if isinstance(named, GroupSource):
                for member in named.members:
                    self.resolved.setdefault(member.label, member)
        return named

    def collect_one(self, name: HostArg, options: ProbeOptions | None = None) -> Snapshot:
        """The snapshot a HOST argument names: collected live (through the engine, if
        any), or read from its file or the state folder."""
        source = self.resolve(name)
        wanted = options or self.probe
        if isinstance(source, HostSource):
            kept = self.collected.get(source.spec, wanted)
            if kept is not None:
                self._reused(source, kept)
                return kept
        if self.engine is not None and isinstance(source, HostSource):
            answers = list(self.engine.collect([(0, source.spec, wanted)]))
            if not answers:
                raise CollectError(f"{source.label}: the engine gave no result")
            result = answers[0][1]
            if isinstance(result, CollectError):
                raise result
            return self._keep(source, wanted, self._received(source, result))
        snap = take(source, self.runners, wanted, self.states)
        return self._keep(source, wanted, self._received(source, snap))

    def _reused(self, source: Source, snap: Snapshot) -> None:
        self.note(
            f"{source.label}: {len(snap.distributions)} distributions, "
            f"{sum(1 for d in snap.distributions if d.watched)} watched, "
            "as collected earlier in this command (unchanged since)"
        )

    def _keep(self, source: Source, options: ProbeOptions, snap: Snapshot) -> Snapshot:
        if isinstance(source, HostSource):
            self.collected.put(source.spec, options, snap)
        return snap

    def _received(self, source: Source, snap: Snapshot) -> Snapshot:
        """A snapshot as it arrives: malformed metadata refused, the note of its host."""
        if snap.broken and not self.allow_broken:
            first = snap.broken[0]
            more = f" (and {len(snap.broken) - 1} more)" if len(snap.broken) > 1 else ""
            raise CollectError(
                f"{source.label}: malformed distribution metadata at {first.path}: "
                f"{first.reason}{more}",
                tip="repair or remove it, or pass --allow-broken to record it and go on",
            )
        if isinstance(source, HostSource):
            self.note(
                f"{source.label}: {len(snap.distributions)} distributions, "
                f"{sum(1 for d in snap.distributions if d.watched)} watched, "
                f"collected in {snap.duration_s or 0:.2f}s",
            )
            unsafe = cache_note(snap.host)
            if unsafe:
                self.note(f"{source.label}: {unsafe}")
            shared = share.note(snap.host)
            if shared:
                parsed = snap.startup.parsed if snap.startup else 0
                self.note(f"{source.label}: {shared}, {parsed} files parsed there")
        elif isinstance(source, StateSource):
            self.note(
                f"{source.label}: the state of {source.spec.name} collected {snap.collected_at}"
            )
        return snap

    def collect_each(
        self, requests: Sequence[Request]
    ) -> Iterator[tuple[int, Snapshot | CollectError]]:
        """Snapshots of several HOSTs in parallel (at most `jobs` at once), each as it
        arrives, with its index in `requests`; a host that fails gives its CollectError and
        does not stop the others. Nothing is kept once it is handed on: a caller that writes
        each snapshot out holds at most `jobs` of them, however many hosts there are."""
        sources = [self.resolve(name) for name, _ in requests]  # all checked first
        requests = [(source, requests[i][1]) for i, source in enumerate(sources)]
        if self.engine is not None and any(isinstance(s, HostSource) for s in sources):
            yield from self._through_engine(self.engine, requests, sources)
            return
        if len(requests) == 1:
            name, options = requests[0]
            try:
                yield 0, self.collect_one(name, options)
            except CollectError as e:
                yield 0, e
            return
        shown = self.progress(len(requests)) if self.progress else contextlib.nullcontext(None)
        with shown as advance, ThreadPoolExecutor(max_workers=max(1, self.jobs)) as pool:
            jobs: dict[Future[Snapshot], int] = {}
            order = self._waves(requests, sources)
            for n, wave in enumerate(order):  # each given what the waves before parsed
                started = [pool.submit(self.collect_one, *requests[i]) for i in wave]
                jobs.update(zip(started, wave, strict=True))
                if n < len(order) - 1:
                    wait(started, timeout=FIRST_WAVE_S)  # a host that hangs holds no one long
            try:
                for job in as_completed(jobs):
                    i = jobs.pop(job)  # as_completed lets go of it too: its snapshot goes with it
                    try:
                        result: Snapshot | CollectError = job.result()
                    except CollectError as e:
                        result = e
                    del job
                    if advance is not None:
                        advance()
                    yield i, result
                    del result
            finally:  # a caller that stops early (an error): hosts not started are not collected
                for job in jobs:
                    job.cancel()

    def _waves(self, requests: Sequence[Request], sources: Sequence[Source]) -> list[list[int]]:
        """The waves in which to collect the hosts, so that each is given the facts of the
        hosts before it (collect.waves)."""
        return waves(
            [
                (s.spec, requests[i][1] or self.probe) if isinstance(s, HostSource) else None
                for i, s in enumerate(sources)
            ]
        )

    def _through_engine(
        self, engine: Engine, requests: Sequence[Request], sources: Sequence[Source]
    ) -> Iterator[tuple[int, Snapshot | CollectError]]:
        """The hosts through the engine (all at once, each as it arrives), files read here."""
        asked = []
        for i, source in enumerate(sources):
            wanted = requests[i][1] or self.probe
            kept = (
                self.collected.get(source.spec, wanted) if isinstance(source, HostSource) else None
            )
            if kept is not None:
                self._reused(source, kept)
                yield i, kept
            elif isinstance(source, HostSource):
                asked.append((i, source.spec, wanted))
            else:
                try:
                    yield i, self.collect_one(requests[i][0], requests[i][1])
                except CollectError as e:
                    yield i, e
        if not asked:
            return
        shown = self.progress(len(asked)) if self.progress else contextlib.nullcontext(None)
        order = [[asked[n] for n in wave] for wave in waves([(s, o) for _, s, o in asked])]
        with shown as advance:
            for i, result in (answer for wave in order for answer in engine.collect(wave)):
                if not isinstance(result, CollectError):
                    try:
                        result = self._received(sources[i], result)
                        self._keep(sources[i], requests[i][1] or self.probe, result)
                    except CollectError as e:
                        result = e
                if advance is not None:
                    advance()
                yield i, result
                del result

    def collect_many(self, requests: Sequence[Request]) -> list[Snapshot | CollectError]:
        """collect_each's results in the order asked."""
        results: list[Snapshot | CollectError | None] = [None] * len(requests)
        for i, result in self.collect_each(requests):
            results[i] = result
        return [r for r in results if r is not None]

    def collect_all(self, requests: Sequence[Request]) -> list[Snapshot]:
        """Like collect_many, for stages that need every host: the first failure is raised."""
        out = []
        for result in self.collect_many(requests):
            if isinstance(result, CollectError):
                raise result
            out.append(result)
        return out


# `snapshot HOST...`: one document of many snapshots, written as they come


def collect_snapshots(
    session: Session,
    hosts: Sequence[HostArg],
    spool: IO[bytes],
    on_error: Callable[[CollectError], None],
) -> SnapshotDocument:
    """Every host's snapshot in one document (spooled in `spool`); a host that cannot be
    collected is listed under `errors`, and handed to `on_error` as it fails."""
    doc = SnapshotDocument(spool)
    for i, result in session.collect_each([(name, None) for name in hosts]):
        if isinstance(result, CollectError):
            on_error(result)
            named = hosts[i]
            doc.errors[i] = (named if isinstance(named, str) else named.label, result)
        else:
            doc.add(i, result)
        del result
    return doc
