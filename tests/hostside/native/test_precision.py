"""Precision of the native layer on a real heavy environment: the example's runtime venv
(torch CPU, triton, numpy, tokenizers, ...).

Every shared object of it is loaded for real, one process per top-level package, in the
order Python would (an extension module by import, its parents first; any other file by
ctypes.CDLL, RTLD_NOW), and every dlopen that process makes is recorded with its flags,
outcome and the files it mapped (precision_worker.py). The same sequence is then replayed
through envsync's linker, which must say, for each load, what the real loader did: no
false fatal (static fails, real loads), no missed fatal (static ok, real fails), the same
message for each failure, and the same files mapped for each success.
"""

from __future__ import annotations

import importlib.machinery
import json
import os
import subprocess
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from envsync.hostside.native.elf import ElfFile, read_elf
from envsync.hostside.native.loader import Environment, Linker, Process
from tests import figures
from tests.helpers import REPO
from tests.hostside.native.toolchain import facts, system_cache

pytestmark = pytest.mark.slow

WORKER = Path(__file__).with_name("precision_worker.py")
RUNTIME = REPO / "examples" / ".hosts" / "runtime"
SUFFIXES = sorted(importlib.machinery.EXTENSION_SUFFIXES, key=len, reverse=True)
RTLD_NOW = os.RTLD_NOW
RTLD_GLOBAL = os.RTLD_GLOBAL


@dataclass(frozen=True)
class Measured:
    """The environment measured: its interpreter, the folder scanned, its site-packages."""

    python: Path
    root: Path
    site: Path


@pytest.fixture(scope="module")
def runtime() -> Measured:
    """The example's runtime venv (built once by examples/build_hosts.py, then cached), or
    the environment of ENVSYNC_PRECISION_PYTHON (a GPU host's, say: the same harness)."""
    other = os.environ.get("ENVSYNC_PRECISION_PYTHON")
    if other:
        out = subprocess.run(
            [other, "-c", "import sysconfig; print(sysconfig.get_path('platlib'))"],
            capture_output=True,
            text=True,
            check=True,
        )
        site = Path(out.stdout.strip())
        return Measured(python=Path(other), root=site, site=site)
    from examples.build_hosts import build_runtime

    build_runtime(RUNTIME)
    site = next((RUNTIME / "lib").glob("python3*/site-packages"))
    return Measured(python=RUNTIME / "bin" / "python", root=RUNTIME, site=site)


def shared_objects(root: Path) -> list[Path]:
    """Every .so / .so.* file under `root`, one path per file (symlinks to one file: once)."""
    seen: set[str] = set()
    out = []
    for path in sorted(root.rglob("*.so*")):
        name = path.name
        if not (name.endswith(".so") or ".so." in name) or not path.is_file():
            continue
        real = os.path.realpath(path)
        if real not in seen:
            seen.add(real)
            out.append(path)
    return out


def module_name(site: Path, path: Path) -> str | None:
    """The dotted name Python imports `path` by, when it is an extension module there."""
    try:
        parts = list(path.relative_to(site).parts)
    except ValueError:
        return None
    stem = next((parts[-1][: -len(s)] for s in SUFFIXES if parts[-1].endswith(s)), None)
    if stem is None:
        return None
    parts[-1] = stem
    if not all(p.isidentifier() for p in parts):
        return None
    elf = read_elf(str(path))
    table = elf.symbols if isinstance(elf, ElfFile) else None
    if table is None or f"PyInit_{stem}" not in table.exports.names:
        return None
    return ".".join(parts)


def batches(root: Path, site: Path) -> dict[str, list[dict[str, str | None]]]:
    """One batch per top-level package ("numpy.libs" goes with "numpy"): its extension
    modules by name (parents first), then its other libraries."""
    groups: dict[str, list[dict[str, str | None]]] = {}
    for path in shared_objects(root):
        try:
            top = path.relative_to(site).parts[0]
        except ValueError:
            top = "(outside site-packages)"
        top = top.removesuffix(".libs").split(".")[0]
        groups.setdefault(top, []).append({"module": module_name(site, path), "path": str(path)})
    for items in groups.values():
        items.sort(
            key=lambda i: (
                i["module"] is None,
                (i["module"] or "").count("."),
                i["module"] or "",
                i["path"],
            )
        )
    return groups


def run_batch(python: Path, items: list[dict[str, str | None]]) -> dict[str, object]:
    env = {k: v for k, v in os.environ.items() if k not in ("LD_LIBRARY_PATH", "LD_PRELOAD")}
    env["TRANSFORMERS_VERBOSITY"] = "error"
    proc = subprocess.run(
        [str(python), str(WORKER), json.dumps(items)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=False,
    )
    lines = proc.stdout.strip().splitlines()
    assert proc.returncode == 0 and lines, f"worker: {proc.returncode} {proc.stderr[-3000:]}"
    result: dict[str, object] = json.loads(lines[-1])
    return result


def is_object(path: str) -> bool:
    name = os.path.basename(path)
    return name.endswith(".so") or ".so." in name


@dataclass
class Tally:
    events: Counter[str] = field(default_factory=Counter)
    files: dict[str, str] = field(default_factory=dict)  # realpath -> how it was judged
    false_fatal: list[str] = field(default_factory=list)
    missed_fatal: list[str] = field(default_factory=list)
    wording: list[str] = field(default_factory=list)
    trees: list[str] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)
    python_errors: list[str] = field(default_factory=list)


def replay(python: Path, result: dict[str, object], runtime_files: set[str], tally: Tally) -> None:
    """The worker's loads, in its order, through envsync's linker."""
    linker = Linker(Environment(facts=facts(), cache=system_cache()))
    process, started = linker.start(str(python))
    assert process is not None and started.verdict.kind == "ok", started
    process = _external(linker, process, [p for p in result["initial"] if is_object(p)])  # type: ignore[union-attr]
    for event in result["events"]:  # type: ignore[union-attr]
        process = _judge(linker, process, event, runtime_files, tally)
    for error in result["python_errors"]:  # type: ignore[union-attr]
        tally.python_errors.append(f"{error['module']}: {error['error'][:160]}")


def _known(process: Process) -> set[str]:
    return {os.path.realpath(o.path) for o in process.objects}


def _external(linker: Linker, process: Process, paths: list[str]) -> Process:
    """Objects the process has that no recorded load made (Python's start, the worker's own
    imports, a C library's own dlopen): into the link map, unjudged, RTLD_LOCAL."""
    for path in paths:
        if os.path.realpath(path) not in _known(process):
            process, _ = linker.dlopen(process, path, commit=True)
    return process


def _judge(
    linker: Linker,
    process: Process,
    event: dict[str, object],
    runtime_files: set[str],
    tally: Tally,
) -> Process:
    path = str(event["path"])
    flags = int(event["flags"])  # type: ignore[call-overload]
    before = _known(process)
    caller = next((o.path for o in process.objects if "_ctypes" in o.path), None)
    after, load = linker.dlopen(
        process,
        path,
        global_=bool(flags & RTLD_GLOBAL),
        now=bool(flags & RTLD_NOW),
        caller=caller,
        commit=True,
    )
    real_ok = bool(event["loaded"])
    static = load.verdict.kind
    where = "runtime" if os.path.realpath(path) in runtime_files else "along the way"
    label = f"{path} ({event['kind']})"
    tally.events[f"{where}: real {'loads' if real_ok else 'fails'}, envsync {static}"] += 1
    if static == "unknown":
        tally.unknown.append(f"{label}: {load.verdict.why}")  # type: ignore[union-attr]
    elif real_ok and static == "fails":
        tally.false_fatal.append(f"{label}: {load.verdict.message()}")  # type: ignore[union-attr]
    elif not real_ok and static == "ok":
        tally.missed_fatal.append(f"{label}: {event['error']}")
    elif not real_ok and static == "fails":
        expected = event["error"]
        if load.verdict.message() != expected:  # type: ignore[union-attr]
            tally.wording.append(f"{label}: real {expected!r}, envsync {load.verdict.message()!r}")  # type: ignore[union-attr]
    if real_ok:
        real_new = {p for p in event["new"] if is_object(p)}  # type: ignore[union-attr]
        static_new = _known(after) - before
        if real_new != static_new:
            tally.trees.append(
                f"{label}: only real {sorted(real_new - static_new)}, only envsync {sorted(static_new - real_new)}"
            )
        for file in real_new | {os.path.realpath(path)}:
            tally.files.setdefault(
                file, f"{'root' if file == os.path.realpath(path) else 'dependency'}: {static}"
            )
        after = _external(linker, after, sorted(real_new - static_new))
        return after
    tally.files.setdefault(os.path.realpath(path), f"root, fails for real: {static}")
    return process


def _report(section: str, files: list[Path], tally: Tally, elapsed: float) -> dict[str, list[str]]:
    runtime_files = {os.path.realpath(p) for p in files}
    covered = {f for f in runtime_files if f in tally.files}
    judged = Counter(v for f, v in tally.files.items() if f in runtime_files)
    figures.put(section, "shared objects", len(files))
    figures.put(section, "covered (loaded as a root or as a dependency)", len(covered))
    for name, count in sorted(judged.items()):
        figures.put(section, f"files: {name}", count)
    for name, count in sorted(tally.events.items()):
        figures.put(section, f"dlopen calls, {name}", count)
    figures.put(section, "false fatal", len(tally.false_fatal))
    figures.put(section, "missed fatal", len(tally.missed_fatal))
    figures.put(section, "failures worded otherwise than the loader", len(tally.wording))
    figures.put(section, "load trees that differ", len(tally.trees))
    figures.put(section, "imports failing in Python code (not native)", len(tally.python_errors))
    figures.put(section, "seconds", round(elapsed, 1))
    report = {
        "false fatal": tally.false_fatal,
        "missed fatal": tally.missed_fatal,
        "wording": tally.wording,
        "trees": tally.trees,
        "unknown": tally.unknown,
        "python errors": tally.python_errors,
        "not covered": sorted(runtime_files - covered),
    }
    print(json.dumps(report, indent=1))
    return report


def _assert_precise(tally: Tally, report: dict[str, list[str]]) -> None:
    assert not tally.false_fatal and not tally.missed_fatal, report
    assert not tally.wording and not tally.trees, report
    assert not report["not covered"], report


def test_every_shared_object_of_the_runtime_in_import_order(runtime: Measured) -> None:
    """One process per top-level package: its modules imported, then its other files."""
    python, site = runtime.python, runtime.site
    files = shared_objects(runtime.root)
    runtime_files = {os.path.realpath(p) for p in files}
    tally = Tally()
    started = time.perf_counter()
    for _name, items in sorted(batches(runtime.root, site).items()):
        replay(python, run_batch(python, items), runtime_files, tally)
    report = _report(
        "native precision: the runtime in import order", files, tally, time.perf_counter() - started
    )
    _assert_precise(tally, report)


def test_every_shared_object_of_the_runtime_alone(runtime: Measured) -> None:
    """Each file dlopen'ed (ctypes, RTLD_NOW) first thing in a fresh interpreter: without the
    libraries its package's imports would have loaded before it."""
    python = runtime.python
    files = shared_objects(runtime.root)
    runtime_files = {os.path.realpath(p) for p in files}
    tally = Tally()
    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(
            pool.map(lambda p: run_batch(python, [{"module": None, "path": str(p)}]), files)
        )
    for result in results:
        replay(python, result, runtime_files, tally)
    report = _report(
        "native precision: each file of the runtime alone",
        files,
        tally,
        time.perf_counter() - started,
    )
    _assert_precise(tally, report)
