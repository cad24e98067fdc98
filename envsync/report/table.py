"""Table report (rich): grouped fatal first, one line of reason and fix each, as wide as
it is given (the CLI passes the terminal's width, or a stable default when piped).

From `WIDE` columns up, a table whose subject and values columns give way first, so that
the column of the reason and the fix keeps 60 columns or more; below it (the piped default
among them), one block per finding: its head on one line, the reason and each fix under
it, indented. No line is wider than the width, and notes wrap with a hanging indent, so
that a note reads as one.
"""

from __future__ import annotations

import io
import textwrap
from collections.abc import Sequence

from rich.console import Console
from rich.table import Table
from rich.text import Text

from envsync.model.findings import Finding, Report, short_hash
from envsync.report.base import View
from envsync.report.fleet import Fleet, change_text

STYLE = {
    "fatal": "bold red",
    "risky": "yellow",
    "unknown": "bold magenta",
    "degraded": "magenta",
    "benign": "dim",
}

# Below this width the findings are blocks, not table rows (a table narrower than this
# leaves the reason a column too narrow to read, and folds the subjects mid-name).
WIDE = 120
# The narrowest width this renderer lays out for (narrower is laid out as this).
NARROWEST = 40
# What the reason's column gives way to before the others do, and what they give way to.
WHY_EASY = 60
SUBJECT_MIN = 12
VALUES_MIN = len("reference →")
# The table's frame: 5 columns, 6 rules and one space of padding each side of a cell.
_FRAME = 6 + 5 * 2


def _value(value: str | None) -> str:
    return short_hash(value) or "—"


def _values(f: Finding) -> str:
    return f"{_value(f.reference)} → {_value(f.target)}"


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


def _why(f: Finding) -> Text:
    why = Text(f.reason)
    for fix in f.fixes:
        why.append(f"\n→ {fix.kind}: {fix.summary}", style="green")
    return why


def _longest_line(text: str) -> int:
    return max((len(line) for line in text.splitlines()), default=0)


def _table(report: Report, title: Text, width: int) -> Table:
    """The findings as rows; the subject and value columns give way before the reason's."""
    findings = report.findings
    severity = max(len("severity"), *(len(f.severity) for f in findings))
    kind = max(len("kind"), *(len(f.kind) for f in findings))
    room = width - _FRAME - severity - kind
    subject = min(28, max(len("subject"), *(len(f.subject) for f in findings)))
    values = min(18, max(len("reference →"), *(len(_values(f)) for f in findings)))
    why = max(_longest_line(_why(f).plain) for f in findings)
    # Too wide: the reason's column gives way to WHY_EASY, then the values and the subject
    # to their least, then the reason's again.
    over = subject + values + why - room
    widths = {"why": why, "subject": subject, "values": values}
    for column, least in (("why", WHY_EASY), ("values", VALUES_MIN), ("subject", SUBJECT_MIN)):
        give = max(0, min(over, widths[column] - least))
        widths[column] -= give
        over -= give
    widths["why"] -= max(0, over)
    why, subject, values = widths["why"], widths["subject"], widths["values"]
    table = Table(title=title, title_justify="left", show_lines=False, expand=False)
    table.add_column("severity", no_wrap=True)
    table.add_column("kind", no_wrap=True)
    table.add_column("subject", overflow="fold", max_width=subject)
    table.add_column("reference → target", overflow="fold", max_width=values)
    table.add_column("why, and the fix", overflow="fold", min_width=why, max_width=why)
    for f in findings:
        # Text, never markup: a host's strings ("[/x]") are shown as they are.
        table.add_row(
            Text(f.severity, style=STYLE[f.severity]),
            Text(f.kind),
            Text(f.subject),
            Text(_values(f)),
            _why(f),
        )
    return table


def _wrapped(text: str, width: int, first: str, rest: str) -> list[str]:
    """`text` wrapped at `width` with a hanging indent, never cut mid-word unless a word is
    wider than the line (a long path)."""
    return textwrap.wrap(
        text,
        width=max(NARROWEST, width),
        initial_indent=first,
        subsequent_indent=rest,
        break_on_hyphens=False,
        break_long_words=True,
    ) or [first.rstrip()]


def _blocks(console: Console, report: Report, title: Text, color: bool) -> None:
    """One block per finding, a blank line between them: `severity kind subject: ref →
    tgt`, then its reason indented under it, then each fix (`→ kind: ...`), its own lines
    indented under its arrow."""
    width = console.width
    for line in _wrapped(title.plain, width, "", "  "):
        console.print(Text(line))
    for f in report.findings:
        console.print()
        head = _wrapped(f"{f.severity} {f.kind} {f.subject}: {_values(f)}", width, "", "    ")
        first = Text(head[0])
        first.stylize(STYLE[f.severity], 0, len(f.severity))
        console.print(first)
        for line in [*head[1:], *_wrapped(f.reason, width, "  ", "  ")]:
            console.print(Text(line))
        for fix in f.fixes:
            for line in _wrapped(f"→ {fix.kind}: {fix.summary}", width, "  ", "    "):
                console.print(Text(line, style="green" if color else ""))


def _note(console: Console, label: str, note: str, color: bool) -> None:
    """A note wrapped at the width with a hanging indent (never cut mid-word)."""
    for line in _wrapped(f"{label}: {note}", console.width, "", " " * 6):
        console.print(Text(line, style="dim" if color else ""), overflow="fold")


def _trimmed(text: str) -> str:
    """Lines without the padding rich leaves at their right end."""
    return "".join(line.rstrip(" ") + "\n" for line in text.splitlines())


def render(reports: Sequence[Report], view: View) -> str:
    color, width = view.color, max(NARROWEST, view.width)
    buffer = io.StringIO()
    console = _console(buffer, color, width)
    for report in reports:
        title = report.summary_line()
        if report.entrypoint:
            title += f" (startup of {report.entrypoint})"
        if not report.findings:
            console.print(Text(title), overflow="fold")
        elif width >= WIDE:
            console.print(_table(report, Text(title), width))
        else:
            _blocks(console, report, Text(title), color)
            if report.notes:
                console.print()
        for note in report.notes:
            _note(console, "note", note, color)
    return _trimmed(buffer.getvalue())


def render_fleet(fleet: Fleet, view: View) -> str:
    """The fleet's classes: a row per class (its node set, count and headline), each
    finding of it on a line of its own."""
    color, width = view.color, max(NARROWEST, view.width)
    buffer = io.StringIO()
    console = _console(buffer, color, width)
    title = fleet.title()
    # The frame of 4 columns and the count's; the rest shared, the differences first.
    room = width - (5 + 4 * 2) - 5
    differences = max(room // 2, room - 36 - 40)
    table = Table(title=Text(title), title_justify="left", expand=False)
    table.add_column("hosts", overflow="fold", max_width=max(8, (room - differences) // 2))
    table.add_column("count", justify="right", no_wrap=True)
    table.add_column("verdict", overflow="fold", max_width=max(8, (room - differences) // 2))
    table.add_column("differences", overflow="fold", min_width=differences)
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
        "`--format html` shows each difference's reason and fixes",
        style="dim" if color else None,
        overflow="fold",
    )
    for nodeset, notes in fleet.notes.items():
        for note in notes:
            _note(console, f"note ({nodeset})", note, color)
    return _trimmed(buffer.getvalue())
