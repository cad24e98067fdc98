"""Benchmark: envsync's full snapshot against `pip freeze` and `pip inspect`, same venv.

The venv holds over 100 real packages (jupyterlab, sphinx and requests with their
dependencies) plus the real SGLang 0.5.11 wheel (about 2,500 files), which envsync watches:
it hashes every one of its files and compares them with RECORD. The three commands run
interleaved, each as a fresh process, and the medians and ratios are printed.

    .venv/bin/python benchmarks/snapshot.py [--runs 9]
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
import venv
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
VENV = HERE / ".cache" / "snapshot-venv"
TOOL = HERE / ".cache" / "envsync-venv"  # envsync installed as users get it: not editable
PACKAGES = ["jupyterlab", "sphinx", "requests"]
WATCHED = "sglang==0.5.11"


def build() -> Path:
    python = VENV / "bin" / "python"
    stamp = VENV / ".bench-ready"
    if stamp.exists():
        return python
    print(f"building {VENV} (once) ...", file=sys.stderr)
    venv.EnvBuilder(with_pip=True, clear=True).create(VENV)
    pip = [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    subprocess.run([*pip, *PACKAGES], check=True)
    wheels = REPO / "examples" / ".cache" / "wheels"
    local = sorted(wheels.glob("sglang-0.5.11-*.whl"))
    subprocess.run([*pip, "--no-deps", str(local[0]) if local else WATCHED], check=True)
    stamp.write_text("ok\n")
    return python


def install_envsync() -> Path:
    """A fresh, regular (non-editable) install of this checkout's envsync."""
    if not (TOOL / "bin" / "python").exists():
        venv.EnvBuilder(with_pip=True, clear=True).create(TOOL)
    python = TOOL / "bin" / "python"
    subprocess.run(
        [
            str(python),
            "-m",
            "pip",
            "install",
            "-q",
            "--disable-pip-version-check",
            "--force-reinstall",
            str(REPO),
        ],
        check=True,
    )
    return python


def timed(argv: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - started


def interleaved_medians(commands: dict[str, list[str]], runs: int) -> dict[str, float]:
    """Each command once (to warm the page cache), then `runs` interleaved rounds of all
    of them, each a fresh process: the median wall time of each."""
    for argv in commands.values():
        timed(argv)
    samples: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(runs):
        for name, argv in commands.items():
            samples[name].append(timed(argv))
    return {name: statistics.median(s) for name, s in samples.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9)
    args = parser.parse_args()
    python = build()
    tool = install_envsync()
    count = subprocess.run(
        [str(python), "-m", "pip", "list", "--format=freeze", "--disable-pip-version-check"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.count("\n")
    with tempfile.TemporaryDirectory() as tmp:
        inventory = Path(tmp) / "envsync.toml"
        inventory.write_text(f'[hosts.bench]\npython = "{python}"\nwatch = ["sglang"]\n')
        os.environ["XDG_CACHE_HOME"] = str(Path(tmp) / "cache")  # the warm runs' own cache
        envsync = [str(tool.parent / "envsync"), "--inventory", str(inventory), "-q", "snapshot"]
        commands = {
            "envsync snapshot": [*envsync, "bench", "--no-cache"],
            "envsync (warm cache)": [*envsync, "bench"],
            "pip freeze": [str(python), "-m", "pip", "freeze", "--disable-pip-version-check"],
            "pip inspect": [str(python), "-m", "pip", "inspect", "--disable-pip-version-check"],
        }
        out = subprocess.run(commands["envsync snapshot"], check=True, capture_output=True).stdout
        snap = json.loads(out)
        files = sum(len(d["files"] or {}) for d in snap["distributions"])
        medians = interleaved_medians(commands, args.runs)
    print(f"venv: {count} distributions; envsync watches sglang ({files} files hashed)")
    print(f"runs: {args.runs}, interleaved; median wall time per command")
    for name, value in medians.items():
        print(f"  {name:18s} {value * 1000:8.1f} ms")
    base = medians["envsync snapshot"]
    print(
        f"ratio envsync/pip freeze:  {base / medians['pip freeze']:.2f}  (target <= 0.50; no cache)"
    )
    warm = medians["envsync (warm cache)"]
    print(f"ratio warm/pip freeze:     {warm / medians['pip freeze']:.2f}  (hashes reused by stat)")
    print(f"ratio envsync/pip inspect: {base / medians['pip inspect']:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
