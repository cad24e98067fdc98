"""What the commands print: data to stdout or -o (atomically), progress and errors to stderr,
and the results of the stages (a smoke test, a rollback) in words.

Output never harms the work: a line of progress that stderr cannot take (closed, full, its
reader gone) is dropped, and the command goes on; the command's data that stdout cannot
take is one line on stderr and exit 2; a result line of a command that changed a host
(`say`) that cannot be shown leaves that command's exit code as it is. Every line passes
through `printable` (a host's strings carry no escape sequence to the terminal) and the
redaction rules.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from envsync import redact
from envsync.documents import check_writable, write_atomic, write_pieces
from envsync.errors import OutputError
from envsync.exitcodes import ExitCode
from envsync.printable import printable
from envsync.vocab import FAIL_ON_DEFAULT, Severity

if TYPE_CHECKING:
    from envsync.apply import BackupInfo
    from envsync.findings import Report
    from envsync.repair import Rollback
    from envsync.service.host import ServiceRun
    from envsync.session import Session
    from envsync.watch import WatchRun

# What stdout could not take of a changing command's result lines (said once, at the end).
DROPPED: list[str] = []


def _to_stderr(line: str) -> None:
    """A line on stderr, or nothing when stderr cannot take it (progress is dropped)."""
    stream = sys.stderr
    if stream is None:
        return
    try:
        stream.write(line + "\n")
        stream.flush()
    except (OSError, ValueError):
        return


def err(message: str) -> None:
    # An error may quote a host's output (pip's, the service's): no secret gets through.
    _to_stderr(f"envsync: {printable(redact.text(message))}")


def note(quiet: bool, message: str) -> None:
    if not quiet:
        _to_stderr(printable(redact.text(message)))


def stdout_error(e: OSError | None) -> OutputError:
    why = "it is closed" if e is None else (e.strerror or str(e))
    return OutputError(
        f"stdout: cannot write the output: {why}",
        tip="write it to a file with -o FILE, or give stdout somewhere to go",
    )


def emit(text: str | Iterable[str], output: str | None) -> None:
    """Write the command's output (a string, or its pieces as they are made) to the -o
    file, all or nothing, or to stdout (OutputError when stdout cannot take it)."""
    if output:
        write_atomic(Path(output), text)
        return
    stream = sys.stdout
    if stream is None:
        raise stdout_error(None)
    try:
        write_pieces(stream, text)
        stream.flush()
    except BrokenPipeError:
        raise  # its reader is gone (`| head`): not an error of ours (main)
    except OSError as e:
        raise stdout_error(e) from e


def say(text: str) -> None:
    """A result line of a command that changed a host (a smoke test's verdict): shown on
    stdout when it can be; when not, the command's outcome stands and main says so."""
    stream = sys.stdout
    try:
        if stream is None:
            raise OSError("stdout is closed")
        stream.write(printable(redact.text(text)) + "\n")
        stream.flush()
    except (OSError, ValueError) as e:
        DROPPED.append(getattr(e, "strerror", None) or str(e))


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

    stream = sys.stdout
    color = (
        output is None
        and stream is not None
        and not stream.closed
        and stream.isatty()
        and "NO_COLOR" not in os.environ
    )
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
        say(f"{host}: not running (`envsync deploy {host}` starts it)")
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
        say(line)
        return ExitCode.OK
    if verdict.kind == "stalled":
        say(f"{host}: STALLED: {verdict.detail}; log tail:\n{indent(verdict.log_tail)}")
        return ExitCode.SMOKE
    say(f"{host}: CRASHED {run.took:.1f}s after start: {verdict.exception or verdict.detail}")
    diagnosis = run.diagnosis
    if diagnosis is not None:
        for line in diagnosis.notes:  # what collecting for the diagnosis said, in its turn
            session.note(line)
        if diagnosis.against:
            print(f"  traced against {diagnosis.against}")
        where = f"; last frame: {diagnosis.frame}" if diagnosis.frame else ""
        cause = diagnosis.cause
        if not diagnosis.import_error:
            say(f"  not an import error: envsync has no finding for it{where}")
        elif cause is None or cause.finding is None:
            say(f"  not drift: {cause.why_not if cause else ''}{where}")
        else:
            # The crash makes the finding fatal on this host (kept until it is next ready).
            say(f"  cause (fatal finding of envsync diff {diagnosis.reference} {host}):")
            say(f"    {cause.finding.reason}")
            if cause.finding.severity != "fatal":
                say(
                    f"    (read from the code it was {cause.finding.severity}; this crash makes "
                    f"it fatal on {host} until the service is next ready)"
                )
            for fix, command in cause.fixes:
                say(f"  fix: {fix.summary}")
                say(f"       next: {command}")
    if verdict.log_tail:
        say(f"log tail:\n{indent(verdict.log_tail)}")
    return ExitCode.SMOKE


def print_rollback(done: Rollback, session: Session) -> None:
    if done.already:
        session.note(f"{done.host}: nothing to roll back: {done.backup} is rolled back already")
        return
    what = ", ".join(done.dists) or "files only"
    session.note(f"{done.host}: restored {done.backup} ({what}): {done.changed} path(s) put back")


def backups_text(host: str, found: Sequence[BackupInfo]) -> str:
    """`rollback --list`: the host's backups, newest first, the one `rollback` undoes marked."""
    if not found:
        return f"{host}: no envsync backup in this environment\n"
    undoes = next((b.ident for b in reversed(found) if b.state != "rolled-back"), None)
    lines = [f"{host}: {len(found)} backup(s), newest first ('*': what `rollback` undoes)"]
    width = max(len(b.ident) for b in found)
    for b in reversed(found):
        mark = "*" if b.ident == undoes else " "
        what = b.summary or ", ".join(b.dists) or f"{b.files} file(s)"
        lines.append(f"{mark} {b.ident:<{width}}  {b.created or '?':<20}  {b.state:<11}  {what}")
    return printable("\n".join(lines)) + "\n"


def print_watch_run(run: WatchRun) -> None:
    """What changed in a watch run, at once (a journal or a pipe reads it as it comes)."""
    from envsync.watch import event_lines

    for line in event_lines(run):
        print(printable(redact.text(line)), flush=True)


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
