"""Benchmark: collecting behind an exec prefix and through a jump host, against the direct way.

Medians of interleaved runs of fresh `envsync snapshot --no-cache` processes, same venv:
  - local, and behind an exec prefix (a container of real namespaces, tests/container.py,
    entered with nsenter as `docker exec -i` enters one): the prefix's cost, including the
    check that it reaches the interpreter inside;
  - SSH directly, and through a jump host (tests/sshd.py JumpBed: the target reachable only
    through the bastion): the second SSH handshake;
  - all three at once: the container on the host behind the bastion.

    .venv/bin/python benchmarks/behind.py [--runs 7] [--venv PATH]   (needs root, sshd, bwrap)
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks.remote import parse_args, timed  # noqa: E402
from tests.container import VENV, Container  # noqa: E402
from tests.container import available as containers_available  # noqa: E402
from tests.sshd import SSHD, JumpBed, available  # noqa: E402


def main() -> int:
    args = parse_args(__doc__ or "")
    why = available() or containers_available()
    if why:
        print(f"benchmarks/behind.py: {why}", file=sys.stderr)
        return 1
    python = str(args.venv / "bin" / "python")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        direct = SSHD(folder / "direct").start()
        bed = JumpBed(folder / "jump").start()
        container = Container(args.venv.resolve()).start()
        try:
            known = folder / "known_hosts"
            known.write_text(
                direct.host_key_line() + bed.bastion.host_key_line() + bed.target.host_key_line()
            )
            key = f'known_hosts = "{known}"\n'
            prefix = json.dumps(container.exec_prefix)
            text = (
                f'[defaults]\nwatch = ["sglang"]\n[hosts.here]\npython = "{python}"\n'
                f'[hosts.inside]\nexec = {prefix}\npython = "{VENV}/bin/python"\n'
                f'[hosts.ssh]\nssh = "{direct.target}"\npython = "{python}"\n'
                f'identity = "{direct.client_key}"\n{key}'
                f'[hosts.jump]\nssh = "{bed.target.target}"\njump = "{bed.bastion.target}"\n'
                f'python = "{python}"\nidentity = "{bed.target.client_key}"\n{key}'
                f'[hosts.all]\nssh = "{bed.target.target}"\njump = "{bed.bastion.target}"\n'
                f'exec = {prefix}\npython = "{VENV}/bin/python"\n'
                f'identity = "{bed.target.client_key}"\n{key}'
            )
            inv = folder / "envsync.toml"
            inv.write_text(text)
            # No host-side caches: inside, ~ is the image's (read-only here), so every row
            # hashes the watched files afresh.
            envsync = [sys.executable, "-m", "envsync", "--inventory", str(inv), "-q", "snapshot"]
            envsync.append("--no-cache")
            names = {
                "local": "here",
                "exec (container)": "inside",
                "ssh": "ssh",
                "ssh via jump host": "jump",
                "exec, ssh via jump": "all",
            }
            for host in names.values():
                timed([*envsync, host])
            samples: dict[str, list[float]] = {name: [] for name in names}
            for _ in range(args.runs):
                for name, host in names.items():
                    samples[name].append(timed([*envsync, host]))
        finally:
            container.stop()
            bed.stop()
            direct.stop()
    medians = {name: statistics.median(s) for name, s in samples.items()}
    print(f"venv: {args.venv} (SGLang watched); runs: {args.runs}, interleaved; medians")
    print("envsync snapshot, whole command:")
    for name, value in medians.items():
        print(f"  {name:22s} {value * 1000:8.1f} ms")
    print(f"ratio exec/local:        {medians['exec (container)'] / medians['local']:.2f}")
    print(f"ratio jump/ssh:          {medians['ssh via jump host'] / medians['ssh']:.2f}")
    print(f"ratio exec+jump/ssh:     {medians['exec, ssh via jump'] / medians['ssh']:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
