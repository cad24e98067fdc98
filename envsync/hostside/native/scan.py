"""The native layer in the probe: what the startup's imports will dlopen, judged as ld.so would.

The startup graph gives the extension modules in the order Python imports them (parents
first, statements in line order; a package the graph does not follow is read one level
deep for the extension modules its own code imports, as torch's `from torch._C import *`).
torch's own preloads come first where torch is imported: `_load_global_deps`
(libtorch_global_deps.so, RTLD_GLOBAL) and, for a CUDA build, its table of nvidia
libraries, read from torch/__init__.py with ast. Extension modules a reached package
ships that no import loads (torchvision opens its `_C.so` itself, by a computed name) are
judged after them, marked as not shown to load. Everything is cached by stat keys in
`native-DIGEST-ENV.json`: a warm run only stats. ENVSYNC_NATIVE=0 in the probe's
environment turns the layer off (for benchmarks).
"""

from __future__ import annotations

import os
import sys

from ..caches.folder import cache_path, load_cache, save_cache
from ..caches.store import open_store
from ..shared import LOADER_ENV, RUNS, Stamp, plain, racy, stamp
from .cache import ElfStore

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Dict, List, Optional

    from ..graph.finder import ModuleFinder

    Data = Dict[str, Any]
    Planned = List[Data]  # {"path", "module", "origin", "via", "global", "now"}
    Owner = Optional[str]

GLOBAL_DEPS = "libtorch_global_deps.so"


def native_facts(
    options: Data,
    finder: ModuleFinder,
    graph: Any,
    torch: Data | None,
    distributions: list[Data],
    base: str | None,
    digest: str,
) -> Data | None:
    """The startup's loads and their verdicts (None: no startup graph, or turned off)."""
    if graph is None or os.environ.get("ENVSYNC_NATIVE") == "0":
        return None
    path = cache_path(base, "native", digest)
    store = load_cache(path) if path else {}
    before = _identities(store)
    planned = planned_loads(graph, finder, torch, distributions, base, digest, store)
    env = options.get("loader_env")  # the service's own LD_* (envsync sends them), else ours
    settings = dict(env) if isinstance(env, dict) else {}
    for name in LOADER_ENV:
        settings.setdefault(name, os.environ.get(name))
    # the parsed files are kept once a scan was judged here before (its verdicts are
    # kept): a change reads what it changed again; a first scan writes none of them
    elves = ElfStore(
        open_store(cache_path(base, "elves", digest)), keep=bool(store.get("verdicts"))
    )
    loads = judge(planned, settings, options.get("workdir"), store, elves)
    owners = owners_of(loads, planned, distributions, store)
    if path and _identities(store) != before:
        save_cache(path, store)
    return {
        "program": sys.executable,
        "loads": [describe(p, load, finder.paths) for p, load in zip(planned, loads)],
        "owners": owners,
    }


def _identities(store: Data) -> set[tuple[str, str, int]]:
    """What a run changed in the store: every entry it adds or replaces is a new object."""
    return {
        (section, key, id(value))
        for section, entries in store.items()
        if isinstance(entries, dict)
        for key, value in entries.items()
    }


# ---------------------------------------------------------------------------------------
# What startup loads, in order


PLANS_KEPT = 4  # the plans of the environment's last states (graphfile.PAST_KEPT's)


def planned_loads(
    graph: Any,
    finder: ModuleFinder,
    torch: Data | None,
    distributions: list[Data],
    base: str | None,
    digest: str,
    store: Data,
) -> Planned:
    """The loads of a startup, from the store while the graph and every file and folder
    they were read from are unchanged."""
    source = getattr(graph, "path", None)
    # a cached graph is known by its cache file and its modules' digest: a state the
    # environment comes back to (graphstates.py) finds its plan
    key = f"{source}:{graph.digest}" if source else None
    kept = store.setdefault("planned", {})
    record = kept.get(key) if key else None
    # a patch of a graph whose walk took the same course: the plan reads the modules, the
    # imports and the files it records, none of which the patch changed (unless it read a
    # patched file: then that file's stamp is another)
    before = getattr(graph, "same_course", None)
    if record is None and key and before:
        record = kept.get(f"{source}:{before}")
    if record is not None and unchanged(record["observed"]):
        if key and key not in kept:
            _keep_plan(kept, key, record)
        return list(record["loads"])
    whole = graph.whole() if hasattr(graph, "whole") else graph
    seen: dict[str, Any] = {}
    planner = Planner(whole.get("modules", {}), finder, torch, distributions, base, digest, seen)
    planner.run(list(whole.get("roots", [])))
    loads = planner.loads
    if key:
        now = stamp_now()
        if all(not (isinstance(v, list) and racy(v[1], now)) for v in seen.values()):
            _keep_plan(kept, key, {"observed": seen, "loads": loads})
    return loads


def _keep_plan(kept: Data, key: str, record: Data) -> None:
    """Keep a plan under `key` as the newest, and the newest PLANS_KEPT plans alone."""
    kept.pop(key, None)
    kept[key] = record
    for old in list(kept)[:-PLANS_KEPT]:
        del kept[old]


def stamp_now() -> int:
    import time

    return time.time_ns()


def unchanged(observed: Data) -> bool:
    return all(plain(stamp(p)) == was for p, was in observed.items())


class Planner:
    """Walks the graph as Python runs it and lists the loads each import makes."""

    def __init__(
        self,
        modules: dict[str, Any],
        finder: ModuleFinder,
        torch: Data | None,
        distributions: list[Data],
        base: str | None,
        digest: str,
        seen: dict[str, Any],
    ) -> None:
        self.modules = modules
        self.finder = finder
        self.torch = torch
        self.distributions = distributions
        self.seen = seen  # every file and folder read: {path: plain stamp}
        self.loads: Planned = []
        self.paths: set[str] = set()
        self.visited: set[str] = set()
        self.reached_tops: list[str] = []
        self._facts = open_store(cache_path(base, "imports", digest))

    def run(self, roots: list[str]) -> None:
        for root in roots:
            self.visit(root)
        for name, info in self.modules.items():  # imported off the module-level path
            if info.get("kind") == "extension" and info.get("file"):
                self.add(info["file"], name, "import", name)
        for top in self.reached_tops:
            self.shipped(top)

    def add(
        self, path: str, module: str | None, origin: str, via: str, global_: bool = False
    ) -> None:
        real = os.path.realpath(path)
        if real in self.paths:
            return
        self.paths.add(real)
        self.loads.append(
            {"path": path, "module": module, "origin": origin, "via": via, "global": global_}
        )

    def visit(self, name: str) -> None:
        if name in self.visited:
            return
        self.visited.add(name)
        parent = name.rpartition(".")[0]
        if parent:
            self.visit(parent)
        info = self.modules.get(name) or (None if parent else self.unread(name))
        if info is None:
            return
        kind, file = info.get("kind"), info.get("file")
        if kind == "extension" and file:
            self.add(file, name, "import", name)
            return
        if kind != "source":
            return
        if not parent and name not in self.reached_tops:
            self.reached_tops.append(name)
        if name == "torch" and file:
            self.torch_preloads(file)
        edges = info.get("imports")
        if not edges:  # a module the graph read but did not follow: one level deep
            self.shallow(name, info)
            return
        for edge in sorted(edges, key=lambda e: e.get("line") or 0):
            if edge.get("context") not in RUNS:
                continue
            target = edge.get("module") or ""
            self.visit(target)
            for item in edge.get("names") or ():
                if target + "." + item in self.modules:
                    self.visit(target + "." + item)

    def unread(self, name: str) -> dict[str, Any] | None:
        """A top-level package the graph did not read, which a module it did not follow
        imports (torchvision imports torch): found, to be read one level deep."""
        found = self.finder.find(name)
        if found is None or found[0] != "source" or not found[1]:
            return None
        return {"kind": "source", "file": found[1]}

    def shallow(self, name: str, info: dict[str, Any]) -> None:
        """What a module's own module-level statements load: the extension modules they
        import, and the packages they import first (each read one level deep too)."""
        facts = self.facts(name, info)
        top = name.partition(".")[0]
        for edge in sorted(facts.get("imports") or [], key=lambda e: e.get("line") or 0):
            if edge.get("context") not in RUNS:
                continue
            target = edge.get("module") or ""
            if target.partition(".")[0] != top:
                self.visit(target.partition(".")[0])
            for candidate in [target, *(target + "." + n for n in edge.get("names") or ())]:
                found = self.finder.find(candidate)
                if found is not None and found[0] == "extension" and found[1]:
                    self.add(found[1], candidate, "import", name)

    def facts(self, name: str, info: dict[str, Any]) -> dict[str, Any]:
        """A module's parsed facts: from the graph's cache of them, else parsed here."""
        file = info.get("file") or ""
        self.seen.setdefault(file, plain(stamp(file)))
        key = f"{info.get('sha256')}:{name}:{int(file.endswith('__init__.py'))}"
        found = self._facts.get_alone(key)
        if isinstance(found, dict):
            return found
        from ..facts.files import read_text
        from ..graph.analyse import analyze_source

        try:
            return analyze_source(read_text(file), name, file.endswith("__init__.py"))
        except (OSError, SyntaxError, ValueError, RecursionError):
            return {}

    # -- torch

    def torch_preloads(self, init: str) -> None:
        """torch's own loads before torch._C: libtorch_global_deps.so RTLD_GLOBAL, then the
        nvidia libraries of its table (a CUDA build), each the first that its glob finds."""
        self.seen[init] = plain(stamp(init))
        table = torch_cuda_table(init)
        if table is None:
            return
        here = os.path.dirname(init)
        self.add(os.path.join(here, "lib", GLOBAL_DEPS), None, "preload", "torch", True)
        cuda = (self.torch or {}).get("cuda")
        if not cuda:
            return
        major = str(cuda).split(".")[0]
        for folder, pattern in table:
            found = self.cuda_lib(folder, pattern, major)
            if found:
                self.add(found, None, "preload", "torch")

    def cuda_lib(self, folder: str, pattern: str, major: str) -> str | None:
        """torch's _get_cuda_dep_paths: sys.path's nvidia/cuMAJOR/lib, then nvidia/FOLDER/lib."""
        import glob

        for entry in self.finder.paths:
            for lib in (
                os.path.join(entry, "nvidia", f"cu{major}", "lib"),
                os.path.join(entry, "nvidia", folder, "lib"),
            ):
                self.seen[lib] = plain(stamp(lib))
                hits = sorted(glob.glob(os.path.join(lib, pattern)))
                if hits:
                    return hits[0]
        return None

    # -- what a package ships

    def shipped(self, top: str) -> None:
        """Extension modules of a reached package that no import loads: judged, but not
        shown to load (its own code may open them, under a name envsync does not compute)."""
        for dist in self.distributions:
            if top not in (dist.get("top_level") or ()):
                continue
            for rel in record_objects(dist, self.seen):
                if rel.startswith(top + "/") and extension_name(rel, dist, self.seen):
                    self.add(os.path.join(dist["location"], rel), None, "shipped", top)


def torch_cuda_table(init: str) -> list[tuple[str, str]] | None:
    """(folder, glob) of `_preload_cuda_deps`' table in torch/__init__.py ([] without one);
    None when this torch has no `_load_global_deps`."""
    import ast

    from ..facts.files import read_text

    try:
        tree = ast.parse(read_text(init))
    except (OSError, SyntaxError, ValueError):
        return None
    defs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    if "_load_global_deps" not in defs:
        return None
    preload = defs.get("_preload_cuda_deps")
    for node in ast.walk(preload) if preload is not None else ():
        target = None
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            target, value = node.target.id, node.value
        elif isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            target, value = node.targets[0].id, node.value
        if target != "cuda_libs" or value is None:
            continue
        try:
            literal = ast.literal_eval(value)
        except ValueError:
            return []
        pairs = literal.items() if isinstance(literal, dict) else literal
        return [(str(a), str(b)) for a, b in pairs]
    return []


def record_objects(dist: Data, seen: dict[str, Any]) -> list[str]:
    """The shared objects and package markers a distribution's RECORD lists (relative)."""
    meta = dist.get("metadata_dir")
    if not meta or not meta.endswith(".dist-info"):
        return []
    record = os.path.join(dist["location"], meta, "RECORD")
    seen[record] = plain(stamp(record))
    from ..facts.files import read_text

    try:
        text = read_text(record)
    except OSError:
        return []
    out = []
    for line in text.splitlines():
        rel = line.lstrip('"').rsplit(",", 2)[0]
        name = rel.rpartition("/")[2]
        if ".so" in name or name == "__init__.py":
            out.append(rel)
    return out


def extension_name(rel: str, dist: Data, seen: dict[str, Any]) -> bool:
    """Whether a file of a package is named as an extension module of a regular package."""
    import importlib.machinery

    folder, _, name = rel.rpartition("/")
    suffix = next((s for s in importlib.machinery.EXTENSION_SUFFIXES if name.endswith(s)), None)
    if suffix is None or not name[: -len(suffix)].isidentifier():
        return False
    parts = folder.split("/")
    for i in range(1, len(parts) + 1):
        init = os.path.join(dist["location"], *parts[:i], "__init__.py")
        if init not in seen:
            seen[init] = plain(stamp(init))
        if not isinstance(seen[init], list):
            return False
    return True


# ---------------------------------------------------------------------------------------
# Judging them


def judge(
    planned: Planned,
    settings: Data,
    workdir: str | None,
    store: Data,
    files: ElfStore | None = None,
) -> list[Data]:
    """Each planned load's verdict as plain data (encode_load, C++ names demangled), the
    whole startup replayed (torch's fallback too: when libtorch_global_deps.so cannot find
    a CUDA library, torch preloads its table first). Warm: from the store, stats only."""
    loads = _judged(planned, list(range(len(planned))), settings, workdir, store, files)
    deps = [i for i, p in enumerate(planned) if p["origin"] == "preload"]
    if len(deps) > 1 and planned[deps[0]]["global"]:
        reasons = loads[deps[0]]["verdict"].get("reasons") or [{}]
        if reasons[0].get("reason") == "not-found":
            # torch's `except OSError`: the libraries of its table first, then the global
            # deps again (which then find them loaded, by soname)
            first, table = deps[0], set(deps[1:])
            sequence = [i for i in range(first) if i not in table] + deps[1:] + [first]
            sequence += [i for i in range(first + 1, len(planned)) if i not in table]
            again = _judged(planned, sequence, settings, workdir, store, files)
            by_index = dict(zip(sequence, again))
            loads = [by_index[i] for i in range(len(planned))]
    return loads


def _judged(
    planned: Planned,
    order: list[int],
    settings: Data,
    workdir: str | None,
    store: Data,
    files: ElfStore | None,
) -> list[Data]:
    """The loads of `planned` in `order`, judged in that order, as plain data."""
    from .cache import cached_loads, loader_settings

    verdicts = store.setdefault("verdicts", {})
    program = sys.executable
    run = loader_settings(
        settings.get("LD_LIBRARY_PATH"),
        settings.get("LD_PRELOAD"),
        bool(settings.get("LD_BIND_NOW")),
        workdir or os.path.expanduser("~"),
    )
    requests = [[planned[i]["path"], bool(planned[i]["global"]), True, None] for i in order]
    key, loads = cached_loads(program, requests, verdicts, run)
    if loads is not None:
        return loads
    from .cache import cached_judge
    from .demangle import with_demangled
    from .verdicts import Request, encode_load

    _, judged = cached_judge(
        program,
        [Request(path=r[0], global_=r[1]) for r in requests],
        verdicts,
        library_path=run["library_path"],
        preload=run["preload"],
        bind_now=run["bind_now"],
        cwd=run["cwd"],
        facts_store=store.setdefault("loader", {}),
        files=files,
    )
    plain_loads = [encode_load(with_demangled(load)) for load in judged]
    if key in verdicts:  # kept (not racy): with the C++ names, for the warm runs
        verdicts[key]["loads"] = plain_loads
    return plain_loads


# ---------------------------------------------------------------------------------------
# Which distribution owns each file


def owners_of(
    loads: list[Data], planned: Planned, distributions: list[Data], store: Data
) -> dict[str, str]:
    """{file: the distribution whose RECORD lists it} for every file of every load."""
    paths = {p["path"] for p in planned}
    for load in loads:
        paths.update(step[2] or "" for step in load["steps"])
        paths.update(r.get("provider") or "" for r in load["verdict"].get("reasons", ()))
    paths.discard("")
    records = store.setdefault("records", {})
    known: dict[str, set[str]] = {}  # this run's RECORD files, each read or stat-ed once
    out = {}
    for path in sorted(paths):
        owner = owner_of(os.path.normpath(path), distributions, records, known)
        if owner:
            out[path] = owner
    return out


def owner_of(
    path: str, distributions: list[Data], records: Data, known: dict[str, set[str]]
) -> str | None:
    for dist in distributions:
        location = dist.get("location") or ""
        if not location or not path.startswith(location.rstrip("/") + "/"):
            continue
        rel = path[len(location.rstrip("/")) + 1 :]
        top = rel.split("/")[0]
        tops = dist.get("top_level") or ()
        if top not in tops and top.split(".")[0] not in tops:
            continue  # numpy.libs/ is numpy's
        files = known.get(dist["name"])
        if files is None:
            files = known[dist["name"]] = record_files(dist, records)
        if rel in files:
            return str(dist["name"])
    return None


def record_files(dist: Data, records: Data) -> set[str]:
    """The shared objects a distribution's RECORD lists, kept by RECORD's stamp."""
    meta = dist.get("metadata_dir") or ""
    record = os.path.join(dist["location"], meta, "RECORD")
    now = stamp(record)
    known = records.get(record)
    if known is not None and isinstance(now, Stamp) and known[0] == now.plain():
        return set(known[1])
    found = [r for r in record_objects(dist, {}) if not r.endswith("__init__.py")]
    if isinstance(now, Stamp) and not racy(now.mtime_ns, stamp_now()):
        records[record] = [now.plain(), found]
    return set(found)


# ---------------------------------------------------------------------------------------
# As the snapshot holds them


def describe(planned: Data, load: Data, paths: list[str]) -> Data:
    """A load (encode_load's data) as the snapshot's NativeLoad."""
    verdict = dict(load["verdict"])
    if "reasons" in verdict:
        reasons = [dict(r) for r in verdict["reasons"]]
        for reason in reasons:
            reason["kind"] = reason.pop("reason")
        verdict["reasons"] = reasons
    return {
        "path": planned["path"],
        "key": site_key(planned["path"], paths),
        "module": planned["module"],
        "origin": planned["origin"],
        "via": planned["via"],
        "global_": bool(planned["global"]),
        "verdict": verdict,
        "steps": [
            {"needed_by": s[0], "name": s[1], "path": s[2], "how": s[3]} for s in load["steps"]
        ],
    }


def site_key(path: str, paths: list[str]) -> str:
    """A file as both hosts can name it: inside its sys.path entry, else its own path."""
    best = ""
    for entry in paths:
        entry = entry.rstrip("/")
        if entry and path.startswith(entry + "/") and len(entry) > len(best):
            best = entry
    return path[len(best) + 1 :] if best else path
