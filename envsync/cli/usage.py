"""Usage errors in one line: the command, the bad token and the nearest valid choice.

argparse answers a mistake with the whole usage block (8 lines for `diff`), and reports an
unknown option of a command as the top level's ("envsync: error: unrecognized arguments").
`Parser` says it as `envsync diff: unknown option --formt (did you mean --format?)`, with
one tip line under it, exit 2; `--help` is argparse's own, in full.
"""

from __future__ import annotations

import argparse
import difflib
import re
import sys
from collections.abc import Iterable, Sequence
from typing import NoReturn

from envsync.exitcodes import ExitCode
from envsync.model.printable import printable


def _long(names: str) -> str:
    """An action's name as argparse writes it (`-j/--jobs`), said by its long form."""
    parts = names.split("/")
    return next((p for p in parts if p.startswith("--")), parts[-1])


def _quoted(text: str) -> list[str]:
    """The choices argparse lists: quoted (3.11, 3.12) or bare (3.13+)."""
    found = re.findall(r"'((?:[^'\\]|\\.)*)'", text)
    return found or [c.strip() for c in text.split(",") if c.strip()]


def nearest(word: str, choices: Iterable[str]) -> str | None:
    """The valid choice closest to `word`, when one is close enough to be what was meant."""
    folded = {c.lower(): c for c in choices}
    found = difflib.get_close_matches(word.lower(), list(folded), n=1, cutoff=0.6)
    return folded[found[0]] if found else None


def _mean(word: str, choices: Iterable[str]) -> str:
    close = nearest(word, choices)
    return f" (did you mean {close}?)" if close else ""


def _options(parser: argparse.ArgumentParser) -> list[str]:
    """The options `--help` shows (the hidden old names are accepted, never suggested)."""
    return [
        name
        for action in parser._actions
        if action.help != argparse.SUPPRESS
        for name in action.option_strings
    ]


def _commands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _with_metavar(parser: argparse.ArgumentParser, name: str) -> str:
    """`--lock` as `--lock FILE`: an option with what it takes."""
    for action in parser._actions:
        if name in action.option_strings and action.metavar:
            return f"{name} {action.metavar}"
    return name


def _positionals(parser: argparse.ArgumentParser) -> str:
    words = []
    for action in parser._actions:
        if action.option_strings or isinstance(action, argparse._SubParsersAction):
            continue
        name = str(action.metavar or action.dest)
        words.append(
            f"[{name}]" if action.nargs in ("?", "*") else f"{name}..." if action.nargs else name
        )
    return " ".join(words) or "no arguments"


def _unknown(parser: argparse.ArgumentParser, tokens: Sequence[str], top: Parser) -> str:
    first = tokens[0]
    if not first.startswith("-") or first == "-":
        return f"unexpected argument {first!r} (it takes {_positionals(parser)})"
    option = first.split("=", 1)[0]
    close = nearest(option, _options(parser))
    if close:
        return f"unknown option {option} (did you mean {close}?)"
    elsewhere = [name for name, sub in _commands(top).items() if option in _options(sub)]
    if elsewhere:
        return f"unknown option {option} (it is an option of {', '.join(elsewhere)})"
    return f"unknown option {option}"


def explain(parser: argparse.ArgumentParser, message: str, top: Parser) -> str:
    """argparse's `message` about `parser`'s command line as one line (without the prog)."""
    if m := re.match(r"unrecognized arguments: (.*)", message):
        return _unknown(parser, m.group(1).split(" "), top)
    if m := re.match(r"argument (\S+): invalid choice: '(.*?)' \(choose from (.*)\)$", message):
        what, value, choices = _long(m.group(1)), m.group(2), _quoted(m.group(3))
        if what in ("COMMAND", "command"):
            return (
                f"no command {value!r}{_mean(value, choices)}; the commands: {', '.join(choices)}"
            )
        return f"{what} {value!r} is not one of {', '.join(choices)}{_mean(value, choices)}"
    if m := re.match(r"argument (\S+): expected one argument", message):
        what = _long(m.group(1))
        metavar = next(
            (a.metavar for a in parser._actions if what in a.option_strings and a.metavar), None
        )
        return f"{what} needs a value" + (f" ({metavar})" if metavar else "")
    if m := re.match(r"argument (\S+): invalid (\w+) value: '(.*)'$", message):
        kinds = {"int": "a whole number", "float": "a number"}
        what, value = _long(m.group(1)), m.group(3)
        return f"{what} {value!r} is not {kinds.get(m.group(2), 'valid')}"
    if m := re.match(r"the following arguments are required: (.*)", message):
        missing = m.group(1)
        if missing in ("COMMAND", "command"):
            return f"name a command: {', '.join(_commands(parser))}"
        return f"missing {', '.join(_with_metavar(parser, n) for n in missing.split(', '))}"
    if m := re.match(r"one of the arguments (.*) is required", message):
        return f"one of {' or '.join(m.group(1).split(' '))} is required"
    if m := re.match(r"argument (\S+): not allowed with argument (\S+)", message):
        return f"{_long(m.group(1))} and {_long(m.group(2))} do not go together"
    if m := re.match(r"ambiguous option: (\S+) could match (.*)", message):
        return f"{m.group(1).split('=', 1)[0]} is ambiguous: it could be {m.group(2)}"
    if m := re.match(r"argument (\S+): ignored explicit argument '(.*)'", message):
        return f"{_long(m.group(1))} takes no value (given {m.group(2)!r})"
    if m := re.match(r"argument (\S+): (.*)", message):
        return f"{_long(m.group(1))}: {m.group(2)}"
    return message


class Parser(argparse.ArgumentParser):
    """argparse, with usage errors in one line plus a tip line (exit 2), each said by the
    command whose line it is (`link` tells the commands their top level)."""

    top: Parser | None = None

    def parse_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> argparse.Namespace:
        argv = list(sys.argv[1:] if args is None else args)
        if self.top is None:
            self._before_the_command(argv)
        parsed, extras = self.parse_known_args(argv, namespace)
        if extras:
            # A command's unknown option reaches the top level: said as the command's.
            sub = _commands(self).get(getattr(parsed, "command", None) or "", self)
            sub.error(f"unrecognized arguments: {' '.join(extras)}")
        return parsed

    def _before_the_command(self, argv: Sequence[str]) -> None:
        """An unknown option before the command is said as one (argparse would take the
        word after it for the command)."""
        options = self._option_string_actions
        words = iter(argv)
        for word in words:
            if not word.startswith("-") or word == "--":
                return
            name = word.split("=", 1)[0]
            known = [o for o in options if o == name] or [o for o in options if o.startswith(name)]
            if len(known) != 1:
                self.error(f"unrecognized arguments: {word}")
            if options[known[0]].nargs != 0 and "=" not in word:
                next(words, None)

    def error(self, message: str) -> NoReturn:
        top = self.top or self
        line = f"{self.prog}: {explain(self, message, top)}"
        what = "lists the commands" if top is self else "shows its options"
        tip = f"Tip: `{self.prog} --help` {what}"
        sys.stderr.write(printable(f"{line}\n{tip}\n"))
        sys.exit(int(ExitCode.USAGE))


def link(parser: Parser) -> Parser:
    """Tell each command of `parser` that `parser` is its top level."""
    for sub in _commands(parser).values():
        if isinstance(sub, Parser):
            sub.top = parser
    return parser
