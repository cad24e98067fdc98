"""Figures the test suite measures, for the docs' reliability page.

Tests add to them as they run; the terminal summary prints them (tests/conftest.py), and
a full run of the suite also writes them to docs/generated/reliability.json (conftest.py),
which the docs include: every figure there was measured by the run that wrote it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from pathlib import Path

FIGURES: defaultdict[str, dict[str, float]] = defaultdict(dict)
# The figures that are values (`put`), not counts (`add`): merged by taking, not by adding.
VALUES: set[tuple[str, str]] = set()
# Sections whose figures are not counts of one thing: no total.
UNTOTALLED = (
    "fleet",
    "precision of the static verdict (corpus imports)",
    "reachability harness (real startups on CPU)",
    "precision over violated requirements (the example's runtime)",
    "reachability by demand (random steps)",
)


def add(section: str, name: str, n: float = 1) -> None:
    """Count `n` more of `name` (a fault survived, inputs tried, a secret searched)."""
    FIGURES[section][name] = FIGURES[section].get(name, 0) + n


def total(section: str) -> float | None:
    """All the figures of a section added up, where that means something."""
    return None if section in UNTOTALLED else sum(FIGURES[section].values())


def put(section: str, name: str, value: float) -> None:
    FIGURES[section][name] = value
    VALUES.add((section, name))


def export() -> dict[str, object]:
    """This process's figures, for the process that reports them (a worker's, under xdist)."""
    return {
        "figures": {section: dict(values) for section, values in FIGURES.items()},
        "values": sorted([section, name] for section, name in VALUES),
    }


def merge(data: Mapping[str, object]) -> None:
    """Another process's figures (`export`) taken into this one's: counts added, values set."""
    figures, values = data.get("figures"), data.get("values")
    assert isinstance(figures, dict) and isinstance(values, list), data
    taken = {(str(section), str(name)) for section, name in values}
    for section, named in figures.items():
        for name, value in named.items():
            if (section, name) in taken:
                put(section, name, value)
            else:
                add(section, name, value)


def lines() -> list[str]:
    out = []
    for section in sorted(FIGURES):
        values = FIGURES[section]
        out.append(f"{section}: {total(section) if section not in UNTOTALLED else ''}".rstrip())
        for name in sorted(values):
            value = values[name]
            shown = (
                f"{value:.1f}"
                if isinstance(value, float) and not value.is_integer()
                else f"{value:g}"
            )
            out.append(f"  {name}: {shown}")
    return out


def provenance(command: str) -> dict[str, object]:
    """When, where and by what a set of figures was measured (they mean little without it)."""
    import datetime
    import os
    import platform
    import subprocess

    def first(path: str, prefix: str) -> str | None:
        try:
            lines = Path(path).read_text().splitlines()
        except OSError:
            return None
        return next((ln.split(":", 1)[1].strip() for ln in lines if ln.startswith(prefix)), None)

    memory = first("/proc/meminfo", "MemTotal")
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short=12", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
            cwd=Path(__file__).resolve().parent,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        commit = None
    return {
        "command": command,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "commit": commit,
        "machine": {
            "platform": platform.platform(),
            "cpu": first("/proc/cpuinfo", "model name"),
            "cores": os.cpu_count(),
            "memory_gib": round(int(memory.split()[0]) / 2**20, 1) if memory else None,
            "load_average": [round(x, 2) for x in os.getloadavg()],
            "python": platform.python_version(),
        },
    }


FIGURES_FILE = "docs/generated/reliability.json"
# The kill matrix and the disk-full runs (tests/repair/test_kill_matrix.py): the default run
# holds one moment per process, `pytest -m matrix` the rest (half an hour), whose counts
# it writes to MATRIX_FILE (committed), and every whole run adds to its own.
MATRIX_SECTIONS = (
    "kill matrix (SIGKILL, then byte-identical or refused)",
    "disk full (real tmpfs, byte-identical or refused)",
)
MATRIX_FILE = "docs/generated/kill-matrix.json"
MATRIX_MARK = "matrix"


def _write_json(path: Path, data: Mapping[str, object]) -> None:
    import json

    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n")
    tmp.replace(path)


def write(path: Path, counts: Mapping[str, int], matrix: Path | None = None) -> None:
    """The figures of a full run, with the test counts and where they were measured; the
    cases of the last `-m matrix` run (`matrix`, its file) added to the matrix's sections,
    and that run said."""
    import json

    figures = {section: dict(v) for section, v in FIGURES.items()}
    data: dict[str, object] = {
        **provenance(".venv/bin/python -m pytest -q"),
        "tests": dict(counts),
    }
    kept = json.loads(matrix.read_text()) if matrix is not None and matrix.exists() else None
    if kept is not None:
        added = 0
        for section, cases in kept["figures"].items():
            mine = figures.setdefault(section, {})
            for case, n in cases.items():
                if case not in mine:  # the default run's own count stands
                    mine[case] = n
                    added += 1
        data["matrix_run"] = {
            "file": MATRIX_FILE,
            "command": kept["command"],
            "date": kept["date"],
            "commit": kept["commit"],
            "tests": kept["tests"],
            "cases_added": added,
        }
    data["figures"] = {section: dict(sorted(v.items())) for section, v in sorted(figures.items())}
    data["totals"] = {
        section: None if section in UNTOTALLED else sum(figures[section].values())
        for section in sorted(figures)
    }
    _write_json(path, data)


def write_matrix(path: Path, counts: Mapping[str, int]) -> None:
    """The counts of a `pytest -m matrix` run (the kill matrix beyond the default run's
    moments, and the disk-full runs), for the whole runs to add."""
    _write_json(
        path,
        {
            **provenance(f".venv/bin/python -m pytest -q -m {MATRIX_MARK}"),
            "tests": dict(counts),
            "figures": {
                section: dict(sorted(FIGURES[section].items()))
                for section in MATRIX_SECTIONS
                if FIGURES.get(section)
            },
        },
    )


# Issue 32's items 6 to 18: each case a test showed held (a check that failed before).
CACHES_ENGINES_BOUNDS = "caches, engines and bounds (cases held per item)"


def held(item: str, n: float = 1) -> None:
    """One more case of `item` ("16 selectors and state names") shown to hold."""
    add(CACHES_ENGINES_BOUNDS, item, n)


# Issue 46's items 1 to 7: each case a test showed held (a check that failed before).
ROUND_FOUR = "reliability round four (cases held per item)"


def round_four(item: str, n: float = 1) -> None:
    """One more case of `item` ("2 writes that leave the environment") shown to hold."""
    add(ROUND_FOUR, item, n)
