"""Each command's options as a frozen dataclass, built from argparse's namespace here only.

A subparser names its builder (`set_defaults(build=...)`); the builder reads the
attributes that subparser defines (and the environment: where throughput figures are
kept) and binds the typed options to the command function. Nothing after this module
sees an argparse namespace.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from envsync.collect import ProbeOptions
from envsync.collect.importcheck import ImportCheck
from envsync.exitcodes import ExitCode
from envsync.model.vocab import Severity
from envsync.runner import CONNECT_TIMEOUT
from envsync.sources.locks.locking import LockFormat
from envsync.sources.session import ENGINES, JOBS, EngineName
from envsync.sources.states import KEEP, StateStore, default_dir

if TYPE_CHECKING:
    from envsync.repair.run import RepairOptions
    from envsync.report.watch import WatchOptions
    from envsync.sources.session import Session

OptionsT = TypeVar("OptionsT")
Command = Callable[[OptionsT, "Session"], ExitCode]


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionOptions:
    """What every command shares: the inventory, how hosts are reached and collected."""

    inventory: str | None = None
    quiet: bool = False
    accept_new_host_keys: bool = False
    connect_timeout: float = CONNECT_TIMEOUT
    probe: ProbeOptions = field(default_factory=ProbeOptions)  # --deep, --timeout, --no-cache
    allow_broken: bool = False
    jobs: int = JOBS
    engine: EngineName = ENGINES[0]
    states: StateStore | None = None  # where hosts' states are recorded and read


@dataclass(frozen=True, slots=True, kw_only=True)
class Invocation:
    """One parsed command line: the command with its options bound, and its session's."""

    run: Callable[[Session], ExitCode]
    session: SessionOptions


@dataclass(frozen=True, slots=True, kw_only=True)
class SnapshotOptions:
    hosts: tuple[str, ...]
    output: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class LockOptions:
    host: str | None = None
    form: LockFormat = "envsync"
    portable: bool = False
    output: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class DiffOptions:
    reference: str | None = None
    targets: tuple[str, ...] = ()
    format: str = "table"
    output: str | None = None
    import_check: ImportCheck = field(default_factory=ImportCheck)


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckOptions:
    lock: str
    hosts: tuple[str, ...] = ()
    fail_on: Severity
    junit: str | None = None
    markdown: str | None = None
    format: str = "table"
    output: str | None = None
    import_check: ImportCheck = field(default_factory=ImportCheck)


@dataclass(frozen=True, slots=True, kw_only=True)
class ServiceOptions:
    """deploy, smoke, stop: one host."""

    host: str
    deadline: float = 0.0  # deploy, smoke
    wait: float = 0.0  # deploy, stop
    store: Path | None = None  # deploy, smoke: where tokens/s figures are kept


@dataclass(frozen=True, slots=True, kw_only=True)
class RollbackOptions:
    host: str
    backup: str = "latest"  # the newest apply not rolled back
    force: bool = False  # restore over paths changed since the apply
    list: bool = False  # list the backups, change nothing
    wait: float = 0.0


@dataclass(frozen=True, slots=True, kw_only=True)
class HistoryOptions:
    host: str
    format: str = "table"
    live: bool = False
    output: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class WatchCommandOptions:
    """`watch`: the stage's options, and where each run's report goes besides stdout."""

    watch: WatchOptions
    log: str | None = None  # JSON lines, appended
    prometheus: str | None = None  # node_exporter textfile, rewritten atomically


def _bound(command: Command[OptionsT], options: OptionsT, session: SessionOptions) -> Invocation:
    return Invocation(run=partial(command, options), session=session)


def _states(args: argparse.Namespace, keep: int = KEEP) -> StateStore:
    """The state folder: --state-dir, else $ENVSYNC_STATE_DIR, else the XDG default."""
    root = Path(args.state_dir) if args.state_dir else default_dir(os.environ)
    return StateStore(root=root, keep=keep)


def _session(
    args: argparse.Namespace, *, collects: bool = True, jobs: int = JOBS, keep: int = KEEP
) -> SessionOptions:
    """The session's options; `collects`: the command takes the collection options (and
    the state folder's); `jobs`: -j of the commands that collect many hosts at once;
    `keep`: --keep-states of the commands that record states."""
    if not collects:
        return SessionOptions(
            inventory=args.inventory,
            quiet=args.quiet,
            accept_new_host_keys=args.accept_new_host_keys,
            connect_timeout=args.connect_timeout,
        )
    return SessionOptions(
        inventory=args.inventory,
        quiet=args.quiet,
        accept_new_host_keys=args.accept_new_host_keys,
        connect_timeout=args.connect_timeout,
        probe=ProbeOptions(
            deep=args.deep, timeout=args.timeout, cache_dir="" if args.no_cache else None
        ),
        allow_broken=args.allow_broken,
        jobs=jobs,
        engine=args.engine,
        states=_states(args, keep),
    )


def _import_check(args: argparse.Namespace) -> ImportCheck:
    return ImportCheck(run=args.import_check, timeout=args.import_check_timeout)


def snapshot(args: argparse.Namespace, command: Command[SnapshotOptions]) -> Invocation:
    options = SnapshotOptions(hosts=tuple(args.hosts), output=args.output)
    return _bound(command, options, _session(args, jobs=args.jobs))


def lock(args: argparse.Namespace, command: Command[LockOptions]) -> Invocation:
    options = LockOptions(
        host=args.host, form=args.format, portable=args.portable, output=args.output
    )
    return _bound(command, options, _session(args, keep=args.keep_states))


def diff(args: argparse.Namespace, command: Command[DiffOptions]) -> Invocation:
    options = DiffOptions(
        reference=args.reference,
        targets=tuple(args.targets),
        format=args.format,
        output=args.output,
        import_check=_import_check(args),
    )
    return _bound(command, options, _session(args, jobs=args.jobs))


def check(args: argparse.Namespace, command: Command[CheckOptions]) -> Invocation:
    options = CheckOptions(
        lock=args.lock,
        hosts=tuple(args.hosts),
        fail_on=args.fail_on,
        junit=args.junit,
        markdown=args.markdown,
        format=args.format,
        output=args.output,
        import_check=_import_check(args),
    )
    return _bound(command, options, _session(args, jobs=args.jobs))


def repair(args: argparse.Namespace, command: Command[RepairOptions]) -> Invocation:
    from envsync.repair.run import RepairOptions  # the repair stage: only for this command
    from envsync.service.throughput import default_store

    options = RepairOptions(
        reference=args.reference,
        target=args.target,
        prefer=args.prefer,
        only=args.only,
        plan=Path(args.plan) if args.plan else None,
        save=Path(args.output) if args.output else None,
        apply=args.apply,
        deploy=not args.no_deploy,
        deadline=args.deadline,
        wait=args.wait,
        store=default_store(os.environ),
        batch=tuple(args.batch or ()),
        max_fail=args.max_fail,
    )
    return _bound(command, options, _session(args, jobs=args.jobs, keep=args.keep_states))


def deploy(args: argparse.Namespace, command: Command[ServiceOptions]) -> Invocation:
    from envsync.service.throughput import default_store  # the service: only when deploying

    options = ServiceOptions(
        host=args.host, deadline=args.deadline, wait=args.wait, store=default_store(os.environ)
    )
    return _bound(command, options, _session(args, keep=args.keep_states))


def smoke(args: argparse.Namespace, command: Command[ServiceOptions]) -> Invocation:
    from envsync.service.throughput import default_store

    options = ServiceOptions(
        host=args.host, deadline=args.deadline, store=default_store(os.environ)
    )
    return _bound(command, options, _session(args, keep=args.keep_states))


def stop(args: argparse.Namespace, command: Command[ServiceOptions]) -> Invocation:
    return _bound(
        command, ServiceOptions(host=args.host, wait=args.wait), _session(args, collects=False)
    )


def rollback(args: argparse.Namespace, command: Command[RollbackOptions]) -> Invocation:
    options = RollbackOptions(
        host=args.host,
        backup=args.backup or "latest",
        force=args.force,
        list=args.list,
        wait=args.wait,
    )
    return _bound(command, options, _session(args, collects=False))


def history(args: argparse.Namespace, command: Command[HistoryOptions]) -> Invocation:
    options = HistoryOptions(host=args.host, format=args.format, live=args.live, output=args.output)
    return _bound(command, options, _session(args))


def watch(args: argparse.Namespace, command: Command[WatchCommandOptions]) -> Invocation:
    from envsync.report.watch import WatchOptions  # the watch stage: only for this command

    options = WatchCommandOptions(
        watch=WatchOptions(
            hosts=tuple(args.hosts),
            lock=args.lock,
            fail_on=args.fail_on,
            every=None if args.once else args.every,
        ),
        log=args.log,
        prometheus=args.prometheus,
    )
    return _bound(command, options, _session(args, keep=args.keep_states))


def completion(args: argparse.Namespace, command: Command[str]) -> Invocation:
    """`completion SHELL`: no host is reached; only the inventory may be named."""
    return _bound(command, args.shell, SessionOptions(inventory=args.inventory, quiet=args.quiet))
