"""Usage errors: 20 kinds of mistake sent to every command, each answered in one line
(plus one tip line) that names the command, the bad token and the nearest valid choice,
exit 2; `--help` stays argparse's whole (issue 34, point 3)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass

import pytest

from envsync.cli import main
from envsync.cli.parser import build_parser

PARSER = build_parser()
COMMANDS: dict[str, argparse.ArgumentParser] = next(
    dict(a.choices) for a in PARSER._actions if isinstance(a, argparse._SubParsersAction)
)


@dataclass(frozen=True, kw_only=True)
class Mistake:
    argv: list[str]
    token: str  # what the line must name
    mean: str | None = None  # the nearest valid choice it must offer
    said_by: str | None = None  # the prog that says it (default: the command's)


Kind = Callable[[str, argparse.ArgumentParser], Mistake | None]


def visible(p: argparse.ArgumentParser) -> list[argparse.Action]:
    return [a for a in p._actions if a.option_strings and a.help != argparse.SUPPRESS]


def longs(p: argparse.ArgumentParser) -> list[str]:
    return [s for a in visible(p) for s in a.option_strings if s.startswith("--")]


def valued(p: argparse.ArgumentParser, test: Callable[[argparse.Action], bool]) -> str | None:
    for a in visible(p):
        skip = (argparse._StoreConstAction, argparse._HelpAction, argparse._VersionAction)
        if a.nargs is None and not isinstance(a, skip) and test(a):
            return next(s for s in a.option_strings if s.startswith("--"))
    return None


def positionals(p: argparse.ArgumentParser) -> list[argparse.Action]:
    return [a for a in p._actions if not a.option_strings]


def required_words(p: argparse.ArgumentParser) -> list[str]:
    words = []
    for a in positionals(p):
        if a.nargs in (None, "+"):
            words.append(next(iter(a.choices)) if a.choices else "h1")
    for a in p._actions:
        if a.option_strings and a.required:
            words += [a.option_strings[-1], "x.lock"]
    for group in p._mutually_exclusive_groups:
        if group.required:
            words.append("--once")
    return words


def dropped(word: str) -> str:
    """`word` with a letter from its middle gone: a typo that is no prefix of it."""
    middle = len(word) // 2 + 1
    return word[:middle] + word[middle + 1 :]


def misspelled_option(c: str, p: argparse.ArgumentParser) -> Mistake | None:
    option = max(longs(p), key=len)
    typo = dropped(option)
    return Mistake(argv=[c, *required_words(p), typo], token=typo, mean=option)


def misspelled_option_with_value(c: str, p: argparse.ArgumentParser) -> Mistake | None:
    option = valued(p, lambda a: True)
    if option is None:
        return None
    typo = dropped(option)
    return Mistake(argv=[c, *required_words(p), f"{typo}=v"], token=typo, mean=option)


def unknown_long(c: str, p: argparse.ArgumentParser) -> Mistake:
    return Mistake(argv=[c, *required_words(p), "--zzyzx"], token="--zzyzx")


def unknown_short(c: str, p: argparse.ArgumentParser) -> Mistake:
    return Mistake(argv=[c, *required_words(p), "-Z"], token="-Z")


def value_missing_at_the_end(c: str, p: argparse.ArgumentParser) -> Mistake:
    return Mistake(argv=[c, *required_words(p), "--inventory"], token="--inventory")


def value_eaten_by_an_option(c: str, p: argparse.ArgumentParser) -> Mistake:
    return Mistake(argv=[c, *required_words(p), "--inventory", "--quiet"], token="--inventory")


def _numeric(action: argparse.Action) -> bool:
    """An option that takes a number: checked for its range (envsync/cli/ranges.py)."""
    return getattr(action.type, "__module__", None) == "envsync.cli.ranges"


def not_a_number(c: str, p: argparse.ArgumentParser) -> Mistake | None:
    option = valued(p, _numeric)
    if option is None:
        return None
    return Mistake(argv=[c, *required_words(p), option, "many"], token="many")


def not_a_choice(c: str, p: argparse.ArgumentParser) -> Mistake | None:
    option = valued(p, lambda a: bool(a.choices))
    if option is None:
        return None
    return Mistake(argv=[c, *required_words(p), option, "zzyzx"], token="zzyzx")


def misspelled_choice(c: str, p: argparse.ArgumentParser) -> Mistake | None:
    for a in visible(p):
        if a.choices and a.option_strings[-1].startswith("--"):
            choice = max(a.choices, key=len)
            if len(choice) >= 5:
                typo = dropped(choice)
                return Mistake(
                    argv=[c, *required_words(p), a.option_strings[-1], typo],
                    token=typo,
                    mean=choice,
                )
    return None


def refused_by_its_type(c: str, p: argparse.ArgumentParser) -> Mistake | None:
    """A value the option's own type refuses (a duration, a positive count)."""
    option = valued(p, lambda a: callable(a.type) and a.type not in (int, float, str))
    if option is None:
        return None
    return Mistake(argv=[c, *required_words(p), option, "5parsecs"], token="5parsecs")


def flag_given_a_value(c: str, p: argparse.ArgumentParser) -> Mistake:
    return Mistake(argv=[c, *required_words(p), "--quiet=yes"], token="--quiet")


def help_given_a_value(c: str, p: argparse.ArgumentParser) -> Mistake:
    return Mistake(argv=[c, "--help=all"], token="--help")


def ambiguous_prefix(c: str, p: argparse.ArgumentParser) -> Mistake | None:
    options = longs(p)
    for option in options:
        for end in range(3, len(option)):
            prefix = option[:end]
            if prefix not in options and sum(o.startswith(prefix) for o in options) > 1:
                return Mistake(argv=[c, *required_words(p), prefix], token=prefix)
    return None


def one_word_too_many(c: str, p: argparse.ArgumentParser) -> Mistake | None:
    if any(a.nargs in ("*", "+") for a in positionals(p)):
        return None
    words = [a for a in positionals(p) if a.nargs in (None, "?")]
    fill = [next(iter(a.choices)) if a.choices else f"h{i}" for i, a in enumerate(words)]
    return Mistake(argv=[c, *fill, "surplus"], token="surplus")


def required_left_out(c: str, p: argparse.ArgumentParser) -> Mistake | None:
    words = required_words(p)
    if not words:
        return None
    missing = next(
        (str(a.metavar or a.dest) for a in positionals(p) if a.nargs in (None, "+")),
        None,
    ) or next((w for w in words if w.startswith("--")), None)
    assert missing is not None
    return Mistake(argv=[c], token=missing.lstrip("-")[:4])


def two_that_exclude_each_other(c: str, p: argparse.ArgumentParser) -> Mistake | None:
    for group in p._mutually_exclusive_groups:
        first, second = group._group_actions[:2]
        argv = [c, *[w for w in required_words(p) if w != "--once"]]
        for a in (first, second):
            argv += [a.option_strings[-1]] + ([] if a.nargs == 0 else ["1m"])
        return Mistake(argv=argv, token=first.option_strings[-1])
    return None


def another_commands_option(c: str, p: argparse.ArgumentParser) -> Mistake | None:
    mine = set(longs(p))
    for other, q in COMMANDS.items():
        if other != c:
            for option in longs(q):
                unknown = option not in mine and not any(m.startswith(option) for m in mine)
                if unknown and len(option) > 5:
                    return Mistake(argv=[c, *required_words(p), option], token=other)
    return None


def misspelled_command(c: str, p: argparse.ArgumentParser) -> Mistake:
    typo = c[:-1] if len(c) > 4 else c + c[-1]
    return Mistake(argv=[typo], token=repr(typo), mean=c, said_by="envsync")


def command_in_capitals(c: str, p: argparse.ArgumentParser) -> Mistake:
    return Mistake(argv=[c.upper()], token=repr(c.upper()), mean=c, said_by="envsync")


def top_level_option_misspelled_before_the_command(c: str, p: argparse.ArgumentParser) -> Mistake:
    return Mistake(
        argv=["--inventry", "x.toml", c], token="--inventry", mean="--inventory", said_by="envsync"
    )


KINDS: tuple[Kind, ...] = (
    misspelled_option,
    misspelled_option_with_value,
    unknown_long,
    unknown_short,
    value_missing_at_the_end,
    value_eaten_by_an_option,
    not_a_number,
    not_a_choice,
    misspelled_choice,
    refused_by_its_type,
    flag_given_a_value,
    help_given_a_value,
    ambiguous_prefix,
    one_word_too_many,
    required_left_out,
    two_that_exclude_each_other,
    another_commands_option,
    misspelled_command,
    command_in_capitals,
    top_level_option_misspelled_before_the_command,
)
CASES = [
    pytest.param(command, kind, id=f"{command}-{kind.__name__}")
    for command in COMMANDS
    for kind in KINDS
]


def test_twenty_kinds_each_sent_to_many_commands() -> None:
    assert len(KINDS) == 20
    applies = {c: sum(k(c, p) is not None for k in KINDS) for c, p in COMMANDS.items()}
    assert min(applies.values()) >= 12, applies
    for kind in KINDS:
        assert any(kind(c, p) is not None for c, p in COMMANDS.items()), kind.__name__


@pytest.mark.parametrize(("command", "kind"), CASES)
def test_a_usage_error_is_one_line_and_a_tip(
    command: str, kind: Kind, capsys: pytest.CaptureFixture[str]
) -> None:
    mistake = kind(command, COMMANDS[command])
    if mistake is None:
        pytest.skip(f"{command} has nothing for {kind.__name__}")
    with pytest.raises(SystemExit) as exited:
        main(mistake.argv)
    out, err = capsys.readouterr()
    assert exited.value.code == 2, err
    assert out == ""
    lines = err.splitlines()
    assert len(lines) == 2 and lines[1].startswith("Tip: "), err
    said_by = mistake.said_by or f"envsync {command}"
    assert lines[0].startswith(f"{said_by}: "), err
    assert mistake.token in lines[0], err
    if mistake.mean:
        assert f"did you mean {mistake.mean}?" in lines[0], err
    assert "usage:" not in err


def test_the_examples_of_the_issue(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["diff", "--formt", "json"])
    assert capsys.readouterr().err == (
        "envsync diff: unknown option --formt (did you mean --format?)\n"
        "Tip: `envsync diff --help` shows its options\n"
    )
    with pytest.raises(SystemExit):
        main(["diff", "--format", "yaml"])
    assert capsys.readouterr().err.splitlines()[0] == (
        "envsync diff: --format 'yaml' is not one of html, json, junit, markdown, prometheus, table"
    )


@pytest.mark.parametrize("command", [*COMMANDS, None])
def test_help_stays_whole(command: str | None, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main([command, "--help"] if command else ["--help"])
    out = capsys.readouterr().out
    assert exited.value.code == 0
    assert out.startswith("usage: envsync") and "options:" in out and len(out.splitlines()) > 5


@pytest.mark.parametrize(
    ("message", "line"),
    [
        # argparse's wording in 3.11 and 3.12, and 3.13's bare choices
        (
            "argument --format: invalid choice: 'jsn' (choose from 'json', 'table')",
            "--format 'jsn' is not one of json, table (did you mean json?)",
        ),
        (
            "argument --format: invalid choice: 'jsn' (choose from json, table)",
            "--format 'jsn' is not one of json, table (did you mean json?)",
        ),
        ("argument -j/--jobs: invalid int value: 'x'", "--jobs 'x' is not a whole number"),
        ("the following arguments are required: --lock", "missing --lock FILE"),
        ("argument --every: 5x is not a duration", "--every: 5x is not a duration"),
        ("something argparse may say one day", "something argparse may say one day"),
    ],
)
def test_argparses_words_said_in_ours(message: str, line: str) -> None:
    from envsync.cli.usage import Parser, explain

    check = COMMANDS["check"]
    assert isinstance(PARSER, Parser)
    assert explain(check, message, PARSER) == line
