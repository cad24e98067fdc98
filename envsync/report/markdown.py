"""Markdown report: for pull-request comments and CI step summaries."""

from __future__ import annotations

from collections.abc import Sequence

from envsync.model.findings import Report, short_hash
from envsync.report.base import View
from envsync.report.fleet import Fleet

MARK = {
    "fatal": "🔴 fatal",
    "risky": "🟠 risky",
    "unknown": "🟣 unknown",
    "degraded": "🟡 degraded",
    "benign": "⚪ benign",
}


def _cell(text: str | None) -> str:
    return (text or "—").replace("|", "\\|").replace("\n", " ")


def render(reports: Sequence[Report], view: View) -> str:
    out = []
    for report in reports:
        out.append(f"## envsync: {report.target} against {report.reference}\n")
        out.append(
            f"**{report.counts_text}**"
            + (f" · entrypoint `{report.entrypoint}`" if report.entrypoint else "")
            + "\n"
        )
        if report.findings:
            out.append("| severity | kind | subject | reference | target | why | fix |")
            out.append("| --- | --- | --- | --- | --- | --- | --- |")
            for f in report.findings:
                fix = "; ".join(x.summary for x in f.fixes)
                out.append(
                    f"| {MARK[f.severity]} | {f.kind} | `{_cell(f.subject)}` | "
                    f"{_cell(short_hash(f.reference))} | {_cell(short_hash(f.target))} | "
                    f"{_cell(f.reason)} | {_cell(fix)} |"
                )
            out.append("")
            serious = [
                f for f in report.findings if f.severity in ("fatal", "risky") and f.evidence
            ]
            for f in serious:
                out.append(
                    f"<details><summary>{f.severity}: {f.subject} — "
                    f"evidence ({f.decided_by})</summary>\n"
                )
                for e in f.evidence:
                    where = f" `{e.file}:{e.line}`" if e.file else ""
                    stmt = f" — `{e.statement}`" if e.statement else ""
                    out.append(f"- **{e.source}**{where}: {e.detail}{stmt}")
                out.append("\n</details>\n")
        for note in report.notes:
            out.append(f"> note: {note}\n")
    return "\n".join(out).rstrip() + "\n"


def render_fleet(fleet: Fleet, view: View) -> str:
    """The fleet's classes: one line each, then each class's findings, fatal and risky
    with their reasons and fixes."""
    out = [f"## envsync: {fleet.title()}\n"]
    out += ["| hosts | count | verdict |", "| --- | --- | --- |"]
    for row in fleet.classes:
        mark = MARK[row.worst].split()[0] if row.worst else "✅"
        out.append(f"| `{_cell(row.nodeset)}` | {row.count} | {mark} {_cell(row.headline())} |")
    out.append("")
    for row in fleet.classes:
        if not row.findings:
            continue
        out.append(f"### `{_cell(row.nodeset)}` ({row.count})\n")
        out.append("| severity | kind | subject | reference | target | why | fix |")
        out.append("| --- | --- | --- | --- | --- | --- | --- |")
        for f in row.findings:
            fix = "; ".join(x.summary for x in f.fixes)
            out.append(
                f"| {MARK[f.severity]} | {f.kind} | `{_cell(f.subject)}` | "
                f"{_cell(short_hash(f.reference))} | {_cell(short_hash(f.target))} | "
                f"{_cell(f.reason)} | {_cell(fix)} |"
            )
        out.append("")
    for nodeset, notes in fleet.notes.items():
        out += [f"> note ({nodeset}): {note}\n" for note in notes]
    return "\n".join(out).rstrip() + "\n"
