"""The native layer's precision harness: every shared object of an environment loaded for real
(tests/hostside/native/precision_worker.py records each dlopen), the same sequence replayed
through envsync's linker, every verdict compared with the real loader's.

Stdlib and envsync's host side only, so that it runs with nothing but a host's own
interpreter: the test suite (tests/hostside/native/test_precision.py) and the GPU check
(benchmarks/gpu_check.py) measure with it.
"""

from __future__ import annotations

import functools
import importlib.machinery
import json
import os
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

from envsync.hostside.native.elf import ElfFile, read_elf
from envsync.hostside.native.ldcache import LdCache, read_ldcache
from envsync.hostside.native.ldso import LoaderFacts, ldso_help
from envsync.hostside.native.ldso import loader_facts as _loader_facts
from envsync.hostside.native.loader import Environment, Linker, Process
from envsync.hostside.native.verdicts import Fails, Unknown

WORKER = (
    Path(__file__).resolve().parent.parent / "tests" / "hostside" / "native" / "precision_worker.py"
)
SUFFIXES = sorted(importlib.machinery.EXTENSION_SUFFIXES, key=len, reverse=True)
RTLD_NOW = os.RTLD_NOW
RTLD_GLOBAL = os.RTLD_GLOBAL


@functools.cache
def loader_facts() -> LoaderFacts:
    """This machine's loader, as the probe reads it (ld.so --help)."""
    program = read_elf(os.path.realpath(sys.executable))
    interp = getattr(program, "interp", None) or "/lib64/ld-linux-x86-64.so.2"
    help_text, version_text = ldso_help(interp)
    return _loader_facts(interp, help_text, version_text, os.uname().machine)


@functools.cache
def system_cache() -> LdCache | None:
    cache = read_ldcache(loader_facts().cache)
    return cache if isinstance(cache, LdCache) else None


def site_of(python: str | Path) -> Path:
    """An interpreter's site-packages (platlib)."""
    out = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('platlib'))"],
        capture_output=True,
        text=True,
        check=True,
    )
    return Path(out.stdout.strip())


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
    linker = Linker(Environment(facts=loader_facts(), cache=system_cache()))
    process, started = linker.start(str(python))
    assert process is not None and started.verdict.kind == "ok", started
    process = _external(
        linker, process, [p for p in cast("list[str]", result["initial"]) if is_object(p)]
    )
    for event in cast("list[dict[str, object]]", result["events"]):
        process = _judge(linker, process, event, runtime_files, tally)
    for error in cast("list[dict[str, str]]", result["python_errors"]):
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
    flags = int(event["flags"])  # type: ignore[call-overload]  # the worker's event is JSON-like dict[str, object]; its flags are an int
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
    verdict = load.verdict  # its class is its kind: Unknown is "unknown", Fails is "fails"
    if isinstance(verdict, Unknown):
        tally.unknown.append(f"{label}: {verdict.why}")
    elif real_ok and isinstance(verdict, Fails):
        tally.false_fatal.append(f"{label}: {verdict.message()}")
    elif not real_ok and static == "ok":
        tally.missed_fatal.append(f"{label}: {event['error']}")
    elif not real_ok and isinstance(verdict, Fails):
        expected = event["error"]
        if verdict.message() != expected:
            tally.wording.append(f"{label}: real {expected!r}, envsync {verdict.message()!r}")
    if real_ok:
        real_new = {p for p in cast("list[str]", event["new"]) if is_object(p)}
        static_new = _known(after) - before
        if real_new != static_new:
            only_real, only_static = sorted(real_new - static_new), sorted(static_new - real_new)
            tally.trees.append(f"{label}: only real {only_real}, only envsync {only_static}")
        for file in real_new | {os.path.realpath(path)}:
            tally.files.setdefault(
                file, f"{'root' if file == os.path.realpath(path) else 'dependency'}: {static}"
            )
        after = _external(linker, after, sorted(real_new - static_new))
        return after
    tally.files.setdefault(os.path.realpath(path), f"root, fails for real: {static}")
    return process


def in_import_order(python: Path, root: Path, site: Path) -> tuple[list[Path], Tally]:
    """One process per top-level package: its modules imported, then its other files."""
    files = shared_objects(root)
    runtime_files = {os.path.realpath(p) for p in files}
    tally = Tally()
    for _name, items in sorted(batches(root, site).items()):
        replay(python, run_batch(python, items), runtime_files, tally)
    return files, tally


def each_alone(python: Path, root: Path, workers: int = 2) -> tuple[list[Path], Tally]:
    """Each file dlopen'ed (ctypes, RTLD_NOW) first thing in a fresh interpreter."""
    from concurrent.futures import ThreadPoolExecutor

    files = shared_objects(root)
    runtime_files = {os.path.realpath(p) for p in files}
    tally = Tally()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        results = list(
            pool.map(lambda p: run_batch(python, [{"module": None, "path": str(p)}]), files)
        )
    for result in results:
        replay(python, result, runtime_files, tally)
    return files, tally


def summary(files: list[Path], tally: Tally) -> dict[str, object]:
    """The figures of one measure, and the cases behind each that is not zero."""
    runtime_files = {os.path.realpath(p) for p in files}
    covered = {f for f in runtime_files if f in tally.files}
    return {
        "shared objects": len(files),
        "covered": len(covered),
        "files": dict(Counter(v for f, v in tally.files.items() if f in runtime_files)),
        "dlopen calls": dict(tally.events),
        "false fatal": tally.false_fatal,
        "missed fatal": tally.missed_fatal,
        "wording": tally.wording,
        "trees": tally.trees,
        "unknown": tally.unknown,
        "python errors": tally.python_errors,
        "not covered": sorted(runtime_files - covered),
    }
