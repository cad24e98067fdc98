"""Run one envsync command: parse, build the Session, map errors to exit codes."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Sequence

from envsync.cli.completion import complete
from envsync.cli.options import Invocation, SessionOptions
from envsync.cli.output import err, note
from envsync.cli.parser import build_parser
from envsync.errors import EnvsyncError
from envsync.exitcodes import ExitCode
from envsync.inventory import load_inventory
from envsync.runner import Runners
from envsync.session import Session


def _session(options: SessionOptions, runners: Runners) -> Session:
    """The command's session: notes printed unless --quiet, a progress bar on a terminal."""
    return Session(
        inventory=load_inventory(options.inventory, os.environ),
        runners=runners,
        probe=options.probe,
        allow_broken=options.allow_broken,
        jobs=options.jobs,
        notes=lambda message: note(options.quiet, message),
        progress=_bar if sys.stderr.isatty() and not options.quiet else None,
        states=options.states,
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
    raise _Terminated


def main(argv: Sequence[str] | None = None) -> int:
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
    runners = Runners(
        accept_new=invocation.session.accept_new_host_keys,
        connect_timeout=invocation.session.connect_timeout,
    )
    try:
        return int(invocation.run(_session(invocation.session, runners)))
    except EnvsyncError as e:
        err(str(e))
        return int(e.exit_code)
    except KeyboardInterrupt as e:
        err("terminated" if isinstance(e, _Terminated) else "interrupted")
        return 143 if isinstance(e, _Terminated) else 130
    except BrokenPipeError:
        # stdout closed early (e.g. `| head`): not an error of ours.
        sys.stderr.close()
        return int(ExitCode.OK)
    finally:
        runners.close()
