"""The quick start's own figures: what a run of examples/quickstart.sh took and fetched.

The script times itself (`reports/quickstart/times.tsv`, milliseconds per phase and step)
and calls `python -m docsgen.record` at its end: the run is written to `reports/quickstart/run.json`
(ignored by git), and with `--record` also to `docs/generated/quickstart.json`, as the
first run (it built the shared runtime: the big download) or as a later one, and the
README's sentence is written from that file, as benchmarks/all.py writes the performance
figures. The README and the tutorial state those recorded figures, never typed ones.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
QUICKSTART = "docs/generated/quickstart.json"
RUN = "reports/quickstart/run.json"
# The phases the script times besides its steps (quickstart.sh `took`).
SETUP = ("install", "hosts")


def duration(ms: float) -> str:
    """`48 s`, `3.2 s`, `11 min 4 s`: a run's length as a reader says it."""
    seconds = ms / 1000
    if seconds < 10:
        return f"{seconds:.1f} s"
    if seconds < 60:
        return f"{seconds:.0f} s"
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest} s" if rest else f"{minutes} min"


def size(count: int) -> str:
    if count >= 10**9:
        return f"{count / 10**9:.1f} GB"
    return f"{count / 10**6:.0f} MB"


def read_times(folder: Path) -> dict[str, int]:
    """{phase or step: milliseconds} as the script wrote them, in its order."""
    out: dict[str, int] = {}
    for line in (folder / "times.tsv").read_text().splitlines():
        name, _, ms = line.partition("\t")
        if name and ms.strip().isdigit():
            out[name] = int(ms)
    return out


def make_run(
    folder: Path, built_runtime: bool, runtime_bytes: int, wheel_bytes: int
) -> dict[str, Any]:
    from tests.figures import provenance

    return {
        **provenance("bash examples/quickstart.sh"),
        "first": built_runtime,  # this run built the shared runtime (the first run does)
        "fetched": {"runtime_bytes": runtime_bytes, "wheel_bytes": max(wheel_bytes, 0)},
        "ms": read_times(folder),
    }


def load(root: Path) -> dict[str, Any]:
    path = root / QUICKSTART
    data: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {}
    return data


def story_ratio(recorded: dict[str, Any]) -> float | None:
    """A later run's envsync steps over the first run's, as recorded (None: not both)."""
    if "first" not in recorded or "later" not in recorded:
        return None
    return float(recorded["later"]["ms"]["story"]) / float(recorded["first"]["ms"]["story"])


def sentence(root: Path) -> str:
    """The README's and the tutorial's words on what the first and later runs take."""
    recorded = load(root)
    first, later = recorded.get("first"), recorded.get("later")
    if first is None and later is None:
        return (
            "How long a run takes is not recorded in this checkout yet "
            "(`bash examples/quickstart.sh --record` records it)"
        )
    parts = []
    if first is not None:
        fetched = first["fetched"]
        parts.append(
            f"the first run downloads and installs the example's runtime "
            f"({size(fetched['runtime_bytes'])} installed: torch for CPUs, transformers, "
            f"triton, …) and {size(fetched['wheel_bytes'])} of the hosts' wheels, and took "
            f"{duration(first['ms']['total'])} "
            f"(the envsync steps {duration(first['ms']['story'])})"
        )
    else:
        parts.append(
            "the first run downloads and installs the example's runtime "
            "(torch for CPUs, transformers, triton, …; its time is not recorded yet)"
        )
    if later is not None:
        parts.append(
            f"a later run took {duration(later['ms']['total'])} "
            f"(the envsync steps {duration(later['ms']['story'])})"
        )
    when = (later or first or {}).get("date", "")[:10]
    machine = (later or first or {}).get("machine", {})
    text = "; ".join(parts)
    return (
        text[0].upper()
        + text[1:]
        + f", on {machine.get('cores')} cores on {when} (`bash examples/quickstart.sh --record`)"
    )


def steps(run: dict[str, Any]) -> str:
    """A run's phases and steps as a Markdown table."""
    rows = ["| phase or step | took |", "| --- | ---: |"]
    rows += [f"| `{name}` | {duration(ms)} |" for name, ms in run["ms"].items()]
    return "\n".join(rows) + "\n"


def tutorial(root: Path) -> str:
    """The tutorial's figures: the recorded runs, and this checkout's last run when there."""
    out = [sentence(root) + ".", ""]
    recorded = load(root)
    for kind in ("first", "later"):
        if kind in recorded:
            out += [f"The recorded {kind} run, step by step:", "", steps(recorded[kind])]
    last = root / RUN
    if last.exists():
        run = json.loads(last.read_text())
        out += [f"This checkout's last run ({run['date'][:10]}):", "", steps(run)]
    return "\n".join(out)
