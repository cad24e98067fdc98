"""Benchmark: fleets. Hosts folded into classes against one diff per host, and collecting
through Ansible (`--engine ansible`) against envsync's own SSH runner (Fabric).

  fold    1,000 simulated hosts in 12 classes (tests/fleet_sim.py: a real snapshot, its
          startup graph included, in 12 variants), through compare's real fold: time and
          peak memory (tracemalloc's peak of the fold, and the process's peak RSS),
          against the same hosts diffed one by one (every host its own class); then the
          HTML page of the classes
  engine  `envsync snapshot` of N hosts on N real sshd on loopback (N = 8 and 50), fresh
          processes, interleaved: --engine ansible against --engine envsync

Every sshd shares this machine's cores, unlike a real fleet: both engines pay for the
probes of all the hosts on the same two cores.

    .venv/bin/python -m benchmarks.fleet [--runs 3] [--hosts 8,50] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from envsync.collect import ProbeOptions, collect  # noqa: E402
from envsync.collect.importcheck import NO_IMPORT_CHECK  # noqa: E402
from envsync.compare import targets as compare  # noqa: E402
from envsync.model.environment import Snapshot  # noqa: E402
from envsync.report import render_fleet  # noqa: E402
from envsync.runner.local import LocalRunner  # noqa: E402
from envsync.sources.inventory import HostSpec  # noqa: E402
from tests import fleet_sim  # noqa: E402
from tests.figures import provenance  # noqa: E402
from tests.sshd import SSHD, available  # noqa: E402

HOSTS = REPO / "examples" / ".hosts"


def _base() -> tuple[Snapshot, str]:
    """A real snapshot to clone: the example's ct129 (SGLang watched, its startup graph),
    else this checkout's own venv."""
    python = HOSTS / "ct129" / "bin" / "python"
    if python.exists():
        spec = HostSpec(name="ct129", python=str(python), watch=("sglang",))
        options = ProbeOptions(roots=("sglang.launch_server",), internal=("sglang",))
        what = "the example's ct129 (SGLang watched, its startup graph)"
    else:
        spec = HostSpec(name="local", python=sys.executable, watch=("rich",))
        options, what = ProbeOptions(), "this checkout's venv"
    return collect(spec, LocalRunner(spec.name), options), what


def _fold_once(
    snapshots: dict[str, Snapshot], base: Snapshot
) -> tuple[float, compare.FleetComparison]:
    started = time.perf_counter()
    with fleet_sim.session(snapshots) as session:
        among = compare.targets(session, list(snapshots))
        result = compare._compare_each(
            session,
            among,
            reference=base,
            import_check=NO_IMPORT_CHECK,
        )
    return time.perf_counter() - started, result


def fold(hosts: int, classes: int) -> dict[str, object]:
    base, what = _base()
    snapshots = fleet_sim.fleet(base, hosts, classes)
    out: dict[str, object] = {"hosts": hosts, "classes": classes, "snapshot": what}
    for mode in ("folded", "one diff per host"):
        real = compare.class_key
        if mode != "folded":
            compare.class_key = lambda target, snap: target.name
        try:
            # timed without tracemalloc (it slows every allocation), then measured with it
            took, result = _fold_once(snapshots, base)
            tracemalloc.start()
            _fold_once(snapshots, base)
            _, peak = tracemalloc.get_traced_memory()
            tracemalloc.stop()
        finally:
            compare.class_key = real
        out[mode] = {"seconds": round(took, 3), "peak_mib": round(peak / 2**20, 1)}
        if mode == "folded":
            assert len(result.classes) == classes, len(result.classes)
            started = time.perf_counter()
            page = render_fleet("html", result.reports, classes=result.classes)
            out["html"] = {
                "seconds": round(time.perf_counter() - started, 3),
                "kib": len(page.encode()) // 1024,
                "rows": page.count("<tr data-order="),
            }
    out["process_peak_rss_mib"] = round(
        resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1
    )
    folded, each = out["folded"], out["one diff per host"]
    out["ratio"] = round(each["seconds"] / folded["seconds"], 1)  # type: ignore[index]  # out is a dict[str, object] of JSON figures; each mode's is a dict
    return out


def _inventory(folder: Path, servers: list[SSHD], python: str) -> Path:
    known = folder / "known_hosts"
    known.write_text("".join(s.host_key_line() for s in servers))
    text = '[defaults]\nwatch = ["sglang"]\n'
    for i, server in enumerate(servers, 1):
        text += (
            f'[hosts.h{i}]\nssh = "{server.target}"\npython = "{python}"\n'
            f'identity = "{server.client_key}"\nknown_hosts = "{known}"\n'
        )
    path = folder / "envsync.toml"
    path.write_text(text)
    return path


def engines(counts: list[int], runs: int) -> dict[str, object]:
    why = available()
    if why:
        return {"skipped": why}
    python = HOSTS / "ct129" / "bin" / "python"
    venv = str(python) if python.exists() else sys.executable
    out: dict[str, object] = {"venv": venv}
    envsync = str(Path(sys.executable).parent / "envsync")
    for n in counts:
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            servers = [SSHD(folder / "sshd", name=f"sshd{i}").start() for i in range(n)]
            try:
                inv = _inventory(folder, servers, venv)
                times: dict[str, list[float]] = {"envsync": [], "ansible": []}
                argv = [envsync, "--inventory", str(inv), "-q", "snapshot", f"h[1-{n}]"]
                for engine in times:  # warm: the hosts' caches, Ansible's ControlPersist off
                    subprocess.run([*argv, "--engine", engine], capture_output=True, check=True)
                for _ in range(runs):
                    for engine, seen in times.items():
                        started = time.perf_counter()
                        proc = subprocess.run(
                            [*argv, "--engine", engine, "-j", "8"], capture_output=True
                        )
                        if proc.returncode:
                            raise SystemExit(f"{engine}: {proc.stderr.decode()[-500:]}")
                        seen.append(time.perf_counter() - started)
                medians = {e: round(statistics.median(t), 2) for e, t in times.items()}
                out[str(n)] = {
                    **{f"{e}_s": m for e, m in medians.items()},
                    "ansible_over_envsync": round(medians["ansible"] / medians["envsync"], 2),
                }
            finally:
                for server in servers:
                    server.stop()
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--hosts", default="8,50", help="fleet sizes of the engine benchmark")
    parser.add_argument("--fold-hosts", type=int, default=1000)
    parser.add_argument("--classes", type=int, default=12)
    parser.add_argument("--json", type=Path, default=REPO / "docs" / "generated" / "fleet.json")
    parser.add_argument("--skip-engines", action="store_true")
    args = parser.parse_args()
    command = "python -m benchmarks.fleet " + " ".join(sys.argv[1:])
    figures: dict[str, object] = {**provenance(command.strip())}
    figures["fold"] = fold(args.fold_hosts, args.classes)
    print(json.dumps(figures["fold"], indent=2))
    if not args.skip_engines:
        counts = [int(n) for n in args.hosts.split(",") if n]
        figures["engines"] = engines(counts, args.runs)
        print(json.dumps(figures["engines"], indent=2))
    elif args.json.exists():  # the engines' figures of the last run that measured them, kept
        last = json.loads(args.json.read_text())
        if "engines" in last:
            figures["engines"] = {
                **last["engines"],
                "measured": last["engines"].get("measured")
                or {k: last[k] for k in ("command", "date", "commit") if k in last},
            }
    args.json.write_text(json.dumps(figures, indent=2) + "\n")
    print(f"written to {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
