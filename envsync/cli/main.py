"""Run one envsync command: parse, build the Context, map errors to exit codes."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from collections.abc import Sequence

from envsync.cli.completion import complete
from envsync.cli.context import JOBS, Context
from envsync.cli.output import err
from envsync.cli.parser import build_parser
from envsync.collect import DEFAULT_TIMEOUT, ProbeOptions
from envsync.errors import EnvsyncError
from envsync.exitcodes import ExitCode
from envsync.inventory import load_inventory
from envsync.runner import CONNECT_TIMEOUT, Runners


def _context(args: argparse.Namespace, runners: Runners) -> Context:
    """The command's typed context: the one place that reads options every command shares."""
    return Context(
        inventory=load_inventory(getattr(args, "inventory", None), os.environ),
        runners=runners,
        quiet=getattr(args, "quiet", False),
        probe=ProbeOptions(
            deep=getattr(args, "deep", False),
            timeout=getattr(args, "timeout", DEFAULT_TIMEOUT),
            cache_dir="" if getattr(args, "no_cache", False) else None,
        ),
        allow_broken=getattr(args, "allow_broken", False),
        jobs=getattr(args, "jobs", JOBS),
    )


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
    runners = Runners(
        accept_new=getattr(args, "accept_new_host_keys", False),
        connect_timeout=getattr(args, "connect_timeout", CONNECT_TIMEOUT),
    )
    try:
        return int(args.func(args, _context(args, runners)))
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
