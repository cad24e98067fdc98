"""Benchmark: the native layer on the example's runtime (torch CPU, triton, numpy, ...).

Every command runs as a fresh process, interleaved round by round; the medians and the
ratios against peers measured in the same run are printed:

  read       envsync's reader on libtorch_cpu.so (434 MB), then on every .so of the
             runtime, against `readelf -d --dyn-syms -V -r` of the same files and `cat` of
             them (reading them whole)
  judge      torch._C's load judged statically (its whole tree: libtorch_cpu, libc10, the
             C++ runtime, ...): cold (nothing cached), with the parsed files cached, warm
             (the verdict cache: stats only), against `ldd` (the real loader resolving the
             same tree) and a real `import torch._C` in the runtime
  scan       the probe's native layer (hostside/native/scan.py) on a startup that imports
             the runtime's torch: the first scan (no cache: torch/__init__.py read, torch's
             preloads and torch._C's tree judged), and warm (its cache: stats only)
  diff       a warm `envsync diff ct129 ct200` of the example with the native layer and
             without it (ENVSYNC_NATIVE=0 in the probe's environment), interleaved: the
             layer's cost on it (target: at most 10%)

The page cache is warm for all of them (the first round is not counted); a machine whose
page cache is cold pays the disk once more for every one of them.

    .venv/bin/python -m benchmarks.native [--runs 5] [--diff-only]
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

RUNTIME = REPO / "examples" / ".hosts" / "runtime"
SITE = RUNTIME / "lib" / "python3.11" / "site-packages"
TORCH_CPU = SITE / "torch" / "lib" / "libtorch_cpu.so"
TORCH_C = SITE / "torch" / "_C.cpython-311-x86_64-linux-gnu.so"

# What the fresh processes run: the native layer's own entry points, nothing of envsync's.
_READ = """
import sys
from envsync.hostside.native.elf import read_elf
for path in sys.argv[1:]:
    read_elf(path)
"""
_JUDGE = """
import json, os, sys
from envsync.hostside.native.cache import ElfCache, cached_judge
from envsync.hostside.native.verdicts import Request
mode, folder, program, target = sys.argv[1:5]
def load(name):
    try:
        with open(os.path.join(folder, name)) as f:
            return json.load(f)
    except OSError:
        return {}
def save(name, data):
    with open(os.path.join(folder, name), "w") as f:
        json.dump(data, f)
facts = {} if mode in ("cold", "prepare") else load("facts.json")
files = ElfCache()
if mode == "parsed":
    files.load(load("files.json"))
store = load("verdicts.json") if mode == "warm" else {}
started, loads = cached_judge(program, [Request(target)], store, facts_store=facts, files=files)
assert loads[0].verdict.kind == "ok", loads[0].verdict
if mode == "prepare":
    save("facts.json", facts)
    save("files.json", files.export())
    save("verdicts.json", store)
"""


_SCAN = """
import json, os, shutil, sys
repo, mode, folder = sys.argv[1:4]
sys.path.insert(0, repo)
from envsync.hostside.graph.finder import ModuleFinder
from envsync.hostside.caches.graphcache import RawJSON
from envsync.hostside.native.scan import native_facts
sys.path.remove(repo)
if mode == "cold":
    shutil.rmtree(folder, ignore_errors=True)
os.makedirs(folder, exist_ok=True)
finder = ModuleFinder([p for p in sys.path if p])
torch = finder.find("torch")
edge = {"module": "torch", "names": [], "line": 1, "context": "module"}
graph = {"roots": ["app"], "modules": {
    "app": {"kind": "source", "file": os.path.join(folder, "app.py"), "imports": [edge]},
    "torch": {"kind": "source", "file": torch[1]},
}}
# as the probe has it when its graph cache holds: the graph's text and its cache file
path = os.path.join(folder, "graph.json")
if not os.path.exists(path):
    with open(path, "w") as f:
        json.dump(graph, f)
    os.utime(path, ns=(0, 0))  # not racy: the plan is kept
with open(path) as f:
    raw = RawJSON(f.read(), path)
facts = native_facts({}, finder, raw, {"cuda": None}, [], folder, "bench")
assert [load["verdict"]["kind"] for load in facts["loads"]] == ["ok", "ok"], facts
"""


def timed(argv: list[str], env: dict[str, str] | None = None) -> float:
    started = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    return time.perf_counter() - started


def _interleaved(
    argv: list[str], on: dict[str, str], off: dict[str, str], runs: int
) -> dict[str, float]:
    """`argv` with each environment, run alternately (after one of each): the median wall
    time of each, and the median CPU time of it and every process it waited for (the
    probes), which another load of the machine sways far less."""
    import resource

    def cpu() -> float:
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        return usage.ru_utime + usage.ru_stime

    for env in (on, off):
        subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    samples: dict[str, list[float]] = {"on": [], "off": [], "on cpu": [], "off cpu": []}
    for _ in range(max(runs, 5)):
        for env, name in ((on, "on"), (off, "off")):
            started, used = time.perf_counter(), cpu()
            subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            samples[name].append(time.perf_counter() - started)
            samples[name + " cpu"].append(cpu() - used)
    return {name: statistics.median(values) for name, values in samples.items()}


def medians(commands: dict[str, list[str]], runs: int, env: dict[str, str]) -> dict[str, float]:
    """Each command once (the page cache, the caches), then `runs` interleaved rounds."""
    for argv in commands.values():
        timed(argv, env)
    samples: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(runs):
        for name, argv in commands.items():
            samples[name].append(timed(argv, env))
    return {name: statistics.median(s) for name, s in samples.items()}


def shared_objects() -> list[str]:
    seen: set[str] = set()
    out = []
    for path in sorted(RUNTIME.rglob("*.so*")):
        if (path.name.endswith(".so") or ".so." in path.name) and path.is_file():
            real = os.path.realpath(path)
            if real not in seen:
                seen.add(real)
                out.append(str(path))
    return out


def show(title: str, values: dict[str, float], peer: str) -> None:
    print(f"\n{title}")
    for name, value in values.items():
        ratio = f"  {value / values[peer]:6.2f}x {peer}" if name != peer else ""
        print(f"  {name:44s} {value * 1000:9.1f} ms{ratio}")


def _native_layer(runs: int, env: dict[str, str], python: list[str]) -> dict[str, object]:
    """The reader, the judge and the probe's scan, each against its peers."""
    args = argparse.Namespace(runs=runs)
    files = shared_objects()
    size = sum(os.path.getsize(f) for f in files)
    readelf = ["readelf", "-W", "-d", "--dyn-syms", "-V", "-r"]
    one = medians(
        {
            "envsync read_elf (libtorch_cpu.so)": [*python, _READ, str(TORCH_CPU)],
            "readelf -d --dyn-syms -V -r": [*readelf, str(TORCH_CPU)],
            "cat (the whole file)": ["cat", str(TORCH_CPU)],
            "python -c pass (interpreter start)": [*python, "pass"],
        },
        args.runs,
        env,
    )
    show(
        f"libtorch_cpu.so ({TORCH_CPU.stat().st_size / 1e6:.0f} MB)",
        one,
        "readelf -d --dyn-syms -V -r",
    )
    every = medians(
        {
            "envsync read_elf (every .so)": [*python, _READ, *files],
            "readelf -d --dyn-syms -V -r": [*readelf, *files],
            "cat (the whole files)": ["cat", *files],
        },
        args.runs,
        env,
    )
    show(
        f"every shared object of the runtime ({len(files)} files, {size / 1e9:.2f} GB)",
        every,
        "readelf -d --dyn-syms -V -r",
    )
    with tempfile.TemporaryDirectory() as folder:
        program = str(RUNTIME / "bin" / "python")
        judge = [*python, _JUDGE]
        subprocess.run([*judge, "prepare", folder, program, str(TORCH_C)], check=True, env=env)
        sizes = {
            n: os.path.getsize(os.path.join(folder, n)) for n in ("files.json", "verdicts.json")
        }
        ldd_env = {**env, "LD_LIBRARY_PATH": ""}
        judged = medians(
            {
                "envsync, cold (nothing cached)": [*judge, "cold", folder, program, str(TORCH_C)],
                "envsync, parsed files cached": [*judge, "parsed", folder, program, str(TORCH_C)],
                "envsync, warm (verdict cache)": [*judge, "warm", folder, program, str(TORCH_C)],
                "ldd (the real loader's trace)": ["ldd", str(TORCH_C)],
                "real import torch._C (runtime python)": [program, "-c", "import torch._C"],
                "python -c pass (interpreter start)": [*python, "pass"],
            },
            args.runs,
            ldd_env,
        )
    show("torch._C's load judged (its whole tree)", judged, "ldd (the real loader's trace)")
    parsed, verdicts = sizes["files.json"] / 1e6, sizes["verdicts.json"] / 1e3
    print(f"  cache files: parsed {parsed:.1f} MB, verdicts {verdicts:.0f} kB")
    start = judged["python -c pass (interpreter start)"]
    warm = judged["envsync, warm (verdict cache)"] - start
    cold = judged["envsync, cold (nothing cached)"] - start
    with tempfile.TemporaryDirectory() as folder:
        scan = [str(RUNTIME / "bin" / "python"), "-c", _SCAN, str(REPO)]
        scanned = medians(
            {
                "first scan (no cache)": [*scan, "cold", os.path.join(folder, "cold")],
                "warm scan (its cache)": [*scan, "warm", os.path.join(folder, "warm")],
                "python -c pass (interpreter start)": [*python, "pass"],
            },
            args.runs,
            env,
        )
    show("the probe's native layer on torch (runtime python)", scanned, "warm scan (its cache)")
    print(
        f"\nbeyond the interpreter's start: judging torch._C cold {cold * 1000:.0f} ms,"
        f" warm {warm * 1000:.1f} ms"
    )
    return {"read": one, "every": every, "judge": judged, "scan": scanned}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument(
        "--diff-only", action="store_true", help="only the warm diff with and without the layer"
    )
    args = parser.parse_args()
    subprocess.run(
        [sys.executable, str(REPO / "examples" / "build_hosts.py"), "--runtime", str(RUNTIME)],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("LD_LIBRARY_PATH", None)
    # Compiled modules are reused, as the host side's bundle is on hosts (a folder of its own).
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    python = [sys.executable, "-c"]
    print(f"runs: {args.runs}, interleaved, fresh processes; median wall time")
    result: dict[str, object] = {}
    if not args.diff_only:
        result = _native_layer(args.runs, env, python)
    inventory = REPO / "examples" / "envsync.toml"
    diff = [sys.executable, "-m", "envsync", "--inventory", str(inventory), "-q", "diff"]
    diff += ["ct129", "ct200"]
    timing = _interleaved(diff, env, {**env, "ENVSYNC_NATIVE": "0"}, args.runs)
    on, off = timing["on"], timing["off"]
    print(
        f"warm envsync diff ct129 ct200: {on * 1000:.0f} ms with the native layer, "
        f"{off * 1000:.0f} ms without: {on / off:.3f}x (target: at most 1.10x); CPU time "
        f"(envsync and its probes) {timing['on cpu'] * 1000:.0f} ms against "
        f"{timing['off cpu'] * 1000:.0f} ms: {timing['on cpu'] / timing['off cpu']:.3f}x"
    )
    result["diff"] = timing
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
