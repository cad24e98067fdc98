"""The envsync commands: each takes its typed options and the Session, calls one stage,
and prints what the stage returns (output.py says how)."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from envsync.cli.options import (
    CheckOptions,
    DiffOptions,
    HistoryOptions,
    LockOptions,
    RollbackOptions,
    ServiceOptions,
    SnapshotOptions,
    WatchCommandOptions,
)
from envsync.cli.output import (
    apply_line,
    backups_text,
    check_line,
    emit,
    err,
    note_classes,
    print_rollback,
    print_rollout,
    print_service_run,
    print_watch_run,
    render,
    signal_wait,
    warn_pylock_name,
    writable,
)
from envsync.errors import CollectError
from envsync.exitcodes import ExitCode
from envsync.model.printable import printable

if TYPE_CHECKING:
    from envsync.repair.run import RepairOptions
    from envsync.sources.session import Session

# Commands import the stages they run when they run: deepdiff, the classifier, rich and
# the SSH stack cost more to import than a whole local snapshot takes.


def cmd_snapshot(options: SnapshotOptions, session: Session) -> ExitCode:
    from envsync.sources.session import collect_snapshots
    from envsync.sources.snapshot import dumps_snapshot

    writable(options.output)
    hosts = session.select(options.hosts)
    if len(hosts) == 1:
        (result,) = session.collect_many([(hosts[0], None)])
        if isinstance(result, CollectError):
            err(str(result))
            return ExitCode.COLLECT
        emit(dumps_snapshot(result), options.output)
        return ExitCode.OK
    with tempfile.TemporaryFile() as spool:
        doc = collect_snapshots(session, hosts, spool, on_error=lambda e: err(str(e)))
        emit(doc.pieces(), options.output)
    return ExitCode.COLLECT if doc.errors else ExitCode.OK


def cmd_lock(options: LockOptions, session: Session) -> ExitCode:
    from envsync.sources.locks.locking import lock_host

    writable(options.output)
    if options.form == "pylock":
        warn_pylock_name(options.output)
    lock = lock_host(session, options.host, form=options.form, portable=options.portable)
    for warning in lock.warnings:
        err(f"warning: {warning}")
    emit(lock.text, options.output)
    return ExitCode.OK


def cmd_diff(options: DiffOptions, session: Session) -> ExitCode:
    from envsync.compare import targets as compare

    if options.reference is not None:
        session.resolve(options.reference)  # the reference is read (and refused) first
    chosen = session.select(options.targets)
    if len(chosen) > 1:
        fleet = compare.diff_fleet(
            session,
            options.reference or "",
            options.targets,
            import_check=options.import_check,
            outputs=(options.output or "",),
        )
        for failure in fleet.failures:
            err(str(failure))
        if fleet.reports:
            shown = render(
                options.format, fleet.reports, options.output, fleet=True, classes=fleet.classes
            )
            emit(shown, options.output)
        note_classes(session, fleet)
        if fleet.failures:
            return ExitCode.COLLECT
        return ExitCode.DRIFT if fleet.drift else ExitCode.OK
    comparison = compare.diff(
        session,
        options.reference,
        chosen[0] if chosen else None,
        import_check=options.import_check,
        outputs=(options.output or "",),
    )
    report = comparison.report
    emit(render(options.format, [report], options.output), options.output)
    session.note(report.summary_line())
    return ExitCode.DRIFT if report.findings else ExitCode.OK


def cmd_check(options: CheckOptions, session: Session) -> ExitCode:
    from envsync.compare import targets as compare
    from envsync.documents import write_atomic
    from envsync.report import render as render_reports

    result = compare.check(
        session,
        options.lock,
        options.hosts,
        fail_on=options.fail_on,
        import_check=options.import_check,
        outputs=tuple(p for p in (options.output, options.junit, options.markdown) if p),
    )
    for failure in result.failures:
        err(str(failure))
    shown = (*result.reports, *result.servers)
    emit(
        render(
            options.format,
            result.reports if options.format == "prometheus" else shown,
            options.output,
            fail_on=result.fail_on,
            classes=result.classes,
            unreachable=result.unreachable,
            servers=result.servers,
        ),
        options.output,
    )
    if options.junit:
        write_atomic(Path(options.junit), render_reports("junit", shown, fail_on=result.fail_on))
    if options.markdown:
        write_atomic(Path(options.markdown), render_reports("markdown", shown))
    note_classes(session, result)
    for report in result.servers:
        session.note(report.summary_line())
    session.note(check_line(result, options.lock))
    if result.failures:
        return ExitCode.COLLECT
    if result.blocking:
        return ExitCode.DRIFT
    return ExitCode.OK


def cmd_repair(options: RepairOptions, session: Session) -> ExitCode:
    from envsync.repair.canary import rollout
    from envsync.repair.plan import describe
    from envsync.repair.run import fleet_targets, repair

    hosts = fleet_targets(session, options)
    if hosts:
        reference = options.reference or session.inventory.reference or ""
        hint = apply_line(options, reference, options.target or "")
        return print_rollout(rollout(session, options, hosts), apply_hint=hint)
    done = repair(session, options)
    if not options.apply:
        text = describe(done.plan, exec_prefix=done.exec_prefix).rstrip("\n") + "\n"
        if done.plan.steps:  # and last, a line apart: what applies it
            text += "\n" + apply_line(options, done.plan.reference, done.plan.target) + "\n"
        emit(printable(text), None)
        return ExitCode.DRIFT if done.plan.steps else ExitCode.OK
    if done.applied is None:
        session.note(f"{done.plan.target}: nothing to do")
        return ExitCode.OK
    if done.not_deployed:
        session.note(f"{done.plan.target}: {done.not_deployed}")
    if done.service is None:
        return ExitCode.OK
    return print_service_run(done.service, session)


def cmd_deploy(options: ServiceOptions, session: Session) -> ExitCode:
    from envsync.service.host import deploy_host

    run = deploy_host(
        session, options.host, deadline=options.deadline, wait=options.wait, store=options.store
    )
    return print_service_run(run, session)


def cmd_smoke(options: ServiceOptions, session: Session) -> ExitCode:
    from envsync.service.host import smoke_host

    run = smoke_host(session, options.host, deadline=options.deadline, store=options.store)
    return print_service_run(run, session)


def cmd_stop(options: ServiceOptions, session: Session) -> ExitCode:
    from envsync.service.host import stop_host

    what = stop_host(session, options.host, wait=options.wait)
    session.note(f"{options.host}: stopped {what}")
    return ExitCode.OK


def cmd_rollback(options: RollbackOptions, session: Session) -> ExitCode:
    from envsync.repair.run import list_backups, rollback_host

    if options.list:
        emit(backups_text(options.host, list_backups(session, options.host)), None)
        return ExitCode.OK
    done = rollback_host(
        session, options.host, backup=options.backup, force=options.force, wait=options.wait
    )
    print_rollback(done, session)
    return ExitCode.OK


def cmd_history(options: HistoryOptions, session: Session) -> ExitCode:
    from envsync.report.history import render as render_history
    from envsync.sources.history import history

    writable(options.output)
    done = history(session, options.host, live=options.live)
    emit(render_history(done, options.format), options.output)
    return ExitCode.OK


def cmd_watch(options: WatchCommandOptions, session: Session) -> ExitCode:
    from envsync.report import watch

    for path in (options.log, options.prometheus):
        writable(path)

    def report(run: watch.WatchRun) -> None:
        print_watch_run(run)
        if not run.events and options.watch.every is None:
            # --once with nothing to say still says so (on stderr: -q silences it).
            session.note(watch.unchanged_line(run, options.watch.fail_on))
        if options.log:
            watch.append_lines(options.log, watch.log_lines(run))
        if options.prometheus:
            watch.write_textfile(options.prometheus, run, fail_on=options.watch.fail_on)

    last = watch.watch(session, options.watch, report, signal_wait)
    # Told to stop between runs: a clean end. Once: the run's verdict, as `check` gives it.
    return last.exit_code if options.watch.every is None else ExitCode.OK
