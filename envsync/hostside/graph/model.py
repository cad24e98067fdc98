"""The model the service serves: its config.json's architectures, and the model modules
that serve them, read on this host (nothing downloaded, nothing imported).

The model is the command's `--model-path` (or `--model`, or vLLM's `serve MODEL`): a
local folder, or a Hugging Face repository id looked up in the host's Hugging Face cache
(HF_HUB_CACHE, HF_HOME/hub, XDG_CACHE_HOME/huggingface/hub or ~/.cache/huggingface/hub,
the service's environment first). A registry maps an architecture to its module:
"entry-class" (every module of a package names the classes it serves in `EntryClass`:
SGLang's models), or "table:MODULE:NAME" (a literal dict of architecture -> (module,
class) in MODULE, splats of other literal dicts included: vLLM's `_VLLM_MODELS`).
"""

from __future__ import annotations

import json
import os

from ..facts.files import read_text
from .finder import ModuleFinder
from .roots import package_submodules

TYPE_CHECKING = False
if TYPE_CHECKING:
    import ast
    from typing import Any

_CACHE_VARIABLES = ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME")


def served_model(query: dict[str, Any] | None, finder: ModuleFinder) -> dict[str, Any] | None:
    """The served model's facts, or {"unavailable": why} when they cannot be read (None: the
    service's rule packs choose no module by the model)."""
    if not query:
        return None
    name = query.get("model")
    if not name:
        return {"unavailable": "the command names no model (--model-path, --model)"}
    config, why = _config(str(name), query.get("revision"), query.get("env") or {})
    if config is None:
        return {"unavailable": why}
    try:
        data = json.loads(read_text(config) or "")
    except (OSError, ValueError) as e:
        return {"unavailable": f"{config} is not readable JSON ({e.__class__.__name__})"}
    found = data.get("architectures") if isinstance(data, dict) else None
    if not isinstance(found, list) or not all(isinstance(a, str) for a in found) or not found:
        return {"unavailable": f"{config} names no architectures"}
    archs = list(dict.fromkeys(found))
    modules: dict[str, list[str]] = {}
    for registry in query.get("registries") or []:
        for arch, served in _resolve(registry, archs, finder).items():
            modules.setdefault(arch, [])
            modules[arch] += [m for m in served if m not in modules[arch]]
    return {"model": str(name), "config": config, "architectures": archs, "modules": modules}


def _env(env: dict[str, str], name: str) -> str | None:
    return env.get(name) or os.environ.get(name) or None


def hub_cache(env: dict[str, str]) -> str:
    """Where huggingface_hub keeps repositories for the service's environment."""
    for name in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if _env(env, name):
            return os.path.expanduser(str(_env(env, name)))
    home = _env(env, "HF_HOME")
    if home:
        return os.path.join(os.path.expanduser(home), "hub")
    xdg = _env(env, "XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(xdg, "huggingface", "hub")


def _config(name: str, revision: str | None, env: dict[str, str]) -> tuple[str | None, str]:
    """The config.json of a model folder or a cached repository, or why there is none."""
    path = os.path.expanduser(name)
    if os.path.isdir(path):
        config = os.path.join(path, "config.json")
        if os.path.isfile(config):
            return config, ""
        return None, f"the model folder {name} has no config.json on this host"
    parts = name.split("/")
    if name.startswith(("/", ".", "~")) or len(parts) != 2 or not all(parts):
        return None, f"the model path {name} does not exist on this host"
    cache = hub_cache(env)
    repo = os.path.join(cache, "models--" + "--".join(parts))
    snapshots = os.path.join(repo, "snapshots")
    try:
        commit: str | None = read_text(os.path.join(repo, "refs", revision or "main")).strip()
    except OSError:
        commit = None
    if revision and not commit and os.path.isdir(os.path.join(snapshots, revision)):
        commit = revision
    candidates = [commit] if commit else []
    try:
        entries = sorted(
            os.listdir(snapshots),
            key=lambda e: os.path.getmtime(os.path.join(snapshots, e)),
            reverse=True,
        )
    except OSError:
        entries = []
    candidates += [] if revision else [e for e in entries if e != commit]
    for entry in candidates:
        config = os.path.join(snapshots, entry, "config.json")
        if os.path.isfile(config):
            return config, ""
    where = "is not in" if not os.path.isdir(repo) else "has no config.json in"
    return None, f"{name} {where} the Hugging Face cache at {cache} (envsync downloads nothing)"


# ---------------------------------------------------------------------------------------
# Architectures to modules


def _resolve(
    registry: dict[str, Any], archs: list[str], finder: ModuleFinder
) -> dict[str, list[str]]:
    root = str(registry.get("root") or "")
    kind = str(registry.get("registry") or "")
    package = root[:-2] if root.endswith(".*") else root
    if kind == "entry-class":
        return _entry_classes(package, archs, finder)
    if kind.startswith("table:"):
        _, module, variable = kind.split(":", 2) if kind.count(":") >= 2 else (kind, "", "")
        return _table(module, variable, package, archs, finder)
    return {}


def _parse(file: str) -> ast.Module | None:
    import ast

    try:
        return ast.parse(read_text(file) or "")
    except (OSError, SyntaxError, ValueError, RecursionError):
        return None


def _entry_classes(package: str, archs: list[str], finder: ModuleFinder) -> dict[str, list[str]]:
    """Modules of `package` whose `EntryClass` names one of `archs` (only files that
    mention one are parsed)."""
    import ast

    found = finder.find(package)
    out: dict[str, list[str]] = {}
    for module in package_submodules(package, (found and found[2]) or []):
        hit = finder.find(module)
        if hit is None or hit[0] != "source" or not hit[1]:
            continue
        try:
            text = read_text(hit[1]) or ""
        except OSError:
            continue
        if "EntryClass" not in text or not any(a in text for a in archs):
            continue
        tree = _parse(hit[1])
        for node in tree.body if tree else []:
            if not isinstance(node, ast.Assign) or not any(
                isinstance(t, ast.Name) and t.id == "EntryClass" for t in node.targets
            ):
                continue
            values = (
                node.value.elts if isinstance(node.value, (ast.List, ast.Tuple)) else [node.value]
            )
            for value in values:
                name = value.id if isinstance(value, ast.Name) else None
                name = value.attr if isinstance(value, ast.Attribute) else name
                if name in archs:
                    out.setdefault(name, []).append(module)
    return out


def _table(
    module: str, variable: str, package: str, archs: list[str], finder: ModuleFinder
) -> dict[str, list[str]]:
    """arch -> module from a literal table of (module, class) pairs in `module`."""
    import ast

    hit = finder.find(module)
    tree = _parse(hit[1]) if hit and hit[0] == "source" and hit[1] else None
    if tree is None:
        return {}
    tables: dict[str, ast.expr] = {}
    for node in tree.body:
        target = node.target if isinstance(node, ast.AnnAssign) else None
        targets = node.targets if isinstance(node, ast.Assign) else [target] if target else []
        value = node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
        for t in targets:
            if isinstance(t, ast.Name) and value is not None:
                tables[t.id] = value
    entries: dict[str, str] = {}

    def read(name: str, seen: frozenset[str]) -> None:
        value = tables.get(name)
        if not isinstance(value, ast.Dict) or name in seen:
            return
        for key, item in zip(value.keys, value.values):
            if key is None and isinstance(item, ast.Name):
                read(item.id, seen | {name})  # {**_TEXT_GENERATION_MODELS, ...}
            elif (
                isinstance(key, ast.Constant)
                and isinstance(key.value, str)
                and isinstance(item, ast.Tuple)
                and item.elts
                and isinstance(item.elts[0], ast.Constant)
                and isinstance(item.elts[0].value, str)
            ):
                entries.setdefault(key.value, item.elts[0].value)

    read(variable, frozenset())
    return {a: [f"{package}.{entries[a]}"] for a in archs if a in entries}
