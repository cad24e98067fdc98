"""Table report (rich): grouped fatal first, one line of reason and fix each."""

from __future__ import annotations

import io
from collections.abc import Sequence

from rich.console import Console
from rich.table import Table
from rich.text import Text

from envsync.findings import Report, short_hash
from envsync.report.fleet import Fleet, cell_text

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
    """The fleet matrix: a row per difference, a column per host, cells by severity."""
    buffer = io.StringIO()
    console = _console(buffer, color, width)
    title = f"{len(fleet.hosts)} host(s) against {fleet.reference}: " + "; ".join(
        f"{h} {fleet.counts_text(h)}" for h in fleet.hosts
    )
    if not fleet.rows:
        console.print(Text(title))
        return buffer.getvalue()
    table = Table(title=Text(title), title_justify="left", expand=False)
    table.add_column("subject", overflow="fold", max_width=40)
    table.add_column("kind", no_wrap=True)
    table.add_column("reference", overflow="fold", max_width=14)
    table.add_column("worst", no_wrap=True)
    for host in fleet.hosts:
        table.add_column(Text(host), overflow="fold", max_width=18)
    for row in fleet.rows:
        cells = []
        for host in fleet.hosts:
            f = row.cells.get(host)
            if f is None:
                cells.append(Text("=", style="dim"))
            else:
                cell = Text(cell_text(f), style=STYLE[f.severity])
                cell.append(f"\n{f.severity}", style=STYLE[f.severity])
                cells.append(cell)
        table.add_row(
            Text(row.subject),
            Text(row.kind),
            Text(_value(row.reference)),
            Text(row.worst, style=STYLE[row.worst]),
            *cells,
        )
    console.print(table)
    legend = Text("cells: ")
    for severity, style in STYLE.items():
        legend.append(severity, style=style)
        legend.append(" ")
    legend.append("(= as on the reference); `--format html` shows each cell's reason and fixes")
    console.print(legend, style="dim" if not color else None)
    for host, notes in fleet.notes.items():
        for note in notes:
            console.print(Text(f"note ({host}): {note}", style="dim"))
    return buffer.getvalue()
