"""Precision of the static verdict: each import envsync judges, really imported.

For the corpus cases whose culprit imports on a CPU machine (transformers), every import
of the culprit in the SGLang modules startup reaches is judged statically (fails, imports,
or cannot tell), then really run (`from M import N`) in the target venv, with the
culprit's own dependencies (not SGLang's stack: no torch) on PYTHONPATH. A real failure
caused by something else missing (torch, an optional backend) says nothing about the
verdict and is left out, and counted. Targets: no false fatal, no missed fatal.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from envsync.classify.graph import GraphIndex
from envsync.classify.rules import active_roots, all_modules, load_packs, packs_for
from envsync.collect import ProbeOptions, collect
from envsync.inventory import HostSpec
from envsync.launch import parse_flags
from envsync.runner.local import LocalRunner
from envsync.vocab import RUNS
from tests.corpus.cases import CASES, Case
from tests.corpus.conftest import Pairs
from tests.figures import put

pytestmark = pytest.mark.slow

ENTRYPOINT = "sglang.launch_server"
EXTRAS = ("pillow",)  # transformers' image processors need PIL; torch is never installed

REAL_IMPORT = r"""
import json, sys
out = []
for module, name in json.loads(sys.argv[1]):
    try:
        if name is None:
            __import__(module)
        else:
            exec("from %s import %s" % (module, name), {})
        out.append(["imports", ""])
    except Exception as e:
        text = "%s: %s" % (type(e).__name__, e)
        missing = getattr(e, "name", None) or ""
        ours = (
            (name is not None and "cannot import name %r" % name in str(e))
            or (isinstance(e, ModuleNotFoundError) and missing and module.startswith(missing))
        )
        out.append(["fails" if ours else "environment", text])
print(json.dumps(out))
"""


def runtime(cache: Path, root: Path, requirement: str) -> Path:
    """The dependencies of `requirement` (not the package itself), in a folder for PYTHONPATH."""
    folder = root / ("runtime-" + requirement.replace("==", "-"))
    if folder.exists():
        return folder
    argv = [sys.executable, "-m", "pip", "install", "-q", "--target", str(folder)]
    wanted = [requirement, *EXTRAS]
    offline = subprocess.run(
        [*argv, "--no-index", "--find-links", str(cache), *wanted], capture_output=True
    )
    if offline.returncode != 0:  # a fresh machine: fetch the wheels into the cache first
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "-q", "-d", str(cache), *wanted],
            check=True,
            capture_output=True,
        )
        shutil.rmtree(folder, ignore_errors=True)
        subprocess.run(
            [*argv, "--no-index", "--find-links", str(cache), *wanted],
            check=True,
            capture_output=True,
        )
    name = requirement.partition("==")[0]
    for path in folder.iterdir():
        if path.name == name or path.name.startswith(name + "-"):
            shutil.rmtree(path)
    return folder


def static_verdicts(case: Case, python: Path) -> dict[tuple[str, str | None], str]:
    """(module, name) -> fails | imports | unknown, for every import of the culprit that
    the SGLang modules startup reaches run at module level."""
    packs = packs_for(ENTRYPOINT, load_packs())
    options = ProbeOptions(roots=all_modules(ENTRYPOINT, packs), internal=("sglang",))
    snap = collect(HostSpec(name="tgt", python=str(python)), LocalRunner("tgt"), options)
    assert snap.startup is not None
    index = GraphIndex(snap.startup)
    roots = active_roots(ENTRYPOINT, packs, parse_flags(case.flags))
    reached = index.reach(roots)
    top = case.culprit.replace("-", "_")
    verdicts: dict[tuple[str, str | None], str] = {}
    for importer in reached:
        facts = snap.startup.modules.get(importer)
        if facts is None or not importer.startswith("sglang."):
            continue
        broken = index.broken_imports(importer)
        for edge in facts.imports:
            if edge.context not in RUNS or edge.module.partition(".")[0] != top:
                continue
            for name in edge.names or (None,):
                if name == "*":
                    continue
                fails = any(
                    b.edge == edge and (b.missing_module or b.missing_name == name) for b in broken
                )
                if fails:
                    verdict = "fails"
                elif name is not None and index.lookup(edge.module, name)[0] is None:
                    verdict = "unknown"
                else:
                    verdict = "imports"
                verdicts[edge.module, name] = min(verdicts.get((edge.module, name), "z"), verdict)
    return verdicts


def real_outcomes(
    python: Path, runtime_dir: Path, imports: list[tuple[str, str | None]]
) -> list[tuple[str, str]]:
    env = {**os.environ, "PYTHONPATH": str(runtime_dir), "TRANSFORMERS_VERBOSITY": "error"}
    out = subprocess.run(
        [str(python), "-c", REAL_IMPORT, json.dumps(imports)],
        capture_output=True,
        text=True,
        env=env,
        check=True,
        timeout=600,
    )
    return [(row[0], row[1]) for row in json.loads(out.stdout.splitlines()[-1])]


def test_static_verdicts_match_real_imports(
    pairs: Pairs, wheel_cache: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    root = tmp_path_factory.mktemp("precision")
    matrix: Counter[tuple[str, str]] = Counter()
    wrong: list[str] = []
    left_out: list[str] = []
    unknown = 0
    for case in (c for c in CASES if c.cpu_importable):
        pair = pairs.pair(case)
        (requirement,) = [r for r in case.target if r.startswith(case.culprit + "==")]
        folder = runtime(wheel_cache, root, requirement)
        verdicts = static_verdicts(case, pair.target)
        imports = sorted(verdicts, key=lambda k: (k[0], k[1] or ""))
        for key, (real, text) in zip(
            imports, real_outcomes(pair.target, folder, imports), strict=True
        ):
            shown = f"{case.id}: from {key[0]} import {key[1]}"
            if real == "environment":
                left_out.append(f"{shown}: {text}")
                continue
            static = "fatal" if verdicts[key] == "fails" else "not fatal"
            unknown += verdicts[key] == "unknown"
            matrix[static, real] += 1
            if (static == "fatal") != (real == "fails"):
                wrong.append(f"{shown}: envsync {verdicts[key]}, really {real} {text}")
    why = Counter(line.rpartition(": ")[2].split(" (")[0] for line in left_out)
    lines = [
        "",
        "precision of the static verdict (corpus, per import):",
        "                                really fails   really imports",
        f"  envsync: fails (fatal)        {matrix['fatal', 'fails']:>12}   "
        f"{matrix['fatal', 'imports']:>14}",
        f"  envsync: imports or unknown   {matrix['not fatal', 'fails']:>12}   "
        f"{matrix['not fatal', 'imports']:>14}",
        f"  of which unknown: {unknown}",
        f"  left out, something else missing: {len(left_out)} "
        + "; ".join(f"{n}x {reason}" for reason, n in why.most_common(3)),
    ]
    print("\n".join(lines))  # shown by pytest -rA, and on failure
    section = "precision of the static verdict (corpus imports)"
    for static in ("fatal", "not fatal"):
        for real in ("fails", "imports"):
            put(section, f"envsync: {static}; really {real}", matrix[static, real])
    put(section, "left out: something else missing", len(left_out))
    assert matrix["fatal", "fails"] > 0 and matrix["not fatal", "imports"] > 0
    assert not wrong, "\n".join(wrong)
