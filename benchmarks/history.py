"""Benchmark: the state folder. What a state of a host weighs, with and without its
startup import graph, and how fast `envsync history` reads 100 states, against reading the
same files with json.load.

The hosts are the built-in example's (examples/.hosts: `bash examples/quickstart.sh` builds
them): 51 distributions, SGLang watched (2,540 files hashed), and its startup graph. The
100 states are ct129's snapshot with one package at another version in each (as a host
that a watch saw change 99 times), recorded through envsync's own `record`. Timed, in
interleaved rounds, medians:

  history     `history()` of the 100 states: each file read and decoded into the snapshot
              dataclasses, and what changed between each pair (the differences `diff` finds)
  read        the same: decoded, without the changes
  json.load   the peer: json.load of the same 100 files, nothing else
  command     a fresh `envsync history ct129` process (its start and imports included)

    .venv/bin/python benchmarks/history.py [--runs 5] [--states 100]
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
from datetime import datetime, timedelta, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from envsync.compare import targets as compare  # noqa: E402
from envsync.model.codec import to_data  # noqa: E402
from envsync.model.environment import Snapshot  # noqa: E402
from envsync.runner import Runners  # noqa: E402
from envsync.sources.history import history  # noqa: E402
from envsync.sources.inventory import load_inventory  # noqa: E402
from envsync.sources.session import Session  # noqa: E402
from envsync.sources.states import StateStore, load, record, states_of  # noqa: E402

INVENTORY = REPO / "examples" / "envsync.toml"


def variant(snap: Snapshot, i: int) -> Snapshot:
    """The snapshot with its i-th package (in turn) at another version."""
    dists = list(snap.distributions)
    k = i % len(dists)
    dists[k] = replace(dists[k], version=f"{dists[k].version}.post{i}")
    return replace(snap, distributions=tuple(dists))


def sizes(session: Session, host: str) -> tuple[int, int]:
    """Bytes of a state file of `host` without its graph, and what its graph would add."""
    (target,) = compare.targets(session, [host])
    full = session.collect_one(host, target.options)
    compact = (",", ":")
    with_graph = len(json.dumps(to_data(full), separators=compact))
    without = len(json.dumps(to_data(replace(full, startup=None)), separators=compact))
    return without, with_graph


def median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--states", type=int, default=100)
    args = parser.parse_args()
    if not (REPO / "examples" / ".hosts" / "ct129" / "bin" / "python").exists():
        print("benchmarks/history.py: run `bash examples/quickstart.sh` first", file=sys.stderr)
        return 1
    inventory = load_inventory(str(INVENTORY), {})
    with tempfile.TemporaryDirectory() as tmp:
        store = StateStore(root=Path(tmp) / "states", keep=args.states)
        with Session(inventory=inventory, runners=Runners(), states=store) as session:
            print("state size per host (one JSON file):")
            for host in ("ct129", "ct200"):
                without, with_graph = sizes(session, host)
                print(
                    f"  {host}: {without / 1024:.0f} KiB without the startup graph, "
                    f"{with_graph / 1024:.0f} KiB with it ({with_graph / without:.1f}x)"
                )
            base = session.collect_one("ct129")
            t0 = datetime(2026, 12, 1, tzinfo=timezone.utc)
            for i in range(args.states):
                record(store, variant(base, i), "watch", now=t0 + timedelta(minutes=i))
            states = states_of(store, "ct129")
            assert len(states) == args.states
            total = sum(s.path.stat().st_size for s in states)
            print(f"{len(states)} states of ct129: {total / 1024 / 1024:.1f} MiB on disk")

            def run_history() -> None:
                done = history(session, "ct129")
                assert len(done.entries) == args.states

            def run_read() -> None:
                for state in states:
                    load(state)

            def run_json() -> None:
                for state in states:
                    with state.path.open("rb") as f:
                        json.load(f)

            command = [
                str(REPO / ".venv" / "bin" / "envsync"),
                "--inventory",
                str(INVENTORY),
                "history",
                "ct129",
                "--state-dir",
                str(store.root),
                "--no-live",  # the records alone: what this benchmark times
            ]

            def run_command() -> None:
                subprocess.run(command, check=True, stdout=subprocess.DEVNULL)

            timings: dict[str, list[float]] = {
                "history": [],
                "read": [],
                "json.load": [],
                "command": [],
            }
            work = {
                "history": run_history,
                "read": run_read,
                "json.load": run_json,
                "command": run_command,
            }
            for fn in work.values():
                fn()  # warm the page cache and the imports
            for _ in range(args.runs):
                for name, fn in work.items():
                    started = time.perf_counter()
                    fn()
                    timings[name].append(time.perf_counter() - started)
    peer = median_ms(timings["json.load"])
    print(f"reading {args.states} states, medians of {args.runs} interleaved rounds:")
    for name in ("history", "read", "json.load", "command"):
        ms = median_ms(timings[name])
        print(f"  {name:<10} {ms:8.1f} ms  {ms / peer:5.2f}x json.load")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
