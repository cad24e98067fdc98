"""The performance, reliability and accuracy pages' figures, from the files their programs
wrote."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from docsgen import quickstart

PERFORMANCE = "docs/generated/performance.json"
RELIABILITY = "docs/generated/reliability.json"
CORPUS = "docs/generated/corpus.json"
# An expectation that is not one severity: a case that really starts, whose import check
# the test holds to "not fatal" only.
NOT_FATAL = "not fatal"


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


README_BEGIN = (
    "<!-- generated from docs/generated/performance.json by `python -m benchmarks.all`: "
    "do not edit -->"
)
README_END = "<!-- end of the generated performance section -->"
# the ratios the README shows (the performance page shows them all)
README_RATIOS = (
    "diff warm",
    "diff cold",
    "diff after one edited file",
    "cold target, warm reference",
    "snapshot warm",
    "256 sim.",
    "1000 sim.",
)


def readme_performance(root: Path) -> str:
    """The README's performance section: each ratio beside its target, from the last
    benchmarks.all run (the docs' performance page has every figure)."""
    path = root / PERFORMANCE
    if not path.exists():
        return "Not measured yet: `.venv/bin/python -m benchmarks.all --runs 5` measures it.\n"
    data = json.loads(path.read_text())
    m = data.get("machine", {})
    commit = f" at `{data['commit']}`" if data.get("commit") else ""
    out = [
        f"`python -m benchmarks.all --runs {data['runs']}` on {data['date'][:10]}{commit}, "
        f"{m.get('cores')} cores, every command a fresh process, interleaved:",
        "",
        "| ratio | measured | target | |",
        "| --- | ---: | ---: | --- |",
    ]
    for row in data["ratios"]:
        if not row["label"].startswith(README_RATIOS):
            continue
        met = "met" if row["met"] else "**not met**"
        note = f" {row['note']}" if row.get("note") else ""
        out.append(
            f"| {row['label']} | {row['value']:.2f} | <= {row['target']:.2f}{note} | {met} |"
        )
    sims = data.get("simulated") or []
    if sims:
        peaks = ", ".join(f"{s['hosts']} hosts {s['rss_mib']:.0f} MiB" for s in sims)
        out += ["", f"Peak RSS of the simulated collections: {peaks}."]
    return "\n".join(out) + "\n"


# A figure inside a sentence of the README: `<!-- figure:NAME -->TEXT<!-- /figure -->`, TEXT
# written from the file a program wrote (never typed).
FIGURE = re.compile(r"<!-- figure:(?P<name>[\w-]+) -->.*?<!-- /figure -->", re.S)


def _seconds(ms: float) -> str:
    return f"{ms / 1000:.1f} s" if ms < 10_000 else f"{ms / 1000:.0f} s"


def diff_claim(root: Path) -> str:
    """How fast `envsync diff` of the example answers, from the benchmarks' medians."""
    path = root / PERFORMANCE
    medians = (
        {row["name"]: row["ms"] for row in json.loads(path.read_text())["medians"]}
        if path.exists()
        else {}
    )
    if "diff (warm)" not in medians or "diff (cold)" not in medians:
        return "says it (not measured in this checkout yet: `python -m benchmarks.all`)"
    return (
        f"says it in {_seconds(medians['diff (warm)'])} on hosts it has read before, and in "
        f"{_seconds(medians['diff (cold)'])} the first time, when it reads every file "
        "(medians of `python -m benchmarks.all`)"
    )


def figure(name: str, root: Path) -> str:
    match name:
        case "diff":
            return diff_claim(root)
        case "quickstart":
            return quickstart.sentence(root)
    raise ValueError(f"README.md: unknown figure {name!r}")


def readme_figures(readme: str, root: Path) -> str:
    """`readme` with each figure in its sentences written from the current files."""
    return FIGURE.sub(
        lambda m: f"<!-- figure:{m['name']} -->{figure(m['name'], root)}<!-- /figure -->", readme
    )


def readme_with_performance(readme: str, root: Path) -> str:
    """`readme` with its generated performance section and its figures replaced by the
    current ones."""
    readme = readme_figures(readme, root)
    head, found, rest = readme.partition(README_BEGIN + "\n")
    if not found:
        raise ValueError("README.md has no generated performance section")
    _, found, tail = rest.partition(README_END)
    if not found:
        raise ValueError("README.md's performance section has no end marker")
    return head + README_BEGIN + "\n" + readme_performance(root) + README_END + tail


def _matrix_run(data: dict[str, Any]) -> list[str]:
    """The line on the kill matrix's cases that the whole run added from `pytest -m matrix`."""
    run = data.get("matrix_run")
    if not run:
        return []
    commit = f" at commit `{run['commit']}`" if run.get("commit") else ""
    return [
        "",
        f"The kill matrix beyond the moments of the default run: {run['cases_added']} cases "
        f"added from `{run['command']}`, {run['date']}{commit} ({run['tests']['passed']} "
        f"passed, {run['tests']['failed']} failed; `{run['file']}`).",
    ]


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
        *_matrix_run(data),
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


def verdict(row: dict[str, Any]) -> str:
    """The severity envsync gave a corpus case with the most it was asked: the import
    check's where the test ran it, else the static diff's."""
    return str(row["import_check"] if row["import_check"] is not None else row["static"])


def agrees(row: dict[str, Any]) -> bool:
    """Whether envsync's verdict on a corpus case is the one its test expects."""
    given = verdict(row)
    return given != "fatal" if row["expected"] == NOT_FATAL else given == row["expected"]


def _cell(text: str | None) -> str:
    return "not run" if text is None else text.replace("|", "\\|").replace("\n", " ")


def corpus(root: Path) -> str:
    """The corpus table (tests/corpus/table.py wrote it): each case, what a real run did on
    each side, and what envsync said of the culprit; a summary line first."""
    path = root / CORPUS
    if not path.exists():
        return absent(CORPUS, "a whole run of the suite, `.venv/bin/python -m pytest -q`,")
    data = json.loads(path.read_text())
    rows = data["rows"]
    given: dict[str, int] = {}
    for row in rows:
        given[verdict(row)] = given.get(verdict(row), 0) + 1
    per = ", ".join(f"{severity} {n}" for severity, n in sorted(given.items()))
    out = [
        _measured(data),
        "",
        f"**{len(rows)} cases, {sum(agrees(r) for r in rows)} agreeing with their "
        f"expectation**; envsync's verdict (with `--import-check` where it ran): {per}.",
        "",
        "| case | report | reference, really | target, really | envsync static "
        "| with `--import-check` | expected | agrees? |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for row in rows:
        cells = [
            f"`{row['case']}`",
            row["report"],
            row["reference"],
            row["target"],
            row["static"],
            row["import_check"],
            row["expected"],
            "yes" if agrees(row) else "**no**",
        ]
        out.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return "\n".join(out) + "\n"
