"""GPU check: the native layer and the GPU facts on a real GPU host, each against the real thing.

Run it with the host's own interpreter, the one whose environment holds torch (no pip
install, no index: only this repository and that interpreter's stdlib are needed; the
envsync-side verdicts also need Python 3.10+ and `packaging`, else they are said to be
unavailable):

    python benchmarks/gpu_check.py [--quick] [--allow-no-gpu]

It does, in this order:
  probe     the probe's own facts of a startup that imports torch, torchvision,
            torchaudio and triton (whichever are installed): GPUs, driver, torch's build
            with --deep (its arch list), and the native layer's verdict on every load
  real      a fresh interpreter imports the same modules, then uses CUDA (a kernel on
            each GPU): what really loaded (/proc/self/maps), the exceptions, the devices
  compare   each load's static verdict against whether it really loaded; GPU names and
            compute capabilities, torch's CUDA build and arch list against torch's own;
            envsync's arch, driver and CUDA runtime checks against what CUDA really did
  precision every shared object of site-packages loaded for real and replayed through
            envsync's linker (benchmarks/native_precision.py): in import order, and each
            file alone (not with --quick)

It prints a summary and writes all of it to $OUT/gpu_check.json when OUT is set. Where
`nvidia-smi` is absent it says so and exits 0 (--allow-no-gpu runs the rest anyway: the
parts that need no GPU, as the test suite does on a CPU host). Exit 1 when a comparison
disagrees.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from envsync.hostside.facts import machine  # noqa: E402  (the repository first on sys.path)

MODULES = ("torch", "torchvision", "torchaudio", "triton")

_REAL = r"""
import json, sys
out = {"imports": {}, "devices": [], "kernels": {}}
for name in sys.argv[1:]:
    try:
        __import__(name)
        out["imports"][name] = None
    except BaseException as e:
        out["imports"][name] = f"{type(e).__name__}: {e}"
try:
    import torch
    out["torch"] = torch.__version__
    out["cuda"] = torch.version.cuda
    out["available"] = torch.cuda.is_available()
    out["arch_list"] = torch.cuda.get_arch_list() if out["available"] else []
    for i in range(torch.cuda.device_count() if out["available"] else 0):
        major, minor = torch.cuda.get_device_capability(i)
        out["devices"].append({"name": torch.cuda.get_device_name(i), "cc": f"{major}.{minor}"})
        try:
            (torch.ones(8, device=f"cuda:{i}") * 2).sum().item()
            out["kernels"][str(i)] = None
        except Exception as e:
            out["kernels"][str(i)] = f"{type(e).__name__}: {e}"
except BaseException as e:
    out["error"] = f"{type(e).__name__}: {e}"
mapped = set()
with open("/proc/self/maps") as f:
    for line in f:
        parts = line.split(None, 5)
        if len(parts) == 6 and parts[5].startswith("/"):
            mapped.add(parts[5].strip().replace(" (deleted)", ""))
out["mapped"] = sorted(p for p in mapped if ".so" in p.rpartition("/")[2])
print(json.dumps(out))
"""


def installed(paths: list[str]) -> list[str]:
    from envsync.hostside.graph.finder import ModuleFinder

    finder = ModuleFinder(paths)
    return [m for m in MODULES if finder.find(m) is not None]


def probe(modules: list[str], paths: list[str]) -> dict[str, Any]:
    """The probe's facts of a service whose startup imports `modules` at module level, as a
    host's probe collects them (no cache: a cold scan, timed)."""
    import tempfile

    from envsync.hostside.collect import collect

    with tempfile.TemporaryDirectory() as folder:
        Path(folder, "gpu_check_startup.py").write_text("".join(f"import {m}\n" for m in modules))
        options = {"host": "gpu", "deep": True, "roots": ["gpu_check_startup"]}
        saved = sys.path[:]
        sys.path[:] = [folder, *paths]  # the service's sys.path, without this repository
        started = time.perf_counter()
        try:
            facts: dict[str, Any] = dict(collect(options, None, "gpucheck"))
        finally:
            sys.path[:] = saved
    facts["scan_s"] = round(time.perf_counter() - started, 2)
    return facts


def real(modules: list[str]) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-c", _REAL, *modules], capture_output=True, text=True, timeout=600
    )
    lines = out.stdout.strip().splitlines()
    if not lines:
        return {"error": f"exit {out.returncode}: {out.stderr[-2000:]}"}
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def compare_loads(
    facts: dict[str, Any], seen: dict[str, Any], ask: Callable[[list[str]], dict[str, Any]]
) -> dict[str, Any]:
    """Each import or preload the probe judged against whether the real process mapped it
    (a shipped file no import loads is not counted: the real process may never open it).
    A load judged ok that the start did not make (its import is inside a function or a
    condition the start did not take) is imported for real on its own (`ask`)."""
    mapped = {os.path.realpath(p) for p in seen.get("mapped", [])}
    out: dict[str, Any] = {"agree": 0, "disagree": [], "unknown": [], "shipped": 0}
    later = [
        load["module"]
        for load in (facts.get("native") or {}).get("loads", [])
        if load["origin"] != "shipped"
        and load["verdict"]["kind"] == "ok"
        and load.get("module")
        and os.path.realpath(load["path"]) not in mapped
    ]
    if later:
        alone = ask(later)
        mapped |= {os.path.realpath(p) for p in alone.get("mapped", [])}
    for load in (facts.get("native") or {}).get("loads", []):
        kind = load["verdict"]["kind"]
        if load["origin"] == "shipped":
            out["shipped"] += 1
            continue
        if kind == "unknown":
            out["unknown"].append(f"{load['key']}: {load['verdict'].get('why')}")
            continue
        really = os.path.realpath(load["path"]) in mapped
        if really == (kind == "ok"):
            out["agree"] += 1
        else:
            out["disagree"].append(f"{load['key']}: envsync {kind}, really loaded: {really}")
    return out


def envsync_checks(facts: dict[str, Any]) -> dict[str, Any]:
    """envsync's own verdicts (the classifier's checks) on the probe's facts."""
    try:
        from envsync.classify.facts import _arch_problem, _driver_problem
        from envsync.classify.native import cuda_problems
        from envsync.model.codec import from_data
        from envsync.model.environment import Snapshot, Torch
    except (ImportError, SyntaxError, TypeError) as e:
        return {"unavailable": f"the envsync side cannot run here: {type(e).__name__}: {e}"}
    data = dict(facts)
    data.pop("scan_s", None)
    graph = data.get("startup")
    # the probe's graph as it is sent (JSON text): decoded
    if graph is not None and hasattr(graph, "whole"):
        data["startup"] = graph.whole()
    snap = from_data(Snapshot, data, "gpu")
    torch = snap.torch if isinstance(snap.torch, Torch) else None
    return {
        "arch": _arch_problem(torch, snap) if torch else None,
        "driver": _driver_problem(torch, snap) if torch else None,
        "cuda": [list(p) for p in cuda_problems(snap)],
    }


def compare_facts(
    facts: dict[str, Any], seen: dict[str, Any], verdicts: dict[str, Any]
) -> list[str]:
    """What the probe and envsync's checks say against what torch and CUDA really did."""
    problems = []
    gpu = facts.get("gpu") or {}
    gpus = gpu.get("gpus") or []
    devices = seen.get("devices") or []
    if seen.get("available") and len(gpus) != len(devices):
        problems.append(f"nvidia-smi lists {len(gpus)} GPUs, torch sees {len(devices)}")
    for g, d in zip(gpus, devices, strict=False):  # unequal counts: said above
        if g.get("compute_capability") != d["cc"]:
            problems.append(
                f"GPU {g['index']}: nvidia-smi cc {g.get('compute_capability')}, torch {d['cc']}"
            )
        if g.get("name") != d["name"]:
            problems.append(f"GPU {g['index']}: nvidia-smi {g.get('name')!r}, torch {d['name']!r}")
    torch = facts.get("torch") or {}
    if "cuda" in seen and torch.get("cuda") != seen.get("cuda"):
        problems.append(
            f"torch/version.py cuda {torch.get('cuda')}, torch.version.cuda {seen.get('cuda')}"
        )
    arch = torch.get("arch_list")
    if seen.get("arch_list") and isinstance(arch, list) and arch != seen["arch_list"]:
        problems.append(f"--deep arch list {arch}, torch.cuda.get_arch_list() {seen['arch_list']}")
    if "unavailable" in verdicts:
        return problems
    kernels_fail = any(v for v in (seen.get("kernels") or {}).values())
    cuda_fatal = any(p[1] == "fatal" for p in verdicts["cuda"])
    says_broken = bool(verdicts["arch"] or verdicts["driver"] or cuda_fatal)
    if gpus and says_broken != (kernels_fail or not seen.get("available")):
        problems.append(
            f"envsync says {'broken' if says_broken else 'fine'} (arch: {verdicts['arch']}; "
            f"driver: {verdicts['driver']}; CUDA: {verdicts['cuda']}), CUDA really: "
            f"available {seen.get('available')}, kernels {seen.get('kernels')}"
        )
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the precision in import order only")
    parser.add_argument(
        "--allow-no-gpu", action="store_true", help="without nvidia-smi, run the rest anyway"
    )
    args = parser.parse_args()
    out_dir = os.environ.get("OUT")
    result: dict[str, Any] = {"python": sys.executable, "version": sys.version.split()[0]}
    smi = machine.which("nvidia-smi")
    if smi is None and not args.allow_no_gpu:
        result["skipped"] = "nvidia-smi not found on PATH: no GPU here"
        print(f"gpu check: skipped ({result['skipped']})")
        return _write(result, out_dir, 0)
    paths = [p for p in sys.path if p and p != str(REPO)]
    modules = installed(paths)
    print(
        f"gpu check: {sys.executable} ({result['version']}), startup imports {', '.join(modules)}"
    )
    facts = probe(modules, paths)
    result["probe"] = {k: facts.get(k) for k in ("gpu", "torch", "system", "scan_s")}
    result["native"] = facts.get("native")
    judged = len((facts.get("native") or {}).get("loads", []))
    print(f"  probe: cold scan {facts['scan_s']} s, {judged} loads judged")
    seen = real(modules)
    result["real"] = {k: v for k, v in seen.items() if k != "mapped"}
    loads = compare_loads(facts, seen, real)
    result["loads"] = loads
    print(
        f"  loads: {loads['agree']} agree with the real process, {len(loads['disagree'])} "
        f"disagree, {len(loads['unknown'])} unknown, {loads['shipped']} shipped (not compared)"
    )
    verdicts = envsync_checks(facts)
    result["envsync"] = verdicts
    problems = compare_facts(facts, seen, verdicts)
    result["facts"] = problems
    print(f"  GPU, driver, arch list, CUDA: {len(problems)} disagreements; envsync says {verdicts}")
    import sysconfig

    from benchmarks.native_precision import each_alone, in_import_order, summary

    site = Path(sysconfig.get_path("platlib"))
    python = Path(sys.executable)
    measures = {"import order": in_import_order(python, site, site)}
    if not args.quick:
        measures["alone"] = each_alone(python, site, workers=min(8, os.cpu_count() or 1))
    result["precision"] = {}
    bad = bool(loads["disagree"] or problems)
    for name, (files, tally) in measures.items():
        figures = summary(files, tally)
        result["precision"][name] = figures
        wrong = {k: len(figures[k]) for k in ("false fatal", "missed fatal", "wording", "trees")}  # type: ignore[arg-type]  # summary() gives dict[str, object]; these four figures are lists
        bad = bad or any(wrong.values())
        print(f"  precision, {name}: {len(files)} shared objects, {wrong}")
    return _write(result, out_dir, 1 if bad else 0)


def _write(result: dict[str, Any], out_dir: str | None, code: int) -> int:
    if out_dir:
        path = Path(out_dir) / "gpu_check.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(result, indent=1, default=str) + "\n")
        print(f"  written: {path}")
    return code


if __name__ == "__main__":
    sys.exit(main())
