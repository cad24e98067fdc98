"""`history HOST` as text (a table of states, each with its changes, then the packages by
install time) or JSON (schema_version); each returns a string."""

from __future__ import annotations

import json
from collections.abc import Sequence

from envsync.model.codec import to_data
from envsync.sources.history import History, change_text

HISTORY_FORMATS = ("json", "table")
SHOWN = 20  # changes shown per state in the table; the JSON has them all


def render(history: History, fmt: str) -> str:
    if fmt == "json":
        return json.dumps(to_data(history), indent=2) + "\n"
    if fmt != "table":
        raise ValueError(f"no history in format {fmt!r}")
    return _table(history)


def _columns(rows: Sequence[tuple[str, ...]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows
    ]


def _table(history: History) -> str:
    recorded = sum(1 for e in history.entries if e.file is not None)
    out = [f"{history.host}: {recorded} recorded state(s) in {history.folder}, newest first", ""]
    heads = _columns(
        [(e.ref, e.at, e.why, "good" if e.good else "", e.digest) for e in history.entries]
    )
    for entry, head in zip(history.entries, heads, strict=True):
        out.append(head)
        if entry.first:
            out.append("    the first recorded state")
        elif not entry.changes:
            out.append("    no change")
        for change in entry.changes[:SHOWN]:
            out.append(f"    {change_text(change)}")
        if len(entry.changes) > SHOWN:
            out.append(
                f"    … {len(entry.changes) - SHOWN} more (--format json lists every change)"
            )
    newest = history.entries[0].ref if history.entries else history.host
    out += ["", f"packages of {newest}, latest installed first:"]
    rows = [("installed", "by", "package")] + [
        (a.installed_at or "unknown", a.installer or "?", f"{a.name} {a.version}")
        for a in history.packages
    ]
    out += ["  " + line for line in _columns(rows)]
    return "\n".join(out) + "\n"
