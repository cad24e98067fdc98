"""Report formats: each turns reports into a string; only the CLI prints them."""

from __future__ import annotations

import importlib
from collections.abc import Sequence

from envsync.findings import Report

# Each format is a module of this package with render(reports) -> str; loaded on use
# (the table needs rich, which the other commands should not pay for).
FORMATS = ("json", "junit", "markdown", "table")


def render(
    fmt: str,
    reports: Sequence[Report],
    *,
    color: bool = False,
    width: int = 120,
    fail_on: str = "risky",
) -> str:
    """`fail_on`: the JUnit format fails the cases at or above this severity."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown report format {fmt!r}")
    module = importlib.import_module(f"envsync.report.{fmt}")
    if fmt == "table":
        return str(module.render(reports, color=color, width=width))
    if fmt == "junit":
        return str(module.render(reports, fail_on=fail_on))
    return str(module.render(reports))
