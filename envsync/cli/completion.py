"""Shell completion (argcomplete): commands, options, and HOST arguments from the inventory."""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from envsync.exitcodes import ExitCode

if TYPE_CHECKING:
    from envsync.sources.session import Session

SHELLS = ("bash", "zsh")
# Positionals that name a host: an inventory host, `local`, or a snapshot, lock or
# requirements file (what sources.resolve accepts).
HOST_METAVARS = ("HOST", "REF", "TGT")
HOST_FILES = (".json", ".lock", ".toml", ".txt", ".in")


def host_names(prefix: str, parsed_args: argparse.Namespace, **_: Any) -> list[str]:
    """The inventory's hosts (the one the line names with --inventory, else the usual
    one), then files a HOST may be; a broken inventory completes files only."""
    from argcomplete.completers import FilesCompleter

    from envsync.errors import EnvsyncError
    from envsync.sources.inventory import LOCAL, load_inventory

    try:
        names = sorted(load_inventory(getattr(parsed_args, "inventory", None), os.environ).hosts)
    except EnvsyncError:
        names = [LOCAL]
    files = FilesCompleter(allowednames=[s.lstrip(".") for s in HOST_FILES])(prefix)
    return [n for n in names if n.startswith(prefix)] + list(files)


def _host_actions(parser: argparse.ArgumentParser) -> Iterator[argparse.Action]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from _host_actions(sub)
        elif not action.option_strings and action.metavar in HOST_METAVARS:
            yield action


def complete(parser: argparse.ArgumentParser) -> None:
    """Answer the shell and exit when it asks for completions (argcomplete sets
    _ARGCOMPLETE); otherwise return at once, importing nothing."""
    if "_ARGCOMPLETE" not in os.environ:
        return
    import argcomplete

    for action in _host_actions(parser):
        action.completer = host_names  # type: ignore[attr-defined]
    argcomplete.autocomplete(parser)


def script(shell: str) -> str:
    """The script that makes `shell` ask envsync itself for completions."""
    from argcomplete.shell_integration import shellcode

    return shellcode(["envsync"], shell=shell)


def add_command(sub: Any) -> None:
    """`envsync completion bash|zsh`: print the script to source from the shell's rc file."""
    from functools import partial

    from envsync.cli import options

    p = sub.add_parser(
        "completion",
        help='print the shell completion script: eval "$(envsync completion bash)"',
    )
    p.add_argument("shell", choices=SHELLS)
    p.set_defaults(build=partial(options.completion, command=_cmd_completion))


def _cmd_completion(shell: str, session: Session) -> ExitCode:
    from envsync.cli.output import emit

    emit(script(shell), None)
    return ExitCode.OK
