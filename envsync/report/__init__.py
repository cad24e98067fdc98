"""Report formats: each turns reports into a string; only the CLI prints them.

Each format is one module of this package that meets report/base.py's Renderer (and
FleetRenderer where it has a fleet view); the registry below loads it on use (the table
needs rich, which the other commands should not pay for).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from envsync.model.findings import Report
from envsync.model.printable import printable_data
from envsync.model.vocab import FAIL_ON_DEFAULT, Severity
from envsync.report.base import DEFAULT_WIDTH, FleetRenderer, Renderer, View

if TYPE_CHECKING:
    from envsync.compare.classes import HostClass


def _html() -> FleetRenderer:
    from envsync.report import html

    return html


def _json() -> FleetRenderer:
    from envsync.report import json

    return json


def _junit() -> Renderer:
    from envsync.report import junit

    return junit


def _markdown() -> FleetRenderer:
    from envsync.report import markdown

    return markdown


def _prometheus() -> Renderer:
    from envsync.report import prometheus

    return prometheus


def _table() -> FleetRenderer:
    from envsync.report import table

    return table


RENDERERS: dict[str, Callable[[], Renderer]] = {
    "html": _html,
    "json": _json,
    "junit": _junit,
    "markdown": _markdown,
    "prometheus": _prometheus,
    "table": _table,
}
# With several targets, these show the fleet's classes (report/fleet.py) instead.
FLEET_RENDERERS: dict[str, Callable[[], FleetRenderer]] = {
    "html": _html,
    "json": _json,
    "markdown": _markdown,
    "table": _table,
}
FORMATS = tuple(RENDERERS)
FLEET_FORMATS = tuple(FLEET_RENDERERS)
ESCAPING = frozenset({"json"})  # JSON escapes control characters itself; the others show them
# What a report's strings keep as they are: a tab. Every field of a report is one line (a
# name, a sentence, a statement): a newline in one came from a host (a file's name) and is
# shown as \x0a, never as a line break or, wrapped, a space.
KEEP = "\t"


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
    load = RENDERERS.get(fmt)
    if load is None:
        raise ValueError(f"unknown report format {fmt!r}")
    if fmt not in ESCAPING:
        reports = printable_data(tuple(reports), keep=KEEP)
    return load().render(reports, View(color=color, width=width, fail_on=fail_on))


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
    from envsync.report.fleet import build_fleet

    load = FLEET_RENDERERS.get(fmt)
    if load is None:
        raise ValueError(f"no fleet view in format {fmt!r}")
    if fmt not in ESCAPING:
        reports = printable_data(tuple(reports), keep=KEEP)
    return load().render_fleet(build_fleet(reports, classes), View(color=color, width=width))


__all__ = [
    "DEFAULT_WIDTH",
    "FLEET_FORMATS",
    "FORMATS",
    "View",
    "render",
    "render_fleet",
]
