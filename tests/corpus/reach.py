"""The reachability harness: what a real startup loads against what envsync reads of it.

For a real venv and one way of starting the service (a console script's function, or a
module run as `python -m`), `loaded` runs that startup in the venv's own interpreter as
far as it goes on this CPU machine and records every module in `sys.modules` and every
shared object mapped (`/proc/self/maps`), each traced to the distribution whose RECORD
lists its file. `verdicts` asks envsync about the same venv: every distribution in it is
made to differ (another version on a synthetic reference that is the target's own snapshot,
read like a lock: no reference graph), and envsync rates each difference. A distribution
that really loaded must not be `benign`; every `fatal` must be a real failure.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from envsync.classify import Startup, classify
from envsync.classify.rules import all_modules, load_packs, packs_for
from envsync.collect import ProbeOptions, collect
from envsync.model.environment import Snapshot
from envsync.model.findings import Difference, Finding
from envsync.runner.local import LocalRunner
from envsync.sources.inventory import HostSpec
from examples.build_hosts import exclusive
from tests.corpus.venvs import UV, site, torch_base, uv_install

# Runs in the venv's interpreter: the startup in-process, then what it loaded.
RECORDER = r"""
import json, os, runpy, sys, importlib, traceback
out, kind, target, *args = sys.argv[1:]
result = {"kind": kind, "target": target}
try:
    if kind == "script":
        module, func = target.split(":")
        sys.argv = [module.split(".")[0]] + args
        getattr(importlib.import_module(module), func)()
    else:
        sys.argv = [target] + args
        runpy.run_module(target, run_name="__main__", alter_sys=True)
    result["outcome"] = "returned"
except SystemExit as e:
    result["outcome"] = "exit %s" % (e.code,)
except BaseException as e:
    result["outcome"] = "exception"
    result["exception"] = "%s: %s" % (type(e).__name__, e)
    result["frames"] = [
        "%s:%s" % (f.filename, f.lineno) for f in traceback.extract_tb(e.__traceback__)
    ]
files = set()
for m in list(sys.modules.values()):
    f = getattr(m, "__file__", None)
    if f:
        files.add(os.path.realpath(f))
with open("/proc/self/maps") as maps:
    for line in maps:
        parts = line.split()
        if len(parts) >= 6 and ".so" in parts[5]:
            files.add(os.path.realpath(parts[5]))
result["files"] = sorted(files)
result["modules"] = len(sys.modules)
with open(out, "w") as f:
    json.dump(result, f)
"""

# Runs in the venv's interpreter: every installed file -> its distribution.
OWNERS = r"""
import importlib.metadata as md, json, os, sys
out = {}
for dist in md.distributions():
    name = dist.metadata["Name"]
    for f in dist.files or ():
        try:
            out[os.path.realpath(str(f.locate()))] = name
        except Exception:
            pass
json.dump(out, sys.stdout)
"""


@dataclass(frozen=True, slots=True, kw_only=True)
class Run:
    """What one real startup loaded."""

    outcome: str  # "returned", "exit 0", "exception"
    exception: str | None
    distributions: frozenset[str]  # canonical names of those with a file loaded
    modules: int


def canonical(name: str) -> str:
    from packaging.utils import canonicalize_name

    return str(canonicalize_name(name))


def loaded(
    python: Path, kind: str, target: str, args: tuple[str, ...], work: Path, env: dict[str, str]
) -> Run:
    """Run the startup (`kind` "script": `module:function`; "module": `python -m`) with
    `args` in the venv of `python`; what it loaded, by distribution."""
    out = work / f"loaded-{kind}-{target.replace(':', '-')}.json"
    subprocess.run(
        [str(python), "-c", RECORDER, str(out), kind, target, *args],
        env=env,
        capture_output=True,
        timeout=900,
        check=False,
    )
    data = json.loads(out.read_text())
    owners = json.loads(
        subprocess.run(
            [str(python), "-c", OWNERS], capture_output=True, text=True, check=True, timeout=300
        ).stdout
    )
    dists = {canonical(owners[f]) for f in data["files"] if f in owners}
    return Run(
        outcome=data["outcome"],
        exception=data.get("exception"),
        distributions=frozenset(dists),
        modules=data["modules"],
    )


def snapshot(python: Path, startup: Startup, root: str, main: str | None) -> Snapshot:
    """The probe's snapshot of the venv, with the startup graph of that launch."""
    packs = startup.packs
    entry = startup.entrypoint or root
    tops = tuple(dict.fromkeys(r.partition(".")[0] for r in (*startup.launcher, entry)))
    options = ProbeOptions(
        roots=all_modules(root, packs, startup.launcher),
        internal=tuple(t for t in tops if ":" not in t),
        main=main,
    )
    return collect(HostSpec(name="target", python=str(python)), LocalRunner("target"), options)


def startup_of(kind: str, target: str, command: tuple[str, ...]) -> tuple[Startup, str, str | None]:
    """The Startup envsync reads for a launch (and the probe's root and `-m` module)."""
    if kind == "script":
        module = target.partition(":")[0]
        return (
            Startup(entrypoint=module, command=command, packs=(), shown=f"console {target}"),
            f"console:{command[0]}",
            None,
        )
    packs = packs_for(target, load_packs())
    return (
        Startup(entrypoint=target, command=command, packs=packs, shown=f"-m {target}"),
        target,
        target,
    )


def verdicts(snap: Snapshot, startup: Startup) -> dict[str, Finding]:
    """envsync's verdict on a version difference in each distribution of the venv, the
    reference being the venv's own snapshot as a lock (no reference graph)."""
    reference = replace(snap, host="reference", source="lock", startup=None)
    diffs = [
        Difference(
            kind="version",
            section="distributions",
            key=d.name,
            reference=d.version + ".post999",
            target=d.version,
        )
        for d in snap.distributions
    ]
    report = classify(reference, snap, diffs, startup)
    return {canonical(f.subject): f for f in report.findings if f.kind == "version"}


# ---------------------------------------------------------------------------------------
# The venvs: one base with torch (the CPU build, from the machine's disk through pip), each
# engine in a venv of its own that sees the base through a .pth file, its requirements
# pinned to what a real install of it resolved (tests/corpus/data/reach/), installed by uv
# as hard links into its cache. Built once per machine, kept between runs.

DATA = Path(__file__).parent / "data" / "reach"


@dataclass(frozen=True, slots=True, kw_only=True)
class Entry:
    """One way the engine's service starts."""

    kind: str  # "script" (a console script's function) or "module" (python -m)
    target: str  # "module:function" or the module
    args: tuple[str, ...]
    console: str | None = None  # the console script's name

    @property
    def command(self) -> tuple[str, ...]:
        if self.kind == "script":
            return (self.console or "", *self.args)
        return ("python", "-m", self.target, *self.args)

    @property
    def shown(self) -> str:
        return " ".join(self.command)


@dataclass(frozen=True, slots=True, kw_only=True)
class Engine:
    id: str
    requirement: str  # the engine, NAME==VERSION
    pins: str  # the file of its requirements in DATA
    entries: tuple[Entry, ...]


def _run(argv: list[str], **kw: Any) -> None:
    subprocess.run(argv, check=True, capture_output=True, timeout=1800, **kw)


def build(root: Path, engine: Engine) -> Path:
    """The engine's venv under `root` (built once); returns its python."""
    base_site = torch_base(root)
    venv = root / engine.id
    with exclusive(venv):
        if not (venv / "ok").exists():
            shutil.rmtree(venv, ignore_errors=True)
            _run([str(UV), "venv", "-q", "--python", sys.executable, str(venv)])
            python = venv / "bin" / "python"
            (site(venv) / "_base.pth").write_text(f"{base_site}\n")
            uv_install(python, engine.requirement, "-r", str(DATA / engine.pins))
            (venv / "ok").write_text("")
    return venv / "bin" / "python"
