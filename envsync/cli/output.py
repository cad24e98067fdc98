"""What the commands print: data to stdout or -o (atomically), progress and errors to stderr,
and the results of the stages (a smoke test, a rollback) in words."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from envsync import redact
from envsync.documents import check_writable, write_atomic, write_pieces
from envsync.exitcodes import ExitCode
from envsync.vocab import FAIL_ON_DEFAULT, Severity

if TYPE_CHECKING:
    from envsync.findings import Report
    from envsync.repair import Rollback
    from envsync.service.host import ServiceRun
    from envsync.session import Session
    from envsync.watch import WatchRun


def err(message: str) -> None:
    # An error may quote a host's output (pip's, the service's): no secret gets through.
    print(f"envsync: {redact.text(message)}", file=sys.stderr)


def note(quiet: bool, message: str) -> None:
    if not quiet:
        print(redact.text(message), file=sys.stderr)


def emit(text: str | Iterable[str], output: str | None) -> None:
    """Write the command's output (a string, or its pieces as they are made) to the -o
    file, all or nothing, or to stdout."""
    if output:
        write_atomic(Path(output), text)
    else:
        write_pieces(sys.stdout, text)


def render(
    fmt: str,
    reports: Sequence[Report],
    output: str | None,
    *,
    fleet: bool = False,
    fail_on: Severity = FAIL_ON_DEFAULT,
) -> str:
    """Reports in `fmt`, coloured and as wide as the terminal when they go to one;
    `fleet`: several targets as one matrix (in the formats that have one); `fail_on`:
    what fails a JUnit case."""
    from envsync.report import FLEET_FORMATS, render_fleet
    from envsync.report import render as render_reports

    color = output is None and sys.stdout.isatty() and "NO_COLOR" not in os.environ
    width = shutil.get_terminal_size((120, 40)).columns if color else 120
    if fleet and fmt in FLEET_FORMATS:
        return render_fleet(fmt, reports, color=color, width=width)
    return render_reports(fmt, reports, color=color, width=width, fail_on=fail_on)


def indent(text: str) -> str:
    return "\n".join("  " + line for line in text.splitlines())


def writable(path: str | None) -> None:
    """Fail before a long collection when an output can never be written."""
    if path:
        check_writable(Path(path))


def warn_pylock_name(output: str | None) -> None:
    from envsync.pylock import FILE_NAME

    if output and not FILE_NAME.match(Path(output).name):
        err(
            f"warning: installers read only pylock.toml or pylock.NAME.toml; "
            f"`uv pip sync {output}` will not take {Path(output).name} as a lock "
            "(Tip: -o pylock.toml or -o pylock.HOST.toml)"
        )


def print_service_run(run: ServiceRun, session: Session) -> ExitCode:
    """A smoke test's verdict, the crash traced to its finding; the command's exit code."""
    verdict, host = run.verdict, run.host
    if verdict.kind == "not-running":
        print(f"{host}: not running (`envsync deploy {host}` starts it)")
        return ExitCode.SMOKE
    if verdict.kind == "ready":
        line = f"{host}: ready in {run.took:.1f}s; {verdict.detail}"
        if verdict.tokens_per_s:
            line += f": {verdict.tokens_per_s:.0f} tokens/s"
            theirs = run.reference
            if theirs is not None:
                line += (
                    f" ({verdict.tokens_per_s / theirs.tokens_per_s:.0%} of {theirs.host}'s "
                    f"{theirs.tokens_per_s:.0f} tokens/s on {theirs.at})"
                )
        print(line)
        return ExitCode.OK
    if verdict.kind == "stalled":
        print(f"{host}: STALLED: {verdict.detail}; log tail:\n{indent(verdict.log_tail)}")
        return ExitCode.SMOKE
    print(f"{host}: CRASHED {run.took:.1f}s after start: {verdict.exception or verdict.detail}")
    diagnosis = run.diagnosis
    if diagnosis is not None:
        for line in diagnosis.notes:  # what collecting for the diagnosis said, in its turn
            session.note(line)
        if diagnosis.against:
            print(f"  traced against {diagnosis.against}")
        where = f"; last frame: {diagnosis.frame}" if diagnosis.frame else ""
        cause = diagnosis.cause
        if not diagnosis.import_error:
            print(f"  not an import error: envsync has no finding for it{where}")
        elif cause is None or cause.finding is None:
            print(f"  not drift: {cause.why_not if cause else ''}{where}")
        else:
            # The crash makes the finding fatal on this host (kept until it is next ready).
            print(f"  cause (fatal finding of envsync diff {diagnosis.reference} {host}):")
            print(f"    {cause.finding.reason}")
            if cause.finding.severity != "fatal":
                print(
                    f"    (read from the code it was {cause.finding.severity}; this crash makes "
                    f"it fatal on {host} until the service is next ready)"
                )
            for fix, command in cause.fixes:
                print(f"  fix: {fix.summary}")
                print(f"       next: {command}")
    if verdict.log_tail:
        print(f"log tail:\n{indent(verdict.log_tail)}")
    return ExitCode.SMOKE


def print_rollback(done: Rollback, session: Session) -> None:
    session.note(f"{done.host}: restored {done.backup} ({', '.join(done.dists) or 'files only'})")


def print_watch_run(run: WatchRun) -> None:
    """What changed in a watch run, at once (a journal or a pipe reads it as it comes)."""
    from envsync.watch import event_lines

    for line in event_lines(run):
        print(redact.text(line), flush=True)


class _Stop(Exception):
    """SIGTERM while a watch waits for its next run."""


def _stop(signum: int, frame: object) -> None:
    raise _Stop


def signal_wait(seconds: float) -> bool:
    """Sleep until the next run (True), or until SIGTERM (False: the watch ends, exit 0).
    A SIGTERM during a run is main()'s: exit 143, every file of that run whole."""
    import signal
    import threading
    import time

    if threading.current_thread() is not threading.main_thread():
        time.sleep(seconds)
        return True
    previous = signal.getsignal(signal.SIGTERM)
    try:
        try:
            signal.signal(signal.SIGTERM, _stop)
            time.sleep(seconds)
            return True
        finally:
            signal.signal(signal.SIGTERM, previous)
    except _Stop:  # during the sleep, or as the handler was being put back
        return False
