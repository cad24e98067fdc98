"""The performance and reliability pages' figures, from the files their programs wrote."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

PERFORMANCE = "docs/generated/performance.json"
RELIABILITY = "docs/generated/reliability.json"


def _measured(data: dict[str, Any]) -> str:
    m = data.get("machine", {})
    load = ", ".join(str(x) for x in m.get("load_average") or [])
    commit = f" at commit `{data['commit']}`" if data.get("commit") else ""
    return (
        f"Measured {data['date']} by `{data['command']}`{commit}, on {m.get('platform')} "
        f"({m.get('cores')} cores: {m.get('cpu')}; {m.get('memory_gib')} GiB; load average "
        f"{load} at the end; Python {m.get('python')})."
    )


def absent(path: str, how: str) -> str:
    return (
        f'!!! note "Not measured in this checkout"\n\n    `{path}` is not there yet: {how} '
        "writes it, then build the docs again.\n"
    )


def performance(root: Path) -> str:
    path = root / PERFORMANCE
    if not path.exists():
        return absent(PERFORMANCE, "`.venv/bin/python -m benchmarks.all --runs 5`")
    data = json.loads(path.read_text())
    out = [_measured(data), "", f"Medians of {data['runs']} interleaved rounds, fresh processes:"]
    out += ["", "| command | median | peak RSS |", "| --- | ---: | ---: |"]
    out += [
        f"| {row['name']} | {row['ms']:.1f} ms | {row['rss_mib']:.1f} MiB |"
        for row in data["medians"]
    ]
    out += ["", "| ratio | measured | target | |", "| --- | ---: | ---: | --- |"]
    for row in data["ratios"]:
        note = f" {row['note']}" if row.get("note") else ""
        met = "met" if row["met"] else "**not met**"
        out.append(
            f"| {row['label']} | {row['value']:.2f} | <= {row['target']:.2f}{note} | {met} |"
        )
    if data.get("left_out"):
        out += ["", f"Left out of this run: {data['left_out']}."]
    return "\n".join(out) + "\n"


def reliability(root: Path) -> str:
    path = root / RELIABILITY
    if not path.exists():
        return absent(RELIABILITY, "a whole run of the suite, `.venv/bin/python -m pytest -q`,")
    data = json.loads(path.read_text())
    tests = data["tests"]
    out = [
        _measured(data),
        f"That run: {tests['passed']} passed, {tests['failed']} failed, "
        f"{tests['skipped']} skipped.",
        "",
        "| figure | measured |",
        "| --- | ---: |",
    ]
    for section, values in data["figures"].items():
        if data["totals"].get(section) is not None:
            out.append(f"| **{section}**, in all | **{data['totals'][section]:g}** |")
        for name, value in values.items():
            shown = (
                f"{value:.1f}"
                if isinstance(value, float) and not value.is_integer()
                else f"{value:g}"
            )
            out.append(f"| {section}: {name} | {shown} |")
    return "\n".join(out) + "\n"
