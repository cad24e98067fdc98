"""Benchmark: reachability by demand against `pip check`, on the example as the quick start
builds it (the full torch stack: about 13,000 source files).

For each host, the story's differences are asked about at once (envsync/hostside/reach.py,
a fresh process each time), cold (no cache on the host: every file it reads is parsed)
and warm (the host's facts store kept), interleaved round by round with `pip check` of
the same venv; the medians are compared. Each answer is compared with the whole walk's
(the probe's startup graph, classified as `diff` does): a difference fails the benchmark.
With --walk, the whole walk cold is timed too (about 40 s here).

    .venv/bin/python -m benchmarks.reach [--runs 5] [--walk]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from envsync.classify.startup import Analysis  # noqa: E402
from envsync.collect import probe_argv, probe_source  # noqa: E402
from envsync.compare.targets import startup, targets  # noqa: E402
from envsync.hostside import protocol  # noqa: E402
from envsync.runner import Runners  # noqa: E402
from envsync.runner.bundle import host_argv, host_input  # noqa: E402
from envsync.sources.inventory import load_inventory  # noqa: E402
from envsync.sources.session import Session  # noqa: E402

QUESTIONS = {
    "ct200": (
        "xgrammar",
        "sglang.srt.constrained.xgrammar_backend",
        "sglang.srt.server_args",
        "sglang.srt.speculative.dflash_worker",
        "sglang.srt.speculative.ddtree_utils",
    ),
    "ct129": ("soundfile", "sglang.srt.speculative.ddtree_utils"),
}


def timed(argv: list[str], stdin: bytes = b"") -> tuple[float, bytes]:
    started = time.perf_counter()
    done = subprocess.run(argv, input=stdin, capture_output=True, check=False)
    took = time.perf_counter() - started
    if done.returncode not in (0, 1):
        raise SystemExit(f"{argv[:3]}: exit {done.returncode}: {done.stderr.decode()[-400:]}")
    return took, done.stdout


def host(name: str, runs: int, walk: bool) -> dict[str, object]:
    inventory = load_inventory(str(REPO / "examples" / "envsync.toml"), {})
    with Session(inventory=inventory, runners=Runners()) as session:
        target = targets(session, [name])[0]
        snap = session.collect_one(name, target.options)
        spec = target.spec
        assert snap.startup is not None and spec is not None
        run = startup(target, snap)
        analysis = Analysis(snap.startup, run, run.command)
    payload = {
        "roots": [[r.module, r.context] for r in analysis.roots if r.label != "site"],
        "launch": list(target.options.roots),
        "internal": list(target.options.internal),
        "main": target.options.main,
        "governed": sorted(run.governed()),
        "modules": list(QUESTIONS[name]),
    }
    times: dict[str, list[float]] = {"cold": [], "warm": [], "pip check": []}
    answer: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as cache:
        warm = host_argv(spec.python, protocol.REACH, [json.dumps(payload)], cache_dir=cache)
        cold = host_argv(spec.python, protocol.REACH, [json.dumps(payload)], cache_dir="")
        timed(warm, host_input())  # the store filled once
        for _ in range(runs):
            took, out = timed(cold, host_input())
            times["cold"].append(took)
            answer = json.loads(out.decode().splitlines()[-1][len(protocol.REACH_MARKER) :])
            times["warm"].append(timed(warm, host_input())[0])
            times["pip check"].append(timed([spec.python, "-m", "pip", "check"])[0])
    wrong = {}
    for module, got in answer["answers"].items():
        want = analysis.reached[module].context if module in analysis.reached else None
        if got.get("wide") or got.get("context") != want:
            wrong[module] = (want, got)
    if wrong:
        raise SystemExit(f"{name}: the answers differ from the whole walk's: {wrong}")
    medians = {k: statistics.median(v) for k, v in times.items()}
    ratio = {k: round(medians[k] / medians["pip check"], 2) for k in ("cold", "warm")}
    figures: dict[str, object] = {
        "host": name,
        "questions": len(QUESTIONS[name]),
        "seconds": {k: round(v, 3) for k, v in medians.items()},
        "parsed cold": answer["parsed"],
        "ratio": ratio,
    }
    if walk:
        took, _ = timed(probe_argv(spec, replace(target.options, cache_dir="")), probe_source())
        figures["whole walk cold"] = round(took, 2)
        ratio["whole walk cold"] = round(took / medians["pip check"], 1)
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--walk", action="store_true", help="time the whole walk cold too")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    for name in sorted(QUESTIONS):
        figures = host(name, args.runs, args.walk)
        print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
