"""Every number a command line or the environment gives envsync is checked for its range
(envsync/cli/ranges.py): exit 2, one line naming the option or variable and what it takes,
before anything runs; the host side never fails on one either."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from envsync.cli.main import main
from envsync.cli.parser import build_parser
from envsync.hostside.caches.store import DEFAULT_CAP, cap_from_env
from tests.figures import add, round_four

pytestmark = pytest.mark.quick

NONSENSE = ("-1", "0", "nan", "inf", "-inf", "1e400", "99999999999", "many")
# The metavars of options that take a number: each must be range-checked.
NUMERIC = {"SECONDS", "N", "MB", "DURATION"}


def numeric_options() -> list[tuple[str, str, str]]:
    """(command, option, metavar) of every option that takes a number."""
    out = []
    top = build_parser()
    sub = next(a for a in top._actions if isinstance(a, argparse._SubParsersAction))
    for command, parser in sorted(sub.choices.items()):
        for action in parser._actions:
            if action.option_strings and action.metavar in NUMERIC:
                out.append((command, action.option_strings[-1], str(action.metavar)))
    return out


def test_every_numeric_option_is_range_checked() -> None:
    options = numeric_options()
    assert len(options) > 20  # timeouts, --jobs, --keep-states, --max-size, --every
    top = build_parser()
    sub = next(a for a in top._actions if isinstance(a, argparse._SubParsersAction))
    unchecked = [
        (command, option)
        for command, option, _ in options
        for action in sub.choices[command]._actions
        if option in action.option_strings
        and getattr(action.type, "__module__", None) != "envsync.cli.ranges"
    ]
    assert unchecked == []


@pytest.mark.parametrize(("command", "option", "metavar"), numeric_options())
def test_nonsense_is_refused_in_one_line_with_exit_2(
    command: str, option: str, metavar: str, capsys: pytest.CaptureFixture[str]
) -> None:
    refused = []
    for value in NONSENSE:
        try:
            code = main([command, f"{option}={value}"])
        except SystemExit as stop:  # argparse's refusal
            code = stop.code if isinstance(stop.code, int) else -1
        err = capsys.readouterr().err
        if code == 2 and f"{option}: '{value}'" in err:
            refused.append(value)
            assert err.count("\n") <= 2 and "Traceback" not in err, err
    add("inputs tried per parser", "numeric options sent nonsense", len(NONSENSE))
    # 0 means something for these: a cap (prune everything), no failure allowed, no wait
    zero = {"--max-size", "--max-fail", "--wait"}
    assert set(NONSENSE) - set(refused) == ({"0"} if option in zero else set())
    assert {"-1", "nan", "inf", "1e400", "many"} <= set(refused)
    round_four("6 numeric options: nonsense refused in one line", len(refused))


@pytest.mark.parametrize("value", ["0", "2.5", "604800"])
def test_a_wait_of_zero_or_more_is_taken(value: str) -> None:
    from envsync.cli.ranges import wait

    assert wait(value) == float(value)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("ENVSYNC_CACHE_MB", "inf"),
        ("ENVSYNC_CACHE_MB", "-1"),
        ("ENVSYNC_HOST_CACHE_MB", "nan"),
        ("ENVSYNC_PARSE_JOBS", "0"),
        ("ENVSYNC_PARSE_JOBS", "1e9"),
    ],
)
def test_a_variable_out_of_range_is_refused_before_anything_runs(
    name: str, value: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(name, value)
    assert main(["cache", "info"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"envsync: {name} (") and f"'{value}'" in err and "unset it" in err
    assert err.count("\n") == 1


@pytest.mark.parametrize("value", ["inf", "nan", "-5", "1e400", "x"])
def test_the_host_side_takes_its_default_for_a_cap_out_of_range(
    value: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ENVSYNC_HOST_CACHE_MB", value)
    assert cap_from_env("ENVSYNC_HOST_CACHE_MB", DEFAULT_CAP) == DEFAULT_CAP


def test_the_host_side_bounds_its_parse_workers() -> None:
    code = "from envsync.hostside.graph.parallel import workers; print(workers())"
    for value, expected in (("1000000", "256"), ("-4", "1"), ("x", "1")):
        out = subprocess.run(
            [sys.executable, "-c", code],
            env={"ENVSYNC_PARSE_JOBS": value, "PATH": "/usr/bin:/bin"},
            capture_output=True,
            text=True,
            check=True,
        )
        assert out.stdout.strip() == expected
