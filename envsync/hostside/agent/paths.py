"""Where the agent may read and write: this environment's package directories and state.

The only places a plan's files may be are the environment's site directories and the
source trees of its editable installs; every path from a plan or an archive is checked
against them before anything is written.
"""

from __future__ import annotations

import json
import os
import re
import sys

from ..shared import StatePaths, normalize
from .failure import refuse

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

STATE = StatePaths(sys.prefix)


def site_dirs() -> list[str]:
    import site
    import sysconfig

    dirs: list[str] = []
    candidates = [sysconfig.get_path("purelib"), sysconfig.get_path("platlib")]
    candidates.extend(getattr(site, "getsitepackages", lambda: [])())
    for d in candidates:
        if d and os.path.isdir(d) and d not in dirs:
            dirs.append(d)
    return dirs


def installed(name: str) -> tuple[str, str, list[str]] | None:
    """(location, dist-info dir name, [files relative to location]) of `name`, or None."""
    want = normalize(name)
    for location in site_dirs():
        for entry in sorted(os.listdir(location)):
            if not entry.endswith(".dist-info"):
                continue
            meta = os.path.join(location, entry, "METADATA")
            try:
                with open(meta, "rb") as f:
                    head = f.read(4096).decode("utf-8", "replace")
            except OSError:
                continue
            match = re.search(r"^Name:\s*(\S+)", head, re.MULTILINE)
            if not match or normalize(match.group(1)) != want:
                continue
            return location, entry, record_files(os.path.join(location, entry, "RECORD"))
    return None


def record_files(path: str) -> list[str]:
    """The paths a RECORD lists ([] when it cannot be read)."""
    import csv

    try:
        with open(path, newline="") as f:
            return [row[0] for row in csv.reader(f) if row and row[0]]
    except OSError:
        return []


def inside(root: str, rel: str) -> bool:
    full = os.path.realpath(os.path.join(root, rel))
    return full == os.path.realpath(root) or full.startswith(os.path.realpath(root) + os.sep)


def editable_source(meta: str) -> str | None:
    """The source tree of an editable install (its direct_url.json), or None."""
    try:
        with open(os.path.join(meta, "direct_url.json")) as f:
            url: Any = json.load(f)
    except (OSError, ValueError):
        return None
    if not isinstance(url, dict) or not (url.get("dir_info") or {}).get("editable"):
        return None
    source = str(url.get("url") or "")
    if not source.startswith("file://"):
        return None
    from urllib.parse import unquote, urlparse

    path = os.path.realpath(unquote(urlparse(source).path))
    return path if path != "/" and os.path.isdir(path) else None


def package_roots() -> list[str]:
    """The environment's package directories, the only places a plan's files may be: its
    site directories and the source trees of its editable installs (direct_url.json)."""
    roots = [os.path.realpath(d) for d in site_dirs()]
    for location in site_dirs():
        for entry in os.listdir(location):
            if entry.endswith(".dist-info"):
                source = editable_source(os.path.join(location, entry))
                if source is not None:
                    roots.append(source)
    return roots


def package_root(root: object) -> str:
    """`root` if it is one of this environment's package directories; refused otherwise."""
    if root == "purelib":
        import sysconfig

        root = sysconfig.get_path("purelib")
    if not isinstance(root, str) or os.path.realpath(root) not in package_roots():
        refuse(root, "not a package directory of this environment")
    return root


def relative(root: str, rel: object) -> str:
    """A plan's or archive's relative path: no `..`, not absolute, no symlink out of root."""
    if (
        not isinstance(rel, str)
        or not rel
        or "\0" in rel
        or os.path.isabs(rel)
        or ".." in rel.replace("\\", "/").split("/")
        or not inside(root, rel)
        or os.path.realpath(os.path.join(root, rel)) == os.path.realpath(root)
    ):
        refuse(rel, f"outside {root}")
    return os.path.join(root, rel)


def in_package(path: object) -> bool:
    if not isinstance(path, str) or not os.path.isabs(path) or ".." in path.split("/"):
        return False
    return any(inside(root, os.path.relpath(path, root)) for root in package_roots())


def dist_paths(location: str, entry: str, files: list[str]) -> list[str]:
    """Every path (absolute) that belongs to an installed distribution under `location`."""
    out = []
    for rel in files:
        if inside(location, rel):
            out.append(os.path.normpath(os.path.join(location, rel)))
    meta = os.path.join(location, entry)
    for dirpath, _, names in os.walk(meta):
        out += [os.path.join(dirpath, n) for n in names]
    return sorted(set(out))
