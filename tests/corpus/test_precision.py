"""Precision of the static verdict: each import envsync judges, really imported.

For the corpus cases whose culprit imports on a CPU machine (transformers), every import
of the culprit in the SGLang modules startup reaches is judged statically (fails, imports,
or cannot tell), then really run (`from M import N`) in the target venv, with the
culprit's own dependencies (not SGLang's stack: no torch) on PYTHONPATH. A real failure
caused by something else missing (torch, an optional backend) says nothing about the
verdict and is left out, and counted. Targets: no false fatal, no missed fatal.

Requirements too (`test_violated_requirements_of_the_runtime`): other versions of the
example runtime's distributions, each in a venv on top of the runtime, violate what the
runtime's other distributions require; each dependent is really imported beside it. A
violation that breaks the import is `fatal` or `risky`; one that imports cleanly is never
`fatal`.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from importlib.metadata import distributions
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from envsync.classify.graph import GraphIndex
from envsync.classify.rules import active_roots, all_modules, load_packs, packs_for
from envsync.cli import main
from envsync.collect import ProbeOptions, collect
from envsync.model.launch import parse_flags
from envsync.model.vocab import RUNS
from envsync.runner.local import LocalRunner
from envsync.sources.inventory import HostSpec
from examples.build_hosts import build_runtime
from tests.corpus.cases import CASES, Case
from tests.corpus.conftest import Pairs
from tests.figures import put
from tests.helpers import REPO, fetch, make_venv, make_wheel, pip_install, site_packages

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


# ---------------------------------------------------------------------------------------
# Requirements: every violated Requires-Dist of the example's runtime, really imported

# Other versions of the runtime's distributions, small wheels: each violates what some of
# the runtime's distributions require (computed below from their metadata, as pip check
# does); one target venv per wheel, on top of the shared runtime (read through a .pth file,
# never changed), the wheel shadowing the runtime's copy. Left out: setuptools 65.5.0
# (torch requires >=77.0.3, and imports cleanly beside it): reading torch's import graph
# on five more hosts would cost this harness minutes; and a second tokenizers below the
# same range.
OVERRIDES = (
    "rich==13.7.1",
    "idna==3.4",
    "certifi==2022.12.7",
    "huggingface-hub==0.36.2",
    "tokenizers==0.22.2",
)
REQUIREMENTS = "precision over violated requirements (the example's runtime)"


def runtime_violations(site: Path, override: str) -> list[tuple[str, str]]:
    """(the dependent's distribution name, its Requires-Dist) of every runtime
    distribution whose requirement on the override's distribution the override violates
    (markers for this Python and platform, no extras)."""
    name, _, version = override.partition("==")
    out = []
    for dist in distributions(path=[str(site)]):
        for text in dist.requires or []:
            req = Requirement(text)
            if canonicalize_name(req.name) != canonicalize_name(name):
                continue
            if req.marker is not None and not req.marker.evaluate({"extra": ""}):
                continue
            if not req.specifier.contains(Version(version), prereleases=True):
                out.append((dist.metadata["Name"], text))
    return sorted(set(out))


def overlay(root: Path, site: Path, *wheels: Path) -> Path:
    """A venv that sees the runtime through a .pth file, with `wheels` installed in it."""
    python = make_venv(root)
    (site_packages(python) / "zz-runtime.pth").write_text(f"{site}\n")
    if wheels:
        pip_install(python, *wheels)
    return python


def imports_cleanly(python: Path, module: str) -> tuple[bool, str]:
    done = subprocess.run(
        [str(python), "-W", "ignore", "-c", f"import {module}"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    # the exception's own line (a message may go on below it: transformers' "Try: ...")
    raised = [ln for ln in done.stderr.splitlines() if re.match(r"\w+(Error|Exception): ", ln)]
    return done.returncode == 0, raised[-1] if raised else ""


def test_violated_requirements_of_the_runtime(
    wheel_cache: Path, tmp_path_factory: pytest.TempPathFactory, capsys: pytest.CaptureFixture[str]
) -> None:
    """Across the example's runtime: every violated requirement that a real import of its
    dependent shows to break is `fatal` or `risky` on the distribution it asks for, and
    none that imports cleanly is `fatal` (issue 31, Deliver 6)."""
    site = build_runtime(REPO / "examples" / ".hosts" / "runtime")
    root = tmp_path_factory.mktemp("requirements")
    cases = [(o, v) for o in OVERRIDES if (v := runtime_violations(site, o))]
    dependents = sorted({d for _, found in cases for d, _ in found})
    modules = {d: d.lower().replace("-", "_") for d in dependents}
    service = "".join(f"import {m}\n" for m in modules.values())
    svc = make_wheel(root / "wheels", "svc", "1.0", {"svc/__init__.py": "", "svc/main.py": service})
    hosts = {"ref": overlay(root / "ref", site, svc)}
    for n, (override, _) in enumerate(cases):
        hosts[f"t{n}"] = overlay(root / f"t{n}", site, svc, fetch(wheel_cache, override))
    assert imports_cleanly(hosts["ref"], "svc.main") == (True, "")
    (root / "envsync.toml").write_text(
        '[service]\ncommand = ["{python}", "-m", "svc.main"]\n'
        + "".join(f'[hosts.{h}]\npython = "{p}"\n' for h, p in hosts.items())
    )
    # one host at a time: the first reads the runtime's modules, the others find them in
    # the facts store
    diff = ["--inventory", str(root / "envsync.toml"), "-q", "diff", "-j", "1"]
    diff += ["--format", "json"]
    code = main([*diff, "ref", *(f"t{n}" for n in range(len(cases)))])
    assert code == 1
    report = json.loads(capsys.readouterr().out)
    verdicts = {
        host: {f["subject"]: f for f in c["findings"]}
        for c in report["classes"]
        for host in c["members"]
    }
    matrix: Counter[tuple[str, str]] = Counter()
    wrong: list[str] = []
    rows: list[str] = []
    broken: dict[str, tuple[str, str]] = {}  # host -> (the culprit, the real import's last line)
    first_broken: dict[str, int] = {}  # host -> the index in `dependents` of what broke first
    for n, (override, found) in enumerate(cases):
        name = override.partition("==")[0]
        finding = verdicts[f"t{n}"][name]
        severity = finding["severity"]
        static = severity if severity in ("fatal", "risky") else "neither"
        for dependent, text in found:
            clean, last = imports_cleanly(hosts[f"t{n}"], modules[dependent])
            real = "imports" if clean else "breaks"
            matrix[static, real] += 1
            if not clean and (  # svc.main stops at the first dependent it imports that breaks
                f"t{n}" not in broken or dependents.index(dependent) < first_broken[f"t{n}"]
            ):
                broken[f"t{n}"] = (name, last)
                first_broken[f"t{n}"] = dependents.index(dependent)
            rows.append(f"  {override}: {dependent} requires {text}: {severity}, really {real}")
            if (real == "breaks" and static == "neither") or (
                real == "imports" and static == "fatal"
            ):
                wrong.append(f"{rows[-1]} ({last}; envsync: {finding['reason']})")
    with capsys.disabled():
        print(f"\n{REQUIREMENTS}:\n" + "\n".join(rows))
    for static in ("fatal", "risky", "neither"):
        for real in ("breaks", "imports"):
            put(REQUIREMENTS, f"envsync: {static}; really {real}", matrix[static, real])
    # the harness can fail both ways: some violations really break, some import cleanly
    assert sum(matrix[s, "breaks"] for s in ("fatal", "risky", "neither")) > 0
    assert sum(matrix[s, "imports"] for s in ("fatal", "risky", "neither")) > 0
    assert not wrong, "\n".join(wrong)

    # --import-check where a real import breaks: fatal on the difference, with the exception
    # (raised in the dependent, the same on both hosts, and traced to its requirement)
    code = main([*diff, "--import-check", "ref", *sorted(broken)])
    assert code == 1
    report = json.loads(capsys.readouterr().out)
    checked = {
        host: {f["subject"]: f for f in c["findings"]}
        for c in report["classes"]
        for host in c["members"]
    }
    for host, (name, last) in sorted(broken.items()):
        finding = checked[host][name]
        first = finding["evidence"][0]
        assert finding["severity"] == "fatal", finding
        assert first["source"] == "import-check", first
        assert first["detail"].startswith(f"import svc.main: {last}"), (last, first)
    put(REQUIREMENTS, "--import-check: fatal where a real import breaks", len(broken))
