"""Editable and development installs: a package whose files live in a source tree.

pip and uv install a project in editable mode through its build backend (PEP 660):
setuptools writes either a `.pth` file naming the source folder, or a `.pth` that imports
an `__editable___*_finder.py` whose MAPPING sends each top-level package to its folder (a
meta path finder appended after the path finder). Older installs (`setup.py develop`,
`.egg-link`) and hand-made `.pth` files put the source folder on sys.path. In every shape
the package's files are not in RECORD: they are found where the interpreter would import
them from, and keyed by their path inside the import root (`sglang/srt/server_args.py`),
as a wheel's RECORD keys them.
"""

from __future__ import annotations

import os

from ..shared import not_package_dir, package_file_name
from .files import hash_files, read_text

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from ..graph.finder import ModuleFinder
    from .files import HashCache, Records


def editable_mapping(paths: list[str]) -> dict[str, str]:
    """{top-level import name: folder or file} from setuptools' editable finders on sys.path.

    The finders are read with ast, not imported: the probe follows them as they would
    answer, without running them a second time.
    """
    mapping: dict[str, str] = {}
    for location in paths:
        try:
            entries = sorted(os.listdir(location))
        except OSError:
            continue
        for entry in entries:
            if entry.startswith("__editable__") and entry.endswith("_finder.py"):
                for key, path in finder_mapping(os.path.join(location, entry)).items():
                    mapping.setdefault(key, path)
    return mapping


def finder_mapping(path: str) -> dict[str, str]:
    """The MAPPING of one editable finder file ({} when it has none it can read)."""
    import ast

    from ..graph.astutil import assignments

    try:
        tree = ast.parse(read_text(path))
    except (OSError, SyntaxError, ValueError):
        return {}
    mapping: dict[str, str] = {}
    for target, value in assignments(tree):
        if target != "MAPPING":
            continue
        try:
            found = ast.literal_eval(value)
        except ValueError:
            continue
        if isinstance(found, dict):
            for key, where in found.items():
                if isinstance(key, str) and isinstance(where, str):
                    mapping.setdefault(key, where)
    return mapping


def walk_package(name: str, path: str) -> dict[str, str]:
    """{key: absolute path} of the package's files under `path`, keyed `name/...`."""
    if not os.path.isdir(path):
        return {name + os.path.splitext(path)[1]: path}
    out = {}
    prefix = len(path.rstrip("/")) + 1
    for dirpath, dirnames, filenames in os.walk(path):
        # A link to a folder is a file of the package (the link), never entered.
        links = [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]
        dirnames[:] = sorted(d for d in dirnames if not not_package_dir(d) and d not in links)
        rel = dirpath[prefix:]
        base = name + "/" + (rel + "/" if rel else "")
        for fname in filenames + links:
            if package_file_name(fname):  # folders that are no part of it are pruned above
                out[base + fname] = dirpath + "/" + fname
    return out


def install_mode(dist: dict[str, Any], via_finder: bool) -> str:
    if via_finder:
        return "editable-finder"
    if (dist.get("direct_url") or {}).get("dir_info", {}).get("editable"):
        return "editable-pth"
    if dist["metadata_dir"].endswith(".egg-info"):
        return "develop"
    return "sys.path"


def source_tree(
    dist: dict[str, Any], records: Records, finder: ModuleFinder
) -> dict[str, Any] | None:
    """Where the interpreter imports a distribution's packages from, when RECORD does
    not install them (an editable or development install); None otherwise."""
    listed = {p.partition("/")[0] for p, _ in records}
    names = list(dist["top_level"]) or [dist["name"].replace("-", "_")]
    packages = {}
    via_finder = False
    for name in names:
        if name in listed or name + ".py" in listed:
            return None  # installed from a wheel: RECORD knows its files
        found = finder.find(name)
        if found is None or found[0] not in ("source", "namespace", "extension"):
            continue
        _, origin, locations = found
        if locations:
            packages[name] = locations[0]
        elif origin:
            packages[name] = origin
        via_finder = via_finder or name in finder.mapped
    if not packages:
        return None
    return {"mode": install_mode(dist, via_finder), "packages": packages}


def source_files(
    dist: dict[str, Any], tree: dict[str, Any], cache: HashCache | None = None
) -> None:
    """Hash the source tree's files and read its git state into the distribution."""
    from .git import git_state

    paths: dict[str, str] = {}
    for name, path in sorted(tree["packages"].items()):
        paths.update(walk_package(name, path))
    hashes = hash_files(sorted(paths.values()), cache)
    files = {}
    for key, full in paths.items():
        digest = hashes[full]
        files[key] = digest if isinstance(digest, str) else f"unreadable: {digest.strerror}"
    dist["files"] = dict(sorted(files.items()))
    git = git_state(tree["packages"], set(files))
    tree["git"] = git
    dist["source"] = tree
    changes = git if "commit" in git else {}
    dist["patched"] = changes.get("modified", [])
    dist["added"] = sorted(changes.get("added", []) + changes.get("untracked", []))
    dist["missing"] = changes.get("deleted", [])
