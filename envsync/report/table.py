"""Table report (rich): grouped fatal first, one line of reason and fix each."""

from __future__ import annotations

import io
from collections.abc import Sequence

from rich.console import Console
from rich.table import Table
from rich.text import Text

from envsync.findings import Report, short_hash
from envsync.report.fleet import Fleet, change_text

STYLE = {
    "fatal": "bold red",
    "risky": "yellow",
    "unknown": "bold magenta",
    "degraded": "magenta",
    "benign": "dim",
}


def _value(value: str | None) -> str:
    return short_hash(value) or "—"


def _console(buffer: io.StringIO, color: bool, width: int) -> Console:
    return Console(
        file=buffer,
        width=width,
        force_terminal=color,
        no_color=not color,
        color_system="standard" if color else None,
        highlight=False,
        soft_wrap=False,
    )


def render(reports: Sequence[Report], *, color: bool = False, width: int = 120) -> str:
    buffer = io.StringIO()
    console = _console(buffer, color, width)
    for report in reports:
        title = report.summary_line()
        if report.entrypoint:
            title += f" (startup of {report.entrypoint})"
        if not report.findings:
            console.print(Text(title))
        else:
            table = Table(title=Text(title), title_justify="left", show_lines=False, expand=False)
            table.add_column("severity", no_wrap=True)
            table.add_column("kind", no_wrap=True)
            table.add_column("subject", overflow="fold", max_width=28)
            table.add_column("reference → target", overflow="fold", max_width=18)
            table.add_column("why, and the fix", overflow="fold", ratio=1, min_width=40)
            for f in report.findings:
                why = Text(f.reason)
                for fix in f.fixes:
                    why.append(f"\n→ {fix.kind}: {fix.summary}", style="green")
                # Text, never markup: a host's strings ("[/x]") are shown as they are.
                table.add_row(
                    Text(f.severity, style=STYLE[f.severity]),
                    Text(f.kind),
                    Text(f.subject),
                    Text(f"{_value(f.reference)} → {_value(f.target)}"),
                    why,
                )
            console.print(table)
        for note in report.notes:
            console.print(Text(f"note: {note}", style="dim"))
    return buffer.getvalue()


def render_fleet(fleet: Fleet, *, color: bool = False, width: int = 120) -> str:
    """The fleet's classes: a row per class (its node set, count and headline), each
    finding of it on a line of its own."""
    buffer = io.StringIO()
    console = _console(buffer, color, width)
    title = fleet.title()
    table = Table(title=Text(title), title_justify="left", expand=False)
    table.add_column("hosts", overflow="fold", max_width=36)
    table.add_column("count", justify="right", no_wrap=True)
    table.add_column("verdict", overflow="fold", max_width=40)
    table.add_column("differences", overflow="fold", ratio=1, min_width=40)
    for row in fleet.classes:
        verdict = Text(row.headline(), style=STYLE[row.worst] if row.worst else "green")
        changes = Text()
        for i, f in enumerate(row.findings):
            if i:
                changes.append("\n")
            changes.append(f"{f.severity:<8} ", style=STYLE[f.severity])
            changes.append(change_text(f))
        table.add_row(Text(row.nodeset), str(row.count), verdict, changes)
    console.print(table)
    console.print(
        "`--format html` shows each difference's reason and fixes", style="dim" if color else None
    )
    for nodeset, notes in fleet.notes.items():
        for note in notes:
            console.print(Text(f"note ({nodeset}): {note}", style="dim"))
    return buffer.getvalue()
