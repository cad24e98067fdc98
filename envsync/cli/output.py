"""What the commands print: data to stdout or -o (atomically), progress and errors to stderr."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from envsync import redact
from envsync.documents import write_atomic, write_pieces

if TYPE_CHECKING:
    from envsync.findings import Report


def err(message: str) -> None:
    # An error may quote a host's output (pip's, the service's): no secret gets through.
    print(f"envsync: {redact.text(message)}", file=sys.stderr)


def note(quiet: bool, message: str) -> None:
    if not quiet:
        print(redact.text(message), file=sys.stderr)


def emit(text: str | Iterable[str], output: str | None) -> None:
    """Write the command's output (a string, or its pieces as they are made) to the -o
    file, all or nothing, or to stdout."""
    if output:
        write_atomic(Path(output), text)
    else:
        write_pieces(sys.stdout, text)


def render(fmt: str, reports: Sequence[Report], output: str | None, *, fleet: bool = False) -> str:
    """Reports in `fmt`, coloured and as wide as the terminal when they go to one;
    `fleet`: several targets as one matrix (in the formats that have one)."""
    from envsync.report import FLEET_FORMATS, render_fleet
    from envsync.report import render as render_reports

    color = output is None and sys.stdout.isatty() and "NO_COLOR" not in os.environ
    width = shutil.get_terminal_size((120, 40)).columns if color else 120
    if fleet and fmt in FLEET_FORMATS:
        return render_fleet(fmt, reports, color=color, width=width)
    return render_reports(fmt, reports, color=color, width=width)


def indent(text: str) -> str:
    return "\n".join("  " + line for line in text.splitlines())
