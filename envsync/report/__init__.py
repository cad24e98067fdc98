"""Report formats: each turns reports into a string; only the CLI prints them."""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import TYPE_CHECKING

from envsync.findings import Report
from envsync.printable import printable_data
from envsync.vocab import FAIL_ON_DEFAULT, Severity

if TYPE_CHECKING:
    from envsync.classes import HostClass

# Each format is a module of this package with render(reports) -> str; loaded on use
# (the table needs rich, which the other commands should not pay for).
FORMATS = ("html", "json", "junit", "markdown", "prometheus", "table")
# With several targets, these show the fleet's classes (report/fleet.py) instead.
FLEET_FORMATS = ("html", "json", "markdown", "table")
# The table's width when no terminal says one (a pipe, a file, a library caller): stable,
# and one that a docs page, a review tool and an 80-column-plus-margin terminal show whole.
DEFAULT_WIDTH = 100


def render(
    fmt: str,
    reports: Sequence[Report],
    *,
    color: bool = False,
    width: int = DEFAULT_WIDTH,
    fail_on: Severity = FAIL_ON_DEFAULT,
) -> str:
    """`fail_on`: the JUnit format fails the cases at or above this severity (check
    passes its --fail-on)."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown report format {fmt!r}")
    module = importlib.import_module(f"envsync.report.{fmt}")
    if fmt != "json":  # JSON escapes control characters itself; the others show them
        reports = printable_data(tuple(reports))
    if fmt == "table":
        return str(module.render(reports, color=color, width=width))
    if fmt in ("junit", "prometheus"):
        return str(module.render(reports, fail_on=fail_on))
    return str(module.render(reports))


def render_fleet(
    fmt: str,
    reports: Sequence[Report],
    *,
    classes: Sequence[HostClass] | None = None,
    color: bool = False,
    width: int = DEFAULT_WIDTH,
) -> str:
    """Several targets against one reference, folded into classes (`classes`: as the
    comparison folded them; else by their reports), in `fmt` (FLEET_FORMATS)."""
    from envsync.report.fleet import build_fleet, fleet_data

    if fmt != "json":
        reports = printable_data(tuple(reports))
    fleet = build_fleet(reports, classes)
    if fmt == "json":
        import json

        return json.dumps(fleet_data(fleet), indent=2) + "\n"
    if fmt not in FLEET_FORMATS:
        raise ValueError(f"no fleet view in format {fmt!r}")
    module = importlib.import_module(f"envsync.report.{fmt}")
    if fmt == "table":
        return str(module.render_fleet(fleet, color=color, width=width))
    return str(module.render_fleet(fleet))
