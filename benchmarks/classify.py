"""Benchmark: `envsync diff` with SGLang's import graph, cold and cached, against `pip check`.

On the built-in example (ct129 and ct200: the same real SGLang 0.5.11 wheel, ~2,500
files), times, interleaved and as fresh processes:
  - envsync diff ct129 ct200 --no-cache   (cold: the target's graph is read with ast)
  - envsync diff ct129 ct200              (cached: the graph's facts come from the host cache)
  - pip check on ct200                    (the peer)
and prints medians, ratios, and what each finds.

    .venv/bin/python benchmarks/classify.py [--runs 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
INVENTORY = REPO / "examples" / "envsync.toml"
ENVSYNC = [sys.executable, "-m", "envsync", "--inventory", str(INVENTORY), "-q"]


def timed(argv: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    subprocess.run([sys.executable, str(REPO / "examples" / "build_hosts.py")], check=True)
    ct200 = REPO / "examples" / ".hosts" / "ct200" / "bin" / "python"
    with tempfile.TemporaryDirectory() as home:
        env = {**os.environ, "XDG_CACHE_HOME": home}
        commands = {
            "envsync diff (cold graph)": [*ENVSYNC, "diff", "--no-cache", "ct129", "ct200"],
            "envsync diff (cached graph)": [*ENVSYNC, "diff", "ct129", "ct200"],
            "pip check (ct200)": [str(ct200), "-m", "pip", "check", "--disable-pip-version-check"],
        }
        for argv in commands.values():
            timed(argv, env)  # warm the page cache and the graph cache
        samples: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(args.runs):
            for name, argv in commands.items():
                samples[name].append(timed(argv, env))
        snap = json.loads(
            subprocess.run(
                [*ENVSYNC, "diff", "ct129", "ct200", "--format", "json"],
                env=env,
                capture_output=True,
                check=False,
            ).stdout
        )
        graph = subprocess.run(
            [*ENVSYNC, "snapshot", "ct200"], env=env, capture_output=True, check=False
        )
        del graph
        pip_check = subprocess.run(
            commands["pip check (ct200)"], capture_output=True, text=True, check=False
        )
    medians = {name: statistics.median(s) for name, s in samples.items()}
    print(f"runs: {args.runs}, interleaved; median wall time per command")
    for name, value in medians.items():
        print(f"  {name:28s} {value * 1000:8.1f} ms")
    peer = medians["pip check (ct200)"]
    print(f"ratio cold/pip check:   {medians['envsync diff (cold graph)'] / peer:.2f}")
    print(f"ratio cached/pip check: {medians['envsync diff (cached graph)'] / peer:.2f}")
    print("\nenvsync diff finds:")
    for f in snap["findings"]:
        print(f"  {f['severity']:8s} {f['kind']:8s} {f['subject']}")
    lines = pip_check.stdout.strip().splitlines()
    print(f"\npip check finds ({len(lines)} lines; those naming the story's packages):")
    for line in lines:
        if any(k in line for k in ("xgrammar", "soundfile")):
            print(f"  {line}")
    print("  (nothing on patched files, on what startup imports, or on a launch-flag workaround)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
