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

import json
import os
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest

from benchmarks.native_precision import Tally, each_alone, in_import_order, site_of
from tests import figures
from tests.helpers import REPO

pytestmark = pytest.mark.slow

RUNTIME = REPO / "examples" / ".hosts" / "runtime"


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
        site = site_of(other)
        return Measured(python=Path(other), root=site, site=site)
    from examples.build_hosts import build_runtime

    build_runtime(RUNTIME)
    site = next((RUNTIME / "lib").glob("python3*/site-packages"))
    return Measured(python=RUNTIME / "bin" / "python", root=RUNTIME, site=site)


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
    started = time.perf_counter()
    files, tally = in_import_order(runtime.python, runtime.root, runtime.site)
    report = _report(
        "native precision: the runtime in import order", files, tally, time.perf_counter() - started
    )
    _assert_precise(tally, report)


def test_every_shared_object_of_the_runtime_alone(runtime: Measured) -> None:
    """Each file dlopen'ed (ctypes, RTLD_NOW) first thing in a fresh interpreter: without the
    libraries its package's imports would have loaded before it."""
    started = time.perf_counter()
    files, tally = each_alone(runtime.python, runtime.root)
    report = _report(
        "native precision: each file of the runtime alone",
        files,
        tally,
        time.perf_counter() - started,
    )
    _assert_precise(tally, report)
