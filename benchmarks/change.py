"""Benchmark: what a change costs, on the example as the quick start builds it.

Each step changes ct200 (a copy of it, so that the quick start's hosts are left alone),
then times `envsync diff ct129 ct200` once, against `pip check` of ct200 timed in the same
round; the verdicts of each step are compared with a `--no-cache` diff of the same state
in a cache folder of its own (any difference fails the benchmark). Each host keeps its
facts in a cache folder of its own (an `env XDG_CACHE_HOME=...` exec prefix), as two
machines would, and so does envsync:

  warm        nothing changed since the last diff
  edit        one line appended to sglang/srt/utils/common.py (a file startup imports)
  revert      the same file put back
  install     a real `pip install --no-deps` of another xgrammar (0.1.32, startup imports
              it), then the one before put back
  repair      `repair --apply` (soundfile installed by hand first, as the story's user
              did), then `rollback`, each followed by a diff
  check       a warm `check --lock` of ct200 against the lock of ct129
  crash       `deploy ct200`, whose service dies at startup, against the service's own
              time to die (its command run directly)
  cold        a target envsync has never seen: envsync's cache and the target's emptied,
              then the reference collected once (`diff ct129 ct129`, as a user who has
              diffed the reference before), then the diff; then both hosts' caches and
              envsync's empty, with 1, 2 and 4 parse workers on each host
  fleet       N nodes of ct200's image, every cache empty, diffed against the warm
              reference at once: the hosts' CPU time against one node's cold diff
  simulated   100 nodes of ct200's image (probes of one venv, each with a cache folder of
              its own), cold, diffed against the warm reference: the CPU of every host-side
              command on them (GNU time in each node's exec prefix) against one node's
              cold parse (its probe alone, with --no-cache)
  caches      the size of envsync's and the hosts' caches after N diffs, each after one
              edited file, against the size after the first diff

    .venv/bin/python -m benchmarks.change [--runs 3] [--changes 20] [--nodes 8] [--simulated 100]

benchmarks/all.py runs it too, and writes its figures with the others.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.helpers import fetch  # noqa: E402
from tests.sshd import free_port  # noqa: E402

HOSTS = REPO / "examples" / ".hosts"
EDITED = "sglang/srt/utils/common.py"
WORKERS = (1, 2, 4)


def measured(argv: list[str], env: dict[str, str], ok: tuple[int, ...] = (0, 1)) -> Measured:
    """One fresh process: its wall time, peak RSS and CPU time (its children's included),
    as GNU time reads them."""
    with tempfile.NamedTemporaryFile("r") as out:
        started = time.perf_counter()
        proc = subprocess.run(
            ["/usr/bin/time", "-f", "%M %U %S", "-o", out.name, *argv],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            check=False,
        )
        wall = time.perf_counter() - started
        peak, user, system = out.read().split()[-3:]
    if proc.returncode not in ok:
        raise SystemExit(f"{argv}: exit {proc.returncode}: {proc.stderr.decode()[-500:]}")
    return Measured(wall, int(peak), float(user) + float(system))


@dataclass(frozen=True)
class Measured:
    wall: float  # seconds
    peak_kib: int
    cpu: float  # seconds, user and system, the command's children included


@dataclass
class Results:
    """Each step's ratios to its peer, the peaks, the figures that are not ratios."""

    ratios: dict[str, list[float]] = field(default_factory=dict)
    peaks: dict[str, int] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    mismatches: list[str] = field(default_factory=list)

    def add(self, name: str, ratio: float, peak_kib: int) -> None:
        self.ratios.setdefault(name, []).append(ratio)
        self.peaks[name] = max(self.peaks.get(name, 0), peak_kib)

    def medians(self) -> dict[str, float]:
        return {name: statistics.median(values) for name, values in self.ratios.items()}


# (step, target, what the ratio is against): the targets of issue 30
TARGETS: tuple[tuple[str, float, str], ...] = (
    ("warm diff", 0.5, "pip check"),
    ("diff after one edited file", 1.0, "pip check"),
    ("diff after putting it back", 1.0, "pip check"),
    ("diff after pip install of another xgrammar", 1.0, "pip check"),
    ("diff after putting xgrammar back", 1.0, "pip check"),
    ("diff after repair --apply", 1.0, "pip check"),
    ("diff after rollback", 1.0, "pip check"),
    ("warm check --lock", 0.5, "pip check"),
    ("cold target, warm reference", 2.0, "pip check"),
    *((f"both hosts cold, {n} worker{'s' if n > 1 else ''}", 3.0, "pip check") for n in WORKERS),
)


def _site(python: Path) -> Path:
    out = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        check=True,
        capture_output=True,
        text=True,
    )
    return Path(out.stdout.strip())


def _prefix(folder: Path, name: str, jobs: int | None = None) -> str:
    """The exec prefix that gives host `name` a cache folder of its own (and its parse
    workers), as a machine of its own has."""
    words = ["env", f"XDG_CACHE_HOME={folder / 'hosts' / name}"]
    if jobs:
        words.append(f"ENVSYNC_PARSE_JOBS={jobs}")
    return json.dumps(words)


def _inventory(folder: Path, ct200: Path, nodes: int, jobs: int | None = None) -> Path:
    text = (REPO / "examples" / "envsync.toml").read_text()
    text = text.replace('".hosts/ct200/', f'"{ct200}/').replace('".hosts/', f'"{HOSTS}/')
    text = text.replace("{inventory_dir}", str(REPO / "examples"))
    text = text.replace("port = 30002", f"port = {free_port()}")
    lines = []
    for line in text.splitlines():
        lines.append(line)
        for host in ("ct129", "ct200"):
            if line.strip() == f"[hosts.{host}]":
                lines.append(f"exec = {_prefix(folder, host, jobs)}")
    python = ct200 / "bin" / "python"
    for i in range(nodes):
        lines += [f"[hosts.n{i}]", f'python = "{python}"', f"exec = {_prefix(folder, f'n{i}')}"]
    path = folder / ("envsync.toml" if jobs is None else f"envsync-{jobs}.toml")
    path.write_text("\n".join(lines) + "\n")
    return path


def _simulated_inventory(folder: Path, ct200: Path, nodes: int) -> Path:
    """The example's inventory and `nodes` nodes of ct200's image, each with a cache folder
    of its own, every host-side command on it timed into cpu/NODE.txt by GNU time."""
    lines = _inventory(folder, ct200, 0).read_text().splitlines()
    python = ct200 / "bin" / "python"
    (folder / "cpu").mkdir(exist_ok=True)
    for i in range(nodes):
        words = ["/usr/bin/time", "-a", "-o", str(folder / "cpu" / f"s{i}.txt"), "-f", "%U %S"]
        words += ["env", f"XDG_CACHE_HOME={folder / 'hosts' / f's{i}'}"]
        lines += [f"[hosts.s{i}]", f'python = "{python}"', f"exec = {json.dumps(words)}"]
    path = folder / "envsync-simulated.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def _host_cpu(folder: Path, nodes: range) -> float:
    """The CPU seconds of every host-side command timed on these nodes (then forgotten)."""
    total = 0.0
    for i in nodes:
        log = folder / "cpu" / f"s{i}.txt"
        if log.is_file():
            for line in log.read_text().splitlines():
                words = line.split()
                if len(words) == 2 and all(w.replace(".", "", 1).isdigit() for w in words):
                    total += float(words[0]) + float(words[1])
            log.unlink()
    return total


def _report(argv: list[str], env: dict[str, str]) -> list[str]:
    out = subprocess.run(
        [*argv, "--format", "json"], env=env, capture_output=True, check=False, text=True
    )
    if out.returncode not in (0, 1):
        raise SystemExit(f"{argv}: exit {out.returncode}: {out.stderr[-400:]}")
    data = json.loads(out.stdout)
    return sorted(
        json.dumps([f["severity"], f["kind"], f["subject"]], sort_keys=True)
        for f in data["findings"]
    )


def _size(*folders: Path) -> int:
    return sum(p.stat().st_size for f in folders for p in f.rglob("*") if p.is_file())


def _clear(*folders: Path) -> None:
    for f in folders:
        shutil.rmtree(f, ignore_errors=True)


def _service_crash(inv: Path, host: str) -> float:
    """Seconds the host's service takes to die when run directly (its own time to crash)."""
    from envsync.model.launch import effective_command
    from envsync.sources.inventory import load_inventory

    spec = load_inventory(str(inv), os.environ).host(host)
    assert spec.service is not None
    argv = effective_command(spec.service, spec, None)
    started = time.perf_counter()
    # the exec prefix is the host's: the service runs under it, as envsync runs it
    subprocess.run([*spec.exec, *argv], capture_output=True, check=False, timeout=300)
    return time.perf_counter() - started


def measure(
    runs: int = 3, changes: int = 20, nodes: int = 8, compare: bool = True, simulated: int = 100
) -> Results:
    """Every step, `runs` times where a step can be repeated."""
    envsync = REPO / ".venv" / "bin" / "envsync"
    out = Results()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        ct200 = folder / "ct200"
        shutil.copytree(HOSTS / "ct200", ct200, symlinks=True)
        python = ct200 / "bin" / "python"
        # the copy's own paths: its scripts and pyvenv.cfg name the original
        cfg = ct200 / "pyvenv.cfg"
        cfg.write_text(cfg.read_text().replace(str(HOSTS / "ct200"), str(ct200)))
        inv = _inventory(folder, ct200, nodes)
        own = folder / "cache"  # envsync's own cache folder
        env = {**os.environ, "XDG_CACHE_HOME": str(own)}
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        cold_env = {**os.environ, "XDG_CACHE_HOME": str(folder / "cold")}
        hosts = folder / "hosts"

        def cli(inventory: Path = inv) -> list[str]:
            return [str(envsync), "--inventory", str(inventory), "-q"]

        diff = [*cli(), "diff", "ct129", "ct200"]
        pip_check = [str(python), "-m", "pip", "--disable-pip-version-check", "check"]
        pip = [str(python), "-m", "pip", "-q", "--disable-pip-version-check"]
        lock = folder / "ct129.lock"
        subprocess.run([*cli(), "lock", "ct129", "-o", str(lock)], env=env, check=True)
        edited = _site(python) / EDITED
        original = edited.read_bytes()
        wheels = REPO / "examples" / ".cache" / "wheels"
        new_xgrammar = fetch(wheels, "xgrammar==0.1.32")
        old_xgrammar = fetch(wheels, "xgrammar==0.1.10")
        soundfile = fetch(wheels, "soundfile==0.13.1")

        def install(wheel: Path) -> None:
            subprocess.run([*pip, "install", "--no-deps", "--no-index", str(wheel)], check=True)

        def step(name: str, argv: list[str], compare_it: bool = True) -> Measured:
            took = measured(argv, env)
            check = measured(pip_check, env)
            out.add(name, took.wall / check.wall, took.peak_kib)
            print(  # as it goes: a long run says where it is
                f"  {name}: {took.wall:.2f} s, pip check {check.wall:.2f} s",
                file=sys.stderr,
                flush=True,
            )
            if compare_it and compare:
                warm = _report(argv, env)
                _clear(folder / "cold")
                cold = _report([*argv[:4], "diff", "--no-cache", *argv[-2:]], cold_env)
                if warm != cold:
                    out.mismatches.append(f"{name}: {warm} != {cold}")
            return took

        # cold: a target envsync has never seen, against a reference it has collected
        measured(diff, env)
        for _ in range(runs):
            _clear(own, hosts / "ct200")
            # the reference's startup read once (a snapshot reads no startup graph)
            subprocess.run(
                [*cli(), "diff", "ct129", "ct129"], env=env, check=True, stdout=subprocess.DEVNULL
            )
            step("cold target, warm reference", diff, compare_it=False)
        # both hosts cold, with 1, 2 and 4 parse workers on each
        for jobs in WORKERS:
            argv = [*cli(_inventory(folder, ct200, 0, jobs)), "diff", "ct129", "ct200"]
            for _ in range(max(1, runs // 2)):
                _clear(own, hosts / "ct129", hosts / "ct200")
                step(f"both hosts cold, {jobs} worker{'s' if jobs > 1 else ''}", argv, False)
        measured(diff, env)  # the first contact with the default inventory
        one = _size(own, hosts)  # the caches of one diff: both hosts' facts and graphs, once
        for i in range(runs):
            step("warm diff", diff, compare_it=i == 0)
            edited.write_bytes(original + f"\n# edited {time.time_ns()}\n".encode())
            time.sleep(3)  # past the racy window: the edit is cached as any file is
            step("diff after one edited file", diff, compare_it=i == 0)
            edited.write_bytes(original)
            time.sleep(3)
            step("diff after putting it back", diff, compare_it=False)
            install(new_xgrammar)
            step("diff after pip install of another xgrammar", diff, compare_it=i == 0)
            install(old_xgrammar)
            step("diff after putting xgrammar back", diff, compare_it=False)
            check = [*cli(), "check", "--lock", str(lock), "ct200"]
            measured(check, env)  # the state changed with the step before: warm it
            step("warm check --lock", check, False)
        # the crash verdict: deploy ct200, whose service dies at startup
        crash = [*cli(), "deploy", "ct200", "--deadline", "120"]
        lags = []
        for _ in range(runs):
            took = measured(crash, env, ok=(5,))
            lags.append(took.wall - _service_crash(inv, "ct200"))
            out.peaks["crash verdict"] = max(out.peaks.get("crash verdict", 0), took.peak_kib)
        out.seconds["crash verdict beyond the service's own crash"] = statistics.median(lags)
        subprocess.run([*cli(), "stop", "ct200"], env=env, capture_output=True, check=False)
        # repair --apply, then rollback, each followed by a diff
        install(soundfile)
        for i in range(max(1, runs // 2)):
            subprocess.run([*cli(), "repair", "--apply", "--deadline", "120"], env=env, check=True)
            step("diff after repair --apply", diff, compare_it=i == 0)
            subprocess.run([*cli(), "rollback", "ct200"], env=env, check=True, capture_output=True)
            step("diff after rollback", diff, compare_it=i == 0)
        subprocess.run([*cli(), "stop", "ct200"], env=env, capture_output=True, check=False)
        subprocess.run([*pip, "uninstall", "-y", "soundfile"], check=True)
        # a fleet of one image, every cache empty, against the warm reference
        if nodes:
            measured(diff, env)
            _clear(own, *(hosts / f"n{i}" for i in range(nodes)))
            one_node = measured([*cli(), "diff", "ct129", "n0"], env)
            _clear(own, *(hosts / f"n{i}" for i in range(nodes)))
            fleet = [*cli(), "diff", "ct129", *(f"n{i}" for i in range(nodes)), "-j", "4"]
            all_nodes = measured(fleet, env)
            out.seconds[f"fleet of {nodes} cold nodes: CPU over one node's cold diff"] = (
                all_nodes.cpu / one_node.cpu
            )
            out.peaks[f"fleet of {nodes} cold nodes"] = all_nodes.peak_kib
            _clear(*(hosts / f"n{i}" for i in range(nodes)))
        if simulated:
            _simulate_fleet(out, folder, ct200, simulated, env)
        # the caches after many diffs, each after one change
        before = _size(own, hosts)
        for i in range(changes):
            edited.write_bytes(original + f"\n# change {i}\n".encode())
            os.utime(edited, ns=(1_600_000_000_000_000_000 + i, 1_600_000_000_000_000_000 + i))
            measured(diff, env)
        edited.write_bytes(original)
        after = _size(own, hosts)
        out.seconds["caches after the first diff, MB"] = one / 2**20
        out.seconds["caches after the steps, MB"] = before / 2**20
        out.seconds[f"caches after {changes} more diffs, MB"] = after / 2**20
        out.seconds[f"caches after {changes} more diffs / after the first"] = after / one
    return out


def _simulate_fleet(
    out: Results, parent: Path, ct200: Path, nodes: int, env: dict[str, str]
) -> None:
    """`nodes` nodes of one image, cold, against the warm reference: their host CPU over one
    node's cold parse (its probe with --no-cache: nothing kept, nothing given). In a folder
    of its own: the hosts' caches, the logs of GNU time."""
    envsync = REPO / ".venv" / "bin" / "envsync"
    folder = parent / "simulated"
    folder.mkdir()
    inv = _simulated_inventory(folder, ct200, nodes)
    hosts = folder / "hosts"
    cli = [str(envsync), "--inventory", str(inv), "-q"]
    _host_cpu(folder, range(nodes))
    measured([*cli, "diff", "ct129", "ct200"], env)  # the reference warm, its packs envsync's
    measured([*cli, "diff", "ct129", "s0", "--no-cache"], env)
    one = _host_cpu(folder, range(1))
    _clear(*(hosts / f"s{i}" for i in range(nodes)))
    fleet = measured([*cli, "diff", "ct129", *(f"s{i}" for i in range(nodes)), "-j", "8"], env)
    total = _host_cpu(folder, range(nodes))
    label = f"fleet of {nodes} simulated nodes: host CPU over one node's cold parse"
    out.seconds[label] = total / one
    out.seconds[f"fleet of {nodes} simulated nodes: one node's cold parse, CPU s"] = one
    out.seconds[f"fleet of {nodes} simulated nodes: all nodes, host CPU s"] = total
    out.seconds[f"fleet of {nodes} simulated nodes: the diff, wall s"] = fleet.wall
    out.peaks[f"fleet of {nodes} simulated nodes"] = fleet.peak_kib
    _clear(folder)


def rows(results: Results) -> list[tuple[str, float, float, str]]:
    """(label, value, target, note) of each step that ran, as benchmarks.all prints them."""
    medians = results.medians()
    out = [
        (f"{name} / {peer}", medians[name], target, "")
        for name, target, peer in TARGETS
        if name in medians
    ]
    lag = results.seconds.get("crash verdict beyond the service's own crash")
    if lag is not None:
        out.append(("crash verdict beyond the service's crash, s", lag, 2.0, "(full stack)"))
    for label, value in results.seconds.items():
        if label.startswith("fleet of") and "over one node" in label:
            out.append((label, value, 1.2, ""))
        if label.startswith("caches after") and label.endswith("/ after the first"):
            out.append((label, value, 2.0, ""))
    return out


def print_results(results: Results) -> None:
    print("each step's wall time over pip check's in the same round (medians), peak RSS:")
    for name, value in results.medians().items():
        print(f"  {name:44s} {value:6.2f}x  {results.peaks[name] / 1024:6.1f} MiB")
    for label, value in results.seconds.items():
        print(f"  {label:60s} {value:8.2f}")
    for line in results.mismatches:
        print("VERDICTS DIFFER:", line)


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--changes", type=int, default=20)
    parser.add_argument("--nodes", type=int, default=8, help="the fleet's nodes (0: none)")
    parser.add_argument("--no-compare", action="store_true", help="skip the --no-cache diffs")
    parser.add_argument(
        "--simulated", type=int, default=100, help="the simulated fleet's nodes (0: none)"
    )
    args = parser.parse_args()
    results = measure(args.runs, args.changes, args.nodes, not args.no_compare, args.simulated)
    print_results(results)
    for label, value, target, note in rows(results):
        met = "met" if value <= target else "NOT met"
        print(f"  {label:60s} {value:6.2f}   target <= {target:<5.2f} {note} {met}")
    return 1 if results.mismatches else 0


if __name__ == "__main__":
    raise SystemExit(main())
