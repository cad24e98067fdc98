"""Benchmark: collecting over SSH (real OpenSSH on loopback) against collecting locally.

Three measurements, medians of interleaved runs, fresh `envsync` processes:
  1. how the probe runs: the host side's bundle on stdin, run from the host's cached copy
     of it (what envsync does) or from memory (--no-cache), one connection, same host;
  2. overhead: `envsync snapshot` of a venv over SSH against the same venv locally;
  3. fleets: 8 hosts (8 sshd instances on loopback, each its own host) against 1.

Every "host" here shares this machine's cores, unlike a real fleet where each host runs its
own probe: the fleet ratio is an upper bound of what a real fleet sees.

    .venv/bin/python benchmarks/remote.py [--runs 7] [--venv PATH]   (needs root and sshd)
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
sys.path.insert(0, str(REPO))

from envsync.hostside import protocol  # noqa: E402
from envsync.runner.bundle import host_argv, host_input  # noqa: E402
from envsync.runner.ssh import SSHRunner  # noqa: E402
from envsync.sources.inventory import HostSpec  # noqa: E402
from tests.sshd import SSHD, available  # noqa: E402

FLEET = 8


def timed(argv: list[str]) -> float:
    started = time.perf_counter()
    proc = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if proc.returncode:
        raise SystemExit(f"{argv}: exit {proc.returncode}: {proc.stderr.strip()}")
    return time.perf_counter() - started


def _openssh_true(servers: list[SSHD], known: Path) -> list[str]:
    """OpenSSH's own client running `true` on these hosts in parallel: the floor here."""
    line = " ".join(
        f"ssh -o UserKnownHostsFile={known} -o StrictHostKeyChecking=yes -o BatchMode=yes "
        f"-i {s.client_key} -p {s.port} root@127.0.0.1 true &"
        for s in servers
    )
    return ["bash", "-c", f"{line} wait"]


def ship_methods(spec: HostSpec, python: str, runs: int) -> dict[str, float]:
    """Median seconds per probe run for each way the host side may run, on one open
    connection: from the host's cached copy of the bundle (its bytecode reused), or from
    memory (--no-cache: nothing written on the host). Both ship the bundle on stdin."""
    runner = SSHRunner(spec)
    options = json.dumps({"watch": ["sglang"], "env": []})

    def cached() -> None:
        argv = host_argv(python, protocol.COLLECT, [options])
        runner.run(argv, input=host_input(), timeout=120)

    def memory() -> None:
        argv = host_argv(python, protocol.COLLECT, [options], cache_dir="")
        runner.run(argv, input=host_input(), timeout=120)

    methods = {"stdin, cached copy": cached, "stdin, from memory": memory}
    samples: dict[str, list[float]] = {name: [] for name in methods}
    for fn in methods.values():
        fn()  # the first run writes the cached copy
    for _ in range(runs):
        for name, fn in methods.items():
            started = time.perf_counter()
            fn()
            samples[name].append(time.perf_counter() - started)
    runner.close()
    return {name: statistics.median(s) for name, s in samples.items()}


def parse_args(doc: str) -> argparse.Namespace:
    """--runs and --venv (default: the example's ct129), described by the script's `doc`."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument(
        "--venv",
        type=Path,
        default=REPO / "examples" / ".hosts" / "ct129",
        help="the venv to collect (default: the example's ct129; build it first)",
    )
    return parser.parse_args()


def main() -> int:
    args = parse_args(__doc__ or "")
    why = available()
    if why:
        print(f"benchmarks/remote.py: {why}", file=sys.stderr)
        return 1
    python = str(args.venv / "bin" / "python")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        servers = [SSHD(folder, name=f"sshd{i}").start() for i in range(FLEET)]
        try:
            known = folder / "known_hosts"
            known.write_text("".join(s.host_key_line() for s in servers))
            inv = folder / "envsync.toml"
            text = f'[defaults]\nwatch = ["sglang"]\n[hosts.local1]\npython = "{python}"\n'
            for i, s in enumerate(servers):
                for prefix, watch in (("h", '["sglang"]'), ("light", "[]")):
                    text += (
                        f'[hosts.{prefix}{i}]\nssh = "{s.target}"\npython = "{python}"\n'
                        f'identity = "{s.client_key}"\nknown_hosts = "{known}"\nwatch = {watch}\n'
                    )
            inv.write_text(text)
            spec = HostSpec(
                name="h0",
                python=python,
                ssh=servers[0].target,
                identity=str(servers[0].client_key),
                known_hosts=str(known),
            )
            shipping = ship_methods(spec, python, args.runs)
            envsync = [sys.executable, "-m", "envsync", "--inventory", str(inv), "-q", "snapshot"]
            commands = {
                "local, 1 host": [*envsync, "local1"],
                "ssh, 1 host": [*envsync, "h0"],
                f"ssh, {FLEET} hosts": [*envsync, *(f"h{i}" for i in range(FLEET)), "-j", "8"],
                "openssh `true`, 1 host": _openssh_true(servers[:1], known),
                f"openssh `true`, {FLEET} hosts": _openssh_true(servers, known),
                "ssh, 1 host, light": [*envsync, "light0"],
                f"ssh, {FLEET} hosts, light": [
                    *envsync,
                    *(f"light{i}" for i in range(FLEET)),
                    "-j",
                    "8",
                ],
            }
            for argv in commands.values():
                timed(argv)
            samples: dict[str, list[float]] = {name: [] for name in commands}
            for _ in range(args.runs):
                for name, argv in commands.items():
                    samples[name].append(timed(argv))
        finally:
            for s in servers:
                s.stop()
    medians = {name: statistics.median(s) for name, s in samples.items()}
    print(f"venv: {args.venv} (SGLang watched); runs: {args.runs}, interleaved; medians")
    print("the probe over one open SSH connection:")
    for name, value in sorted(shipping.items(), key=lambda kv: kv[1]):
        print(f"  {name:22s} {value * 1000:8.1f} ms")
    print("envsync snapshot, whole command:")
    for name, value in medians.items():
        print(f"  {name:22s} {value * 1000:8.1f} ms")
    print(f"ratio ssh/local (1 host):      {medians['ssh, 1 host'] / medians['local, 1 host']:.2f}")
    print(
        f"ratio {FLEET} hosts/1 host (ssh):    "
        f"{medians[f'ssh, {FLEET} hosts'] / medians['ssh, 1 host']:.2f}  (target <= 1.5)"
    )
    light = medians[f"ssh, {FLEET} hosts, light"] / medians["ssh, 1 host, light"]
    print(f"ratio {FLEET} hosts/1 host, light: {light:.2f}  (nothing watched: no hashing)")
    floor = medians[f"openssh `true`, {FLEET} hosts"] / medians["openssh `true`, 1 host"]
    print(
        f"ratio {FLEET} hosts/1 host, openssh `true`: {floor:.2f}  (this machine's floor: "
        f"{FLEET} sshd on {os.cpu_count()} shared cores)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
