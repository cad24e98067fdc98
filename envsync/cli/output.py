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

import argparse
import os
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from envsync import redact
from envsync.documents import check_writable, write_atomic, write_pieces
from envsync.errors import OutputError
from envsync.exitcodes import ExitCode
from envsync.model.printable import printable
from envsync.model.vocab import FAIL_ON_DEFAULT, Severity

if TYPE_CHECKING:
    from envsync.compare.classes import HostClass
    from envsync.compare.targets import CheckResult, FleetComparison
    from envsync.model.findings import Report
    from envsync.repair.canary import Outcome, Rollout
    from envsync.repair.run import RepairOptions, Rollback
    from envsync.report.watch import WatchRun
    from envsync.runner.agent import BackupInfo
    from envsync.service.host import ServiceRun
    from envsync.sources.session import Session

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
    classes: Sequence[HostClass] | None = None,
    fail_on: Severity = FAIL_ON_DEFAULT,
    unreachable: Sequence[str] = (),
    servers: Sequence[Report] = (),
) -> str:
    """Reports in `fmt`, coloured when they go to a terminal, as wide as report_width says;
    `fleet`: several targets folded into classes (`classes`, as compared), in the formats
    that have a fleet view; `fail_on`: what fails a JUnit case. The Prometheus textfile
    also takes the hosts' digests (`classes`), the hosts not collected and the servers'
    gates."""
    from envsync.report import FLEET_FORMATS, render_fleet
    from envsync.report import render as render_reports

    if fmt == "prometheus":
        from envsync.report.prometheus import textfile

        digests = {h: c.digest for c in classes or () for h in c.hosts}
        return textfile(
            reports,
            digests=digests,
            fail_on=fail_on,
            unreachable=unreachable,
            servers=servers,
            now=time.time(),
        )
    stream = sys.stdout
    color = (
        output is None
        and stream is not None
        and not stream.closed
        and stream.isatty()
        and "NO_COLOR" not in os.environ
    )
    width = report_width(stream, os.environ)
    if fleet and fmt in FLEET_FORMATS:
        return render_fleet(fmt, reports, classes=classes, color=color, width=width)
    return render_reports(fmt, reports, color=color, width=width, fail_on=fail_on)


def report_width(stream: TextIO | None, environ: Mapping[str, str]) -> int:
    """The width a table is laid out for: $COLUMNS when it is a number, else the width of
    the terminal `stream` is, else the stable default (report.DEFAULT_WIDTH)."""
    from envsync.report import DEFAULT_WIDTH

    columns = environ.get("COLUMNS", "").strip()
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    if stream is not None and not stream.closed and stream.isatty():
        try:
            return os.get_terminal_size(stream.fileno()).columns or DEFAULT_WIDTH
        except (OSError, ValueError):
            return DEFAULT_WIDTH
    return DEFAULT_WIDTH


def apply_line(options: RepairOptions, reference: str, target: str) -> str:
    """The command that applies the plan `repair` just printed: the saved plan itself when
    it was saved (refused if the target changed since), else the same command with --apply."""
    import shlex

    from envsync.model.vocab import ONLY_DEFAULT, PREFER

    if options.save is not None:
        # the saved plan, with the options as they were given (--inventory, --no-deploy,
        # --deadline ...), less what made the plan (the hosts, -o, --prefer, --only)
        kept = _apply_words(INVOKED, REPAIR_VALUED)
        words = ["envsync", *kept, "--plan", str(options.save), "--apply"]
        if "repair" not in kept:
            words.insert(1, "repair")
        return "to apply it: " + " ".join(shlex.quote(w) for w in words)
    if INVOKED and "repair" in INVOKED:
        words = ["envsync", *INVOKED, "--apply"]  # the command as it was given, every option
    else:  # not run from a command line (the library): what the options say
        words = ["envsync", "repair", reference, target]
        if options.prefer != PREFER[0]:
            words += ["--prefer", options.prefer]
        if options.only != ONLY_DEFAULT:
            words += ["--only", options.only]
        for sizes in options.batch:
            words += ["--batch", sizes]
        if options.max_fail != "0":
            words += ["--max-fail", options.max_fail]
        words.append("--apply")
    return "to apply it: " + " ".join(shlex.quote(w) for w in words)


INVOKED: list[str] = []  # the command line of this run, as it was given (cli/main.py)


PLANNING = ("-o", "--output", "--prefer", "--only")  # what made the plan, not what applies it


def valued_options(parser: argparse.ArgumentParser, command: str) -> set[str]:
    """The options of `command` in `parser` that take a value (cli/main.py keeps repair's in
    REPAIR_VALUED: this module is below the parser and does not build it)."""
    found: set[str] = set()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            sub = action.choices.get(command)
            for inner in sub._actions if sub is not None else ():
                if inner.option_strings and inner.nargs != 0:
                    found.update(inner.option_strings)
    return found


REPAIR_VALUED: set[str] = set()  # repair's options that take a value (cli/main.py)


def _apply_words(argv: list[str], takes_value: set[str]) -> list[str]:
    """`argv` of a `repair` run that saved its plan, less the hosts it named and the
    options that made the plan: what applying the saved plan takes as it was given."""
    if "repair" not in argv:
        return []
    at = argv.index("repair")
    out = argv[: at + 1]
    words = iter(argv[at + 1 :])
    for word in words:
        name = word.split("=", 1)[0]
        if name in PLANNING:
            if "=" not in word and name in takes_value:
                next(words, None)
            continue
        if not word.startswith("-"):
            continue  # REF, TGT: the plan names them
        out.append(word)
        if "=" not in word and name in takes_value:
            value = next(words, None)
            if value is not None:
                out.append(value)
    return out


def check_line(result: CheckResult, lock: str) -> str:
    """What `check` compared, and its verdict, in one line."""
    from envsync.model.nodeset import fold

    hosts = fold([r.target for r in result.reports]) or "no host"
    line = f"check: compared {hosts} with {lock}"
    named = sorted({r.reference for r in result.reports} - {lock})
    if named:
        line += f" ({', '.join(named)})"
    if result.unreachable:
        line += f"; {fold(result.unreachable)} not collected"
    count = len(result.blocking)
    line += (
        f"; {count} finding(s) at or above {result.fail_on}"
        if count
        else (f"; no finding at or above {result.fail_on}")
    )
    return line + (": failing" if count or result.failures else ": passing")


def note_classes(session: Session, fleet: FleetComparison) -> None:
    """The summary of a fleet on stderr: a line per host while each host is a class of
    its own, else a line per class (1,000 hosts in 12 classes: 12 lines)."""
    from envsync.report.fleet import build_fleet

    if all(len(c.hosts) == 1 for c in fleet.classes):
        for report in fleet.reports:
            session.note(report.summary_line())
        return
    for row in build_fleet(fleet.reports, fleet.classes).classes:
        session.note(f"{row.line()} against {row.report.reference}")


def indent(text: str) -> str:
    return "\n".join("  " + line for line in text.splitlines())


def writable(path: str | None) -> None:
    """Fail before a long collection when an output can never be written."""
    if path:
        check_writable(Path(path))


def warn_pylock_name(output: str | None) -> None:
    from envsync.sources.locks.pylock import FILE_NAME

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
            say(f"  traced against {diagnosis.against}")
        where = f"; last frame: {diagnosis.frame}" if diagnosis.frame else ""
        cause = diagnosis.cause
        if cause.finding is None:
            say(f"  not drift: {cause.why_not}{where}")
        else:
            # The crash makes the finding fatal on this host (kept until it is next ready).
            say(f"  cause (fatal finding of envsync diff {diagnosis.reference} {host}):")
            say(f"    {cause.finding.reason}")
            if cause.how and not cause.how.startswith("`" + (verdict.exception or "")):
                say(f"    (traced through the traceback: {cause.how})")
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


def print_rollout(done: Rollout, apply_hint: str | None = None) -> ExitCode:
    """A fleet's repair: the plan of each class, then what each batch did and which hosts
    changed (or, not applied, `apply_hint`: the command that applies it); the command's
    exit code."""
    from envsync.model.nodeset import fold
    from envsync.repair.plan import describe

    for planned in done.plans:
        head = f"class {planned.nodeset} ({len(planned.hosts)} host(s)): "
        if planned.plan is None:
            print(head + f"no plan: {planned.why}")
        elif not planned.plan.steps:
            print(head + "nothing to do")
        else:
            print(head + f"{len(planned.plan.steps)} step(s)")
            print(indent(describe(planned.plan)))
    if not done.applied:
        pending = any(p.plan is not None and p.plan.steps for p in done.plans)
        if pending and apply_hint:
            print(f"\n{apply_hint}")
        return ExitCode.DRIFT if pending else ExitCode.OK
    for n, batch in enumerate(done.batches, 1):
        print(f"batch {n}/{done.planned} {fold(batch.hosts)}:")
        for result in batch.results:
            print(f"  {result.host}: {result.outcome}: {result.detail}")
    if done.stopped:
        print(f"stopped at batch {len(done.batches)} of {done.planned}")
    words: tuple[Outcome, ...] = ("changed", "rolled-back", "failed", "unchanged", "not-run")
    print("; ".join(f"{w}: {fold(done.hosts(w))}" for w in words if done.hosts(w)))
    if done.stopped or done.hosts("failed"):
        return ExitCode.APPLY
    if done.hosts("not-run"):
        return ExitCode.COLLECT
    return ExitCode.OK


def print_rollback(done: Rollback, session: Session) -> None:
    if done.already:
        session.note(f"{done.host}: nothing to roll back: {done.backup} is rolled back already")
        return
    what = ", ".join(done.dists) or "files only"
    session.note(f"{done.host}: restored {done.backup} ({what}): {done.changed} path(s) put back")
    if done.found:
        shown = ", ".join(done.found[:5]) + (
            f" and {len(done.found) - 5} more" if len(done.found) > 5 else ""
        )
        session.note(
            f"{done.host}: kept what appeared during the apply that it did not write: {shown}"
        )


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
    from envsync.report.watch import event_lines

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
