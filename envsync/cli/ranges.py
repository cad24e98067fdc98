"""The numbers a command line and the environment give envsync, each checked for its range.

A value out of range (negative, zero where that means nothing, not a number, infinite,
too large for a timer) is refused before anything runs: exit 2, one line that names the
option or the variable and the values it takes.
"""

from __future__ import annotations

import argparse
import math
import re
from collections.abc import Callable, Mapping

from envsync.errors import InputError

SECONDS_MAX = 7 * 86400.0  # a timeout or a wait: up to a week
COUNT_MAX = 4096  # hosts at once, states kept
MB_MAX = float(1 << 20)  # a cache cap: up to a terabyte
DURATION_MAX = 365 * 86400.0  # watch --every: up to a year


def _number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _seconds(text: str, zero: bool) -> float:
    value = _number(text)
    span = "from 0 to" if zero else "above 0 and at most"
    if value is None or not (value >= 0 if zero else value > 0) or value > SECONDS_MAX:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a number of seconds {span} {SECONDS_MAX:.0f} (a week)"
        )
    return value


def seconds(text: str) -> float:
    """SECONDS: more than 0, at most SECONDS_MAX."""
    return _seconds(text, zero=False)


def wait(text: str) -> float:
    """SECONDS to wait: 0 (not at all) or more, at most SECONDS_MAX."""
    return _seconds(text, zero=True)


def count(low: int, high: int = COUNT_MAX) -> Callable[[str], int]:
    """N: a whole number from `low` to `high`."""

    def convert(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = low - 1
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number from {low} to {high}")
        return value

    convert.__name__ = "count"
    return convert


def megabytes(text: str) -> float:
    """MB: 0 or more, at most MB_MAX."""
    value = _number(text)
    if value is None or not 0 <= value <= MB_MAX:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a size in MB from 0 to {MB_MAX:.0f} (a terabyte)"
        )
    return value


def duration(text: str) -> float:
    """DURATION: 30s, 10m, 1.5h, above 0 and at most DURATION_MAX."""
    from envsync.report.watch import parse_duration

    try:
        value = parse_duration(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from e
    if value > DURATION_MAX:
        raise argparse.ArgumentTypeError(f"{text!r} is longer than a year ({DURATION_MAX:g}s)")
    return value


def failures(text: str) -> str:
    """N or N%: how many hosts of a batch may fail, a count up to COUNT_MAX or a share of
    the batch up to 100%."""
    number, percent = text[:-1] if text.endswith("%") else text, text.endswith("%")
    high = 100 if percent else COUNT_MAX
    if not (re.fullmatch("[0-9]+", number) and int(number) <= high):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a count of hosts from 0 to {high}"
            if not percent
            else f"{text!r} is not a share of the batch from 0% to 100%"
        )
    return f"{int(number)}{'%' if percent else ''}"


# The variables envsync and its host side read as numbers, with what each takes.
VARIABLES: dict[str, tuple[Callable[[str], object], str]] = {
    "ENVSYNC_CACHE_MB": (megabytes, "the cap of envsync's cache"),
    "ENVSYNC_HOST_CACHE_MB": (megabytes, "the cap of each host's cache"),
    "ENVSYNC_PARSE_JOBS": (count(1, 256), "the processes that parse on a host"),
}


def check_environment(environ: Mapping[str, str]) -> None:
    """InputError for a numeric variable set to something it does not take."""
    for name, (convert, what) in VARIABLES.items():
        given = environ.get(name)
        if given is None or given == "":
            continue
        try:
            convert(given)
        except argparse.ArgumentTypeError as e:
            raise InputError(f"{name} ({what}): {e}; unset it for the default") from None
