"""Benchmark: time to a verdict for a service that crashes at startup.

envsync's smoke test against the story's approach, a plain poll of /health every 5 s with
a 15-minute timeout. The service is the example's demo server on ct200, which dies at
once on the missing soundfile, as SGLang 0.5.11 does. The plain poll is not run for 15
minutes: a dead server never answers, so it gives up at its timeout; its figure is the
time it would have been told. Medians of --runs.

    .venv/bin/python benchmarks/smoke.py [--runs 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from envsync.runner.agent import Agent  # noqa: E402
from envsync.runner.local import LocalRunner  # noqa: E402
from envsync.service import deploy, smoke  # noqa: E402
from envsync.sources.inventory import load_inventory  # noqa: E402

POLL_EVERY, POLL_TIMEOUT = 5.0, 15 * 60.0


def death_time(python: str, command: list[str]) -> float:
    """How long the service itself takes to die, run directly."""
    started = time.perf_counter()
    subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    subprocess.run(
        [
            sys.executable,
            str(REPO / "examples" / "build_hosts.py"),
            "--runtime",
            str(REPO / "examples" / ".hosts" / "runtime"),
        ],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    inventory = load_inventory(str(REPO / "examples" / "envsync.toml"), os.environ)
    spec = inventory.host("ct200")
    service = spec.service
    assert service is not None
    runner = LocalRunner("ct200")
    verdicts, deaths = [], []
    for _ in range(args.runs):
        deployment = deploy(spec, runner, service, None)
        verdict = smoke(spec, runner, deployment, deadline=120)
        verdicts.append(verdict.seconds)
        deaths.append(death_time(spec.python, list(deployment.command)))
        assert verdict.kind == "crashed", verdict
    Agent(spec, runner).stop("service")
    envsync = statistics.median(verdicts)
    death = statistics.median(deaths)
    # The plain poll: checks /health at 0, 5, 10 ... s; a dead server never answers, so
    # the loop ends at its 15-minute timeout (the story's user said "crashed" by hand).
    plain = POLL_TIMEOUT
    print(f"service: ct200's demo server, dies with: {verdict.exception}")
    print(f"runs: {args.runs}; medians")
    print(f"  the process dies after            {death * 1000:8.0f} ms (run directly)")
    print(
        f"  envsync smoke: crashed verdict at {envsync * 1000:8.0f} ms "
        f"({(envsync - death) * 1000:+.0f} ms after the process died; target <= 2000)"
    )
    print(f"  plain /health poll every {POLL_EVERY:g} s:   {plain:8.0f} s  (its 15-minute timeout)")
    print(f"ratio plain/envsync: {plain / envsync:.0f}x")
    print(json.dumps({"envsync_s": envsync, "death_s": death, "plain_s": plain}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
