"""Table report (rich): grouped fatal first, one line of reason and fix each."""

from __future__ import annotations

import io
from collections.abc import Sequence

from rich.console import Console
from rich.table import Table
from rich.text import Text

from envsync.findings import Report, short_hash

STYLE = {
    "fatal": "bold red",
    "risky": "yellow",
    "unknown": "bold magenta",
    "degraded": "magenta",
    "benign": "dim",
}


def _value(value: str | None) -> str:
    return short_hash(value) or "—"


def render(reports: Sequence[Report], *, color: bool = False, width: int = 120) -> str:
    buffer = io.StringIO()
    console = Console(
        file=buffer,
        width=width,
        force_terminal=color,
        no_color=not color,
        color_system="standard" if color else None,
        highlight=False,
        soft_wrap=False,
    )
    for report in reports:
        title = report.summary_line()
        if report.entrypoint:
            title += f" (startup of {report.entrypoint})"
        if not report.findings:
            console.print(title)
        else:
            table = Table(title=title, title_justify="left", show_lines=False, expand=False)
            table.add_column("severity", no_wrap=True)
            table.add_column("kind", no_wrap=True)
            table.add_column("subject", overflow="fold", max_width=28)
            table.add_column("reference → target", overflow="fold", max_width=18)
            table.add_column("why, and the fix", overflow="fold", ratio=1, min_width=40)
            for f in report.findings:
                why = Text(f.reason)
                for fix in f.fixes:
                    why.append(f"\n→ {fix.kind}: {fix.summary}", style="green")
                table.add_row(
                    Text(f.severity, style=STYLE[f.severity]),
                    f.kind,
                    f.subject,
                    f"{_value(f.reference)} → {_value(f.target)}",
                    why,
                )
            console.print(table)
        for note in report.notes:
            console.print(f"note: {note}", style="dim")
    return buffer.getvalue()
