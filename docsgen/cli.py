"""The command-line reference, read from the real argparse parser (never a copy of it)."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from dataclasses import dataclass

from envsync.cli.parser import build_parser


@dataclass(frozen=True, slots=True, kw_only=True)
class Command:
    name: str
    help: str
    parser: argparse.ArgumentParser


def commands(parser: argparse.ArgumentParser) -> tuple[Command, ...]:
    """The parser's subcommands in the order it defines them, with their one-line help."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            return tuple(
                Command(name=name, help=helps.get(name, ""), parser=sub)
                for name, sub in action.choices.items()
                if helps.get(name) != argparse.SUPPRESS
            )
    return ()


def shown(parser: argparse.ArgumentParser) -> Iterator[argparse.Action]:
    """The arguments `--help` shows: neither the subcommand list nor hidden aliases."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) or action.help == argparse.SUPPRESS:
            continue
        yield action


def _cell(text: str) -> str:
    """Text for a Markdown table cell: pipes and angle brackets are not markup there."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("|", "\\|")


def _help(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    """The help as argparse prints it (with %(default)s and friends filled in)."""
    if not action.help:
        return ""
    formatter = parser._get_formatter()
    return " ".join(formatter._expand_help(action).split())


def invocation(action: argparse.Action) -> str:
    """`-o FILE, --output FILE` for an option, `HOST...` for a positional."""
    metavar = action.metavar if isinstance(action.metavar, str) else None
    if not action.option_strings:
        name = metavar or action.dest
        if action.nargs in ("+", "*"):
            name += "..."
        return f"[{name}]" if action.nargs in ("?", "*") else name
    if action.nargs == 0:
        return ", ".join(action.option_strings)
    value = metavar or (
        "{" + ",".join(map(str, action.choices)) + "}" if action.choices else action.dest.upper()
    )
    return ", ".join(f"{opt} {value}" for opt in action.option_strings)


def _default(action: argparse.Action) -> str:
    if action.option_strings and action.nargs == 0:
        return ""
    if action.default in (None, argparse.SUPPRESS, False) or action.required:
        return "required" if action.required else ""
    default = action.default
    return f"`{default:g}`" if isinstance(default, float) else f"`{default}`"


def _table(parser: argparse.ArgumentParser, actions: list[argparse.Action]) -> list[str]:
    rows = ["| argument | meaning | choices | default |", "| --- | --- | --- | --- |"]
    for action in actions:
        if isinstance(action, argparse._HelpAction):
            continue
        choices = ", ".join(f"`{c}`" for c in action.choices) if action.choices else ""
        rows.append(
            f"| `{_cell(invocation(action))}` | {_cell(_help(parser, action))} | {choices} "
            f"| {_default(action)} |"
        )
    return rows


def _usage(parser: argparse.ArgumentParser) -> str:
    return " ".join(parser.format_usage().split()).removeprefix("usage: ")


def _globals(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [a for a in shown(parser) if not isinstance(a, argparse._HelpAction)]


def reference_markdown(parser: argparse.ArgumentParser | None = None) -> str:
    """The whole CLI reference page: usage, every command, each of its arguments."""
    parser = parser or build_parser()
    out = [
        f"`{_usage(parser)}`",
        "",
        parser.description or "",
        "",
        "## Global options",
        "",
        "Accepted before or after the command.",
        "",
        *_table(parser, _globals(parser)),
        "",
        "## Commands",
        "",
        "| command | does |",
        "| --- | --- |",
    ]
    out += [f"| [`{c.name}`](#envsync-{c.name}) | {_cell(c.help)} |" for c in commands(parser)]
    global_options = {opt for a in _globals(parser) for opt in a.option_strings}
    for command in commands(parser):
        own = [
            a
            for a in shown(command.parser)
            if not set(a.option_strings) & global_options
            and not isinstance(a, argparse._HelpAction)
        ]
        out += [
            "",
            f"## envsync {command.name} {{#envsync-{command.name}}}",
            "",
            f"{command.help[:1].upper()}{command.help[1:]}.",
            "",
            "```",
            _usage(command.parser),
            "```",
            "",
            *_table(command.parser, own),
        ]
        if command.parser.epilog:
            out += ["", command.parser.epilog]
    if parser.epilog:
        out += ["", "## Notes", "", parser.epilog]
    return "\n".join(out) + "\n"
