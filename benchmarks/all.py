"""Benchmark: every performance target of envsync in one run, each ratio next to its target.

All commands run as fresh processes, interleaved round by round (so that the load of
this machine weighs on all of them alike); the median wall time of each is used, and the
peak RSS of each process is read by GNU time (`time` on Debian), which runs it. Measured:

  diff        warm `envsync diff ct129 ct200` (graph and hashes cached on both hosts),
              cold (--no-cache), against `pip check` of the target (the built-in example)
  snapshot    warm `envsync snapshot` of benchmarks/snapshot.py's venv (106 distributions,
              SGLang watched: 2,540 files) against `pip freeze` there
  editable    an editable SGLang checkout against the wheel install (benchmarks/editable.py)
  fleets      8 SSH hosts against 1 (8 sshd on loopback), next to OpenSSH's own `ssh host
              true` on the same hosts; the same through a proxy that delays every segment
              by 50 ms each way; 50 local hosts (peak RSS)
  scheduling  the real Session.collect_each on 256 and 1,000 simulated hosts (a runner that
              only sleeps, then answers as a warm host does: the graph named by digest),
              each in a process of its own (peak RSS)
  crash       the smoke test's verdict after the process died, local
  change      what a change costs (benchmarks/change.py): a diff after an edit, a pip
              install, a repair and a rollback, cold hosts, a cold fleet, the caches; each
              step's verdicts compared with a --no-cache diff of the same state

The SSH parts need root and sshd; without them they are left out, and said so. What it
prints it also writes, with the date, the machine and the commit, to
docs/generated/performance.json (--json), which the docs' performance page shows; the
README's performance section is generated from that file (never edited by hand).

    .venv/bin/python -m benchmarks.all [--runs 7] [--json PATH] [--no-change]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from docsgen.figures import PERFORMANCE, readme_with_performance  # noqa: E402
from envsync.collect import probe_argv, probe_source  # noqa: E402
from envsync.runner import CommandResult, Runner, Runners  # noqa: E402
from envsync.runner.local import LocalRunner  # noqa: E402
from envsync.sources.inventory import HostSpec, Inventory  # noqa: E402
from envsync.sources.session import Session  # noqa: E402
from tests.figures import provenance  # noqa: E402
from tests.sshd import free_port  # noqa: E402

HOSTS = REPO / "examples" / ".hosts"
FLEET = 8
DELAY = 0.05  # seconds, each way, per segment
MANY = 50
SIMULATED = (256, 1000)  # hosts of the simulated collections


def run_measured(argv: list[str], env: dict[str, str]) -> tuple[float, int]:
    """(wall seconds, peak RSS in KiB) of one fresh process, as GNU time reads them
    (benchmarks/change.py `measured`): a process forked from this one would inherit this
    one's peak RSS (Linux keeps it across exec), GNU time's small fork does not."""
    from benchmarks.change import measured

    took = measured(argv, env)  # diff exits 1 on drift, pip check on conflicts
    return took.wall, took.peak_kib


def interleaved(
    commands: dict[str, list[str]], runs: int, env: dict[str, str]
) -> tuple[dict[str, float], dict[str, int]]:
    """Each command once (warming the page cache and the host caches), then `runs`
    interleaved rounds: the median wall time and the largest peak RSS of each."""
    for argv in commands.values():
        run_measured(argv, env)
    walls: dict[str, list[float]] = {name: [] for name in commands}
    rss: dict[str, int] = dict.fromkeys(commands, 0)
    for _ in range(runs):
        for name, argv in commands.items():
            wall, peak = run_measured(argv, env)
            walls[name].append(wall)
            rss[name] = max(rss[name], peak)
    return {name: statistics.median(s) for name, s in walls.items()}, rss


# ---------------------------------------------------------------------------------------
# The latency test bed: a TCP proxy that delays every segment by DELAY each way


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

    async def deliver() -> None:
        loop = asyncio.get_running_loop()
        while True:
            due, data = await queue.get()
            if due > loop.time():
                await asyncio.sleep(due - loop.time())
            if not data:
                writer.close()
                return
            writer.write(data)
            await writer.drain()

    task = asyncio.ensure_future(deliver())
    loop = asyncio.get_running_loop()
    try:
        while True:
            data = await reader.read(65536)
            queue.put_nowait((loop.time() + DELAY, data))
            if not data:
                break
        await task
    except (ConnectionError, OSError):
        task.cancel()


@contextmanager
def delayed(ports: list[int]) -> Iterator[list[int]]:
    """One proxy per upstream port on 127.0.0.1; yields the proxies' ports."""
    loop = asyncio.new_event_loop()
    servers: list[asyncio.base_events.Server] = []

    def handler(upstream: int):
        async def handle(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
            ur, uw = await asyncio.open_connection("127.0.0.1", upstream)
            await asyncio.gather(_pipe(r, uw), _pipe(ur, w))

        return handle

    async def start() -> list[int]:
        for port in ports:
            servers.append(await asyncio.start_server(handler(port), "127.0.0.1", 0))
        return [s.sockets[0].getsockname()[1] for s in servers]

    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield asyncio.run_coroutine_threadsafe(start(), loop).result(10)
    finally:
        # The loop's thread is a daemon: it ends with the benchmark, its pipes with it.
        for s in servers:
            loop.call_soon_threadsafe(s.close)


# ---------------------------------------------------------------------------------------
# Scheduling: the real Session.collect_many on hosts whose runner only sleeps


class _Sleeper:
    def __init__(self, host: str, latency: float, stdout: bytes) -> None:
        self.host, self.latency, self.stdout = host, latency, stdout

    def run(
        self, argv: Sequence[str], *, input: bytes | None = None, timeout: float
    ) -> CommandResult:
        time.sleep(self.latency)
        return CommandResult(
            argv=tuple(argv), returncode=0, stdout=self.stdout, stderr=b"", duration_s=0.0
        )


class _SleepingRunners(Runners):
    def __init__(self, latency: float, stdout: bytes) -> None:
        super().__init__()
        self.latency, self.stdout = latency, stdout

    def __call__(self, spec: HostSpec) -> Runner:
        return _Sleeper(spec.name, self.latency, self.stdout)


def simulated_fleet(
    hosts: int, jobs: int, latency: float, env: dict[str, str]
) -> tuple[float, int]:
    """(wall seconds, peak RSS in KiB) of collect_many over `hosts` simulated hosts that
    each take `latency`, in a process of its own (`--simulate`)."""
    argv = [sys.executable, "-m", "benchmarks.all", "--simulate", str(hosts)]
    argv += ["--jobs", str(jobs), "--latency", str(latency)]
    out = subprocess.run(argv, env=env, capture_output=True, text=True, check=True, cwd=REPO)
    data = json.loads(out.stdout)
    return data["wall"], data["rss_kib"]


def _simulate(hosts: int, jobs: int, latency: float) -> int:
    """The child of simulated_fleet: every host answers as a warm host does with the wire
    protocol, the example ct129's document with its startup graph named by digest (its
    modules kept here from one real answer); the wall time and this process's peak RSS."""
    import resource

    from envsync.collect import ProbeOptions, parse_probe_output, wire

    spec = HostSpec(name="one", python=str(HOSTS / "ct129" / "bin" / "python"))
    options = ProbeOptions(roots=("sglang.launch_server",), internal=("sglang",))
    runner = LocalRunner("one")
    full = runner.run(probe_argv(spec, options), input=probe_source(), timeout=600).stdout
    parse_probe_output("one", full, lazy_graph=True, request="simulated")
    known = wire.known("simulated")
    warm = runner.run(probe_argv(spec, options, known=known), input=probe_source(), timeout=600)
    assert warm.stdout.count(b"\n") == 1, "the warm answer names its parts"
    specs = {f"h{i}": HostSpec(name=f"h{i}", python="python3") for i in range(hosts)}
    session = Session(
        inventory=Inventory(path=None, hosts=specs),
        runners=_SleepingRunners(latency, warm.stdout),
        jobs=jobs,
        probe=options,
    )
    started = time.perf_counter()
    count = 0
    for _, result in session.collect_each([(name, None) for name in specs]):
        assert not isinstance(result, Exception), result
        count += 1
    wall = time.perf_counter() - started
    assert count == hosts
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"wall": wall, "rss_kib": peak}))
    return 0


# ---------------------------------------------------------------------------------------


def crash_after_death(inventory_path: Path, host: str, runs: int) -> float:
    """Median seconds from the service's death to envsync smoke's `crashed` verdict: the
    example's ct200 service, which dies at once (its death is timed by running it here)."""
    from envsync.runner.agent import Agent
    from envsync.service import deploy, smoke
    from envsync.sources.inventory import load_inventory

    inventory = load_inventory(str(inventory_path), os.environ)
    spec = inventory.host(host)
    assert spec.service is not None
    runners = Runners()
    runner = runners(spec)
    lags = []
    for _ in range(runs):
        deployment = deploy(spec, runner, spec.service, None)
        verdict = smoke(spec, runner, deployment, deadline=120)
        assert verdict.kind == "crashed", verdict
        started = time.perf_counter()
        subprocess.run(list(deployment.command), capture_output=True, check=False)
        lags.append(verdict.seconds - (time.perf_counter() - started))
    Agent(spec, runner).stop("service")
    runners.close()
    return statistics.median(lags)


def _inventory(
    folder: Path,
    servers: list,
    proxies: list[int],
    pythons: dict[str, Path],
) -> Path:
    python = HOSTS / "ct129" / "bin" / "python"
    text = (REPO / "examples" / "envsync.toml").read_text()
    text = text.replace('".hosts/', f'"{HOSTS}/').replace("{inventory_dir}", str(REPO / "examples"))
    for i in range(MANY):
        text += f'[hosts.m{i}]\npython = "{python}"\n'
        text += f'[hosts.l{i}]\npython = "{python}"\nwatch = []\n'
    for name, py in pythons.items():
        text += f'[hosts.{name}]\npython = "{py}"\n'
    known = folder / "known_hosts"
    lines = []
    for i, s in enumerate(servers):
        lines.append(s.host_key_line())
        common = f'python = "{python}"\nidentity = "{s.client_key}"\nknown_hosts = "{known}"\n'
        text += f'[hosts.h{i}]\nssh = "{s.target}"\n{common}'
        if i == 0:  # the service, on an SSH host
            ct200 = HOSTS / "ct200" / "bin" / "python"
            port = free_port()
            text += (
                f'[hosts.s0]\nssh = "{s.target}"\npython = "{ct200}"\nidentity = '
                f'"{s.client_key}"\nknown_hosts = "{known}"\nservice = {{ port = {port} }}\n'
            )
        if proxies:
            lines.append(s.host_key_line().replace(f":{s.port} ", f":{proxies[i]} "))
            text += f'[hosts.d{i}]\nssh = "root@127.0.0.1:{proxies[i]}"\n{common}'
    known.write_text("".join(lines))
    path = folder / "envsync.toml"
    path.write_text(text)
    return path


def _openssh_true(
    servers: list,
    known: Path,
    ports: list[int] | None = None,
) -> list[str]:
    """OpenSSH's own client running `true` on these hosts at once (through `ports`)."""
    line = " ".join(
        f"ssh -o UserKnownHostsFile={known} -o StrictHostKeyChecking=yes -o BatchMode=yes "
        f"-i {s.client_key} -p {port} root@127.0.0.1 true &"
        for s, port in zip(servers, ports or [s.port for s in servers], strict=True)
    )
    return ["bash", "-c", f"{line} wait"]


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--no-editable", action="store_true", help="skip the editable venvs")
    parser.add_argument(
        "--json",
        metavar="PATH",
        default=str(REPO / "docs" / "generated" / "performance.json"),
        help="also write the figures here, for the docs (default: %(default)s)",
    )
    parser.add_argument(
        "--no-change", action="store_true", help="skip what a change costs (benchmarks/change.py)"
    )
    parser.add_argument(
        "--changes", type=int, default=50, help="diffs after one change each, for the caches"
    )
    parser.add_argument("--nodes", type=int, default=8, help="the cold fleet's nodes")
    parser.add_argument(
        "--simulated", type=int, default=100, help="the simulated fleet's nodes (0: none)"
    )
    parser.add_argument("--simulate", type=int, metavar="HOSTS", help=argparse.SUPPRESS)
    parser.add_argument("--jobs", type=int, default=8, help=argparse.SUPPRESS)
    parser.add_argument("--latency", type=float, default=0.05, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.simulate:
        return _simulate(args.simulate, args.jobs, args.latency)
    # the example as the quick start builds it: the hosts see the runtime (torch,
    # transformers), so that SGLang's startup graph is the one users diff
    runtime = HOSTS / "runtime"
    subprocess.run(
        [sys.executable, str(REPO / "examples" / "build_hosts.py"), "--runtime", str(runtime)],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    from benchmarks.snapshot import build as build_snapshot_venv
    from benchmarks.snapshot import install_envsync

    bench = build_snapshot_venv()
    tool = install_envsync()  # a regular install, as users get it: no editable finder
    editable: dict[str, Path] = {}
    if not args.no_editable:
        from benchmarks.editable import build

        editable = build()
    from tests.sshd import SSHD, available

    why = available()
    ct200 = str(HOSTS / "ct200" / "bin" / "python")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        servers = [] if why else [SSHD(folder, name=f"sshd{i}").start() for i in range(FLEET)]
        try:
            with delayed([s.port for s in servers]) as proxies:
                inv = _inventory(folder, servers, proxies, {**editable, "bench": bench})
                env = {**os.environ, "XDG_CACHE_HOME": str(folder / "cache")}
                env.pop("PYTHONDONTWRITEBYTECODE", None)  # users' envsync has its bytecode
                envsync = [str(tool.parent / "envsync"), "--inventory", str(inv), "-q"]
                pip = [ct200, "-m", "pip", "--disable-pip-version-check"]
                bench_pip = [str(bench), "-m", "pip", "--disable-pip-version-check"]
                commands = {
                    "diff (warm)": [*envsync, "diff", "ct129", "ct200"],
                    "diff (cold)": [*envsync, "diff", "--no-cache", "ct129", "ct200"],
                    "pip check": [*pip, "check"],
                    "snapshot (warm)": [*envsync, "snapshot", "bench"],
                    "snapshot (no cache)": [*envsync, "snapshot", "bench", "--no-cache"],
                    "pip freeze": [*bench_pip, "freeze"],
                    f"snapshot, {MANY} hosts": [
                        *envsync,
                        "snapshot",
                        *(f"m{i}" for i in range(MANY)),
                    ],
                    f"snapshot, {MANY} hosts, no watch": [
                        *envsync,
                        "snapshot",
                        *(f"l{i}" for i in range(MANY)),
                    ],
                }
                for name in editable:
                    commands[f"snapshot {name}"] = [*envsync, "snapshot", name]
                if servers:
                    known = folder / "known_hosts"
                    hosts = [f"h{i}" for i in range(FLEET)]
                    slow = [f"d{i}" for i in range(FLEET)]
                    commands |= {
                        "ssh, 1 host": [*envsync, "snapshot", "h0"],
                        f"ssh, {FLEET} hosts": [*envsync, "snapshot", *hosts, "-j", "8"],
                        "openssh true, 1 host": _openssh_true(servers[:1], known),
                        f"openssh true, {FLEET} hosts": _openssh_true(servers, known),
                        "delayed, 1 host": [*envsync, "snapshot", "d0"],
                        f"delayed, {FLEET} hosts": [*envsync, "snapshot", *slow, "-j", "8"],
                        "delayed openssh true, 1 host": _openssh_true(
                            servers[:1], known, proxies[:1]
                        ),
                        f"delayed openssh true, {FLEET} hosts": _openssh_true(
                            servers, known, proxies
                        ),
                    }
                medians, rss = interleaved(commands, args.runs, env)
                crash_runs = max(3, args.runs // 2)
                crash = {"local": crash_after_death(inv, "ct200", crash_runs)}
                if servers:
                    crash["ssh"] = crash_after_death(inv, "s0", crash_runs)
                jobs, latency = 8, 0.05
                fleets = {n: simulated_fleet(n, jobs, latency, env) for n in SIMULATED}
        finally:
            for s in servers:
                s.stop()

    change = None
    if not args.no_change:  # on copies of ct200, with caches of their own
        from benchmarks.change import measure, print_results

        change = measure(min(args.runs, 3), args.changes, args.nodes, simulated=args.simulated)
        print_results(change)
    print(f"runs: {args.runs}, interleaved, fresh processes; medians (peak RSS: largest)")
    for name, value in medians.items():
        print(f"  {name:24s} {value * 1000:8.1f} ms  {rss[name] / 1024:6.1f} MiB")
    m = medians
    rows = [
        ("diff warm / pip check", m["diff (warm)"] / m["pip check"], 0.5, ""),
        ("diff cold / pip check", m["diff (cold)"] / m["pip check"], 3.0, ""),
        ("snapshot warm / pip freeze", m["snapshot (warm)"] / m["pip freeze"], 0.25, ""),
    ]
    if editable:
        rows.append(("editable / wheel", m["snapshot editable"] / m["snapshot wheel"], 1.2, ""))
    if servers:
        floor = m[f"openssh true, {FLEET} hosts"] / m["openssh true, 1 host"]
        value = m[f"ssh, {FLEET} hosts"] / m["ssh, 1 host"]
        rows.append((f"ssh {FLEET} hosts / 1 host", value, floor, "(openssh's own)"))
        value = m[f"delayed, {FLEET} hosts"] / m["delayed, 1 host"]
        rows.append((f"+{DELAY * 1000:.0f} ms: {FLEET} hosts / 1 host", value, 1.5, ""))
        floor = m[f"delayed openssh true, {FLEET} hosts"] / m["delayed openssh true, 1 host"]
        rows.append((f"+{DELAY * 1000:.0f} ms: same, openssh `true`", floor, 1.5, "(floor)"))
    for n, (wall, _) in fleets.items():
        ideal = math.ceil(n / jobs) * latency
        rows.append((f"{n} sim. hosts / ceil({n}/{jobs})x{latency:g}s", wall / ideal, 1.1, ""))
    for where, limit in (("local", 0.3), ("ssh", 1.0)):
        if where in crash:
            rows.append(("crash verdict after death, s", crash[where], limit, f"({where})"))
    if change is not None:
        from benchmarks.change import rows as change_rows

        rows += change_rows(change)
    print("ratios:")
    for label, value, limit, note in rows:
        met = "met" if value <= limit else "NOT met"
        print(f"  {label:34s} {value:6.2f}   target <= {limit:<5.2f} {note:16s} {met}")
    print(
        f"peak RSS: diff {rss['diff (warm)'] / 1024:.1f} MiB; snapshot of {MANY} hosts "
        f"{rss[f'snapshot, {MANY} hosts'] / 1024:.1f} MiB (SGLang's files hashed on each), "
        f"{rss[f'snapshot, {MANY} hosts, no watch'] / 1024:.1f} MiB (nothing watched)"
    )
    print(
        "peak RSS of the simulated collections: "
        + ", ".join(f"{n} hosts {rss_kib / 1024:.1f} MiB" for n, (_, rss_kib) in fleets.items())
    )
    if why:
        print(f"(SSH fleets left out: {why})")
    command = " ".join(["python -m benchmarks.all", *sys.argv[1:]])
    record = {
        **provenance(command),
        "runs": args.runs,
        "medians": [
            {"name": name, "ms": round(value * 1000, 1), "rss_mib": round(rss[name] / 1024, 1)}
            for name, value in medians.items()
        ],
        "ratios": [
            {
                "label": label,
                "value": round(value, 3),
                "target": limit,
                "note": note,
                "met": value <= limit,
            }
            for label, value, limit, note in rows
        ],
        "simulated": [
            {"hosts": n, "s": round(wall, 3), "rss_mib": round(rss_kib / 1024, 1)}
            for n, (wall, rss_kib) in fleets.items()
        ],
        "left_out": f"the SSH fleets ({why})" if why else None,
    }
    if change is not None:
        record["steps"] = [
            {"name": name, "ratio": round(value, 3), "rss_mib": round(change.peaks[name] / 1024, 1)}
            for name, value in change.medians().items()
        ]
        record["change_figures"] = {k: round(v, 3) for k, v in change.seconds.items()}
        record["verdicts_differ"] = change.mismatches
    path = Path(args.json)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.with_suffix(".tmp").write_text(json.dumps(record, indent=2) + "\n")
    path.with_suffix(".tmp").replace(path)
    print(f"(written to {path})")
    if path.resolve() == (REPO / PERFORMANCE).resolve():  # the README's section, from it
        readme = REPO / "README.md"
        readme.write_text(readme_with_performance(readme.read_text(), REPO))
        print(f"(the performance section of {readme} written from it)")
    if change is not None and change.mismatches:
        print("the verdicts of a step differ from a --no-cache diff of the same state")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
