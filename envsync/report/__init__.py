"""Report formats: each turns reports into a string; only the CLI prints them."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from envsync.model import Report
from envsync.report import json, junit, markdown, table

FORMATS: dict[str, Callable[[Sequence[Report]], str]] = {
    "table": table.render,
    "json": json.render,
    "markdown": markdown.render,
    "junit": junit.render,
}


def render(fmt: str, reports: Sequence[Report], *, color: bool = False, width: int = 120) -> str:
    if fmt == "table":
        return table.render(reports, color=color, width=width)
    return FORMATS[fmt](reports)
