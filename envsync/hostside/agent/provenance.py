"""Who wrote what appeared in the environment during an apply.

What this apply's installer and agent provably wrote (installer.py's `wrote.jsonl`, the
RECORDs of the plan's distributions) is undone by its rollback. Anything else that
appeared meanwhile (a `pip install six` by hand while the apply ran) is kept, and named:
a path another distribution's RECORD claims, or, when every installer of the apply was
traced, any path none of them wrote. An untraced installer (uv) leaves the old rule for
paths nobody claims: new in a folder the apply changes, so its own.
"""

from __future__ import annotations

import os

from ..shared import normalize
from .installer import written
from .paths import canonical, in_environment, within
from .record import created_since, key_of, path_of, roots
from .uninstall import owners, walk

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def bytecode(key: str) -> bool:
    return key.endswith((".pyc", ".pyo")) or "/__pycache__/" in "/" + key


def was_there(path: str, listed: dict[str, set[str]]) -> bool:
    """Was `path` there when the backup was made, as far as its listing of folders says
    (a path below no listed folder, or below one that was there but not listed: yes)?"""
    parent, name = os.path.split(path)
    while parent and parent not in listed:
        parent, name = os.path.split(parent)
        if parent == os.path.dirname(parent):
            return True
    return name in listed.get(parent, set())


def traced(where: str, manifest: dict[str, Any]) -> list[str]:
    """The paths in the environment the apply noted writing that are there now and were not
    at the backup (pip "makes" site-packages too, which was there), with everything under
    the folders among them."""
    wrote, _, _ = written(where)
    listed: dict[str, set[str]] = {}
    for key, names in (manifest.get("listing") or {}).items():
        folder = path_of(key) if not os.path.isabs(key) else canonical(key)
        if folder is not None:
            listed[folder] = set(names)
    listed.update({r: listed.get(r, set()) for r in roots()})
    out: set[str] = set()
    for path in wrote:
        full = canonical(path)
        if full in listed or not in_environment(full) or not os.path.lexists(full):
            continue
        if was_there(full, listed):
            continue
        if os.path.isdir(full) and not os.path.islink(full):
            out.update(walk(full))
        else:
            out.add(full)
    return sorted(out)


def appeared(where: str, manifest: dict[str, Any]) -> list[str]:
    """Every path that is new since the backup in the folders it listed, or that the apply
    noted writing (not in the backup's record)."""
    before = manifest["before"]
    paths = set(created_since(manifest.get("listing") or {})) | set(traced(where, manifest))
    return sorted(p for p in paths if key_of(p) not in before)


def attribute(
    where: str, manifest: dict[str, Any], paths: list[str], mine: set[str] | None = None
) -> tuple[list[str], list[str]]:
    """(this apply's, someone else's) among paths that are new since its backup; `mine`:
    the paths the plan's distributions' RECORDs name now (the apply's, whoever wrote them)."""
    wrote, moved, complete = written(where)
    wrote = {canonical(p) for p in wrote}
    folders = [canonical(p) for p in moved]
    plan = {normalize(str(d["name"])) for d in manifest["dists"]}
    others = owners(plan)
    ours, found = [], []
    for path in paths:
        inside = any(within(path, folder) for folder in folders)
        if inside or path in wrote or path in (mine or ()):
            ours.append(path)
        elif path in others:  # another distribution's (its bytecode too)
            found.append(path)
        elif bytecode(key_of(path)) or not complete:
            ours.append(path)
        else:
            found.append(path)
    return ours, found


def topmost(keys: list[str]) -> list[str]:
    """The keys without those below another of them (a folder stands for what it holds)."""
    kept = set(keys)

    def below(key: str) -> bool:
        parts = key.split("/")
        return any("/".join(parts[:n]) in kept for n in range(1, len(parts)))

    return sorted(k for k in kept if not below(k))
