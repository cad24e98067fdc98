"""Run one envsync command: parse, build the Session, map errors to exit codes."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import IO

from envsync.cli import output
from envsync.cli.completion import complete
from envsync.cli.options import Invocation, SessionOptions
from envsync.cli.output import err, note
from envsync.cli.parser import build_parser
from envsync.cli.ranges import check_environment
from envsync.errors import EnvsyncError
from envsync.exitcodes import ExitCode
from envsync.runner import Runners, stop_all
from envsync.sources.inventory import load_inventory
from envsync.sources.session import Session


def _tty(stream: IO[str] | None) -> bool:
    return stream is not None and not stream.closed and stream.isatty()


def _session(options: SessionOptions, runners: Runners) -> Session:
    """The command's session: notes printed unless --quiet, a progress bar on a terminal."""
    inventory = load_inventory(options.inventory, os.environ)
    engine = None
    if options.engine == "ansible":
        from envsync.ansible.engine import AnsibleEngine

        engine = AnsibleEngine(
            inventory=inventory, forks=options.jobs, accept_new=options.accept_new_host_keys
        )
    return Session(
        inventory=inventory,
        engine=engine,
        runners=runners,
        probe=options.probe,
        allow_broken=options.allow_broken,
        jobs=options.jobs,
        notes=lambda message: note(options.quiet, message),
        progress=_bar if _tty(sys.stderr) and not options.quiet else None,
        # a host's past is that of what it is (its identity), not of its name
        states=options.states.bound(inventory.hosts.values()) if options.states else None,
    )


@contextlib.contextmanager
def _bar(total: int) -> Iterator[Callable[[], None]]:
    """rich's progress bar on stderr, gone once the hosts are collected."""
    from rich.console import Console
    from rich.progress import Progress as Bar

    with Bar(transient=True, console=Console(stderr=True)) as bar:
        task = bar.add_task("collecting", total=total)
        yield lambda: bar.advance(task)


class _Terminated(KeyboardInterrupt):
    """SIGTERM, handled like Ctrl-C: an apply rolls back and the target's lock is released."""


def _terminate(signum: int, frame: object) -> None:
    stop_all()  # the collections of other threads end too (an apply's commands run on)
    raise _Terminated


def _standard_streams() -> None:
    """A closed stdin, stdout or stderr (`>&-`) gets /dev/null under it, so that no file
    envsync opens (an archive, a pipe to a host) takes its number and a child's output
    lands in it; sys.stdout/stderr stay None, which the output says."""
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            null = os.open(os.devnull, os.O_RDWR)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)


def _quiet_stdout() -> None:
    """stdout failed (its reader gone, the disk full): what is left in its buffer is
    dropped, so that the interpreter's exit does not fail on it again."""
    null = os.open(os.devnull, os.O_WRONLY)
    with contextlib.suppress(OSError):
        os.dup2(null, 1)
    os.close(null)


def main(argv: Sequence[str] | None = None) -> int:
    _standard_streams()
    if threading.current_thread() is not threading.main_thread():
        return _main(argv)
    previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        return _main(argv)
    finally:
        signal.signal(signal.SIGTERM, previous)


def _main(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    complete(parser)  # the shell asking for completions: answered, and the process ends
    args = parser.parse_args(argv)
    invocation: Invocation = args.build(args)
    output.INVOKED[:] = list(sys.argv[1:] if argv is None else argv)
    output.REPAIR_VALUED.update(output.valued_options(parser, "repair"))
    runners = Runners(
        accept_new=invocation.session.accept_new_host_keys,
        connect_timeout=invocation.session.connect_timeout,
    )
    output.DROPPED.clear()
    try:
        check_environment(os.environ)
        code = int(invocation.run(_session(invocation.session, runners)))
    except EnvsyncError as e:
        err(str(e))
        return int(e.exit_code)
    except KeyboardInterrupt as e:
        err("terminated" if isinstance(e, _Terminated) else "interrupted")
        return 143 if isinstance(e, _Terminated) else 130
    except BrokenPipeError:
        # stdout's reader is gone (`| head`): not an error of ours.
        _quiet_stdout()
        return int(ExitCode.OK)
    finally:
        runners.close()
    if output.DROPPED:
        # A changing command's result that stdout could not take: its outcome stands.
        _quiet_stdout()
        err(
            f"stdout: cannot show the result ({output.DROPPED[0]}); "
            f"the command's outcome is its exit code, {code}"
        )
    return code
