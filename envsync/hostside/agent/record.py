"""The record of a change: what each path was (a file with its mode, size and sha256, a
link with its target, a folder, or absent) before an apply, and what the apply left.

Apply and rollback change paths only through these records. Paths are kept relative to
the environment's prefix when they are inside it, so that the same environment reached
through another mount (a container's view, a bind mount) reads the same record.
"""

from __future__ import annotations

import hashlib
import os
import stat

from ..shared import is_temp_name
from .paths import STATE, canonical, dist_files, in_environment, installations, package_roots

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Dict

    Entry = Dict[str, Any]  # {"kind": "file"|"symlink"|"dir"|"absent"|"special", ...}
    Record = Dict[str, Entry]  # key (see key_of) -> entry

BLOCK = 1 << 20


def key_of(path: str) -> str:
    """A canonical path as a record keeps it: relative to the prefix when inside it."""
    prefix = STATE.prefix
    if path.startswith(prefix + os.sep):
        return path[len(prefix) + 1 :]
    return path


def path_of(key: object) -> str | None:
    """The path a record's key names here; None when it is no path a change may touch."""
    if not isinstance(key, str) or not key or "\0" in key:
        return None
    if ".." in key.split("/") or key.startswith("./") or "//" in key:
        return None
    path = canonical(key if os.path.isabs(key) else os.path.join(STATE.prefix, key))
    return path if in_environment(path) else None


def open_regular(path: str) -> int:
    """A file descriptor for reading a regular file; never follows a last-part symlink and
    never opens a FIFO, socket or device for long (OSError for anything else)."""
    import errno

    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | os.O_NONBLOCK)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(errno.EINVAL, "not a regular file", path)
    return fd


def digest(path: str) -> str:
    fd = open_regular(path)
    try:
        h = hashlib.sha256()
        while True:
            block = os.read(fd, BLOCK)
            if not block:
                return h.hexdigest()
            h.update(block)
    finally:
        os.close(fd)


def describe(path: str, hashed: bool = True) -> Entry:
    """What `path` is now (a file's sha256 left out when not `hashed`)."""
    try:
        st = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return {"kind": "absent"}
    mode = stat.S_IMODE(st.st_mode)
    if stat.S_ISLNK(st.st_mode):
        return {"kind": "symlink", "target": os.readlink(path)}
    if stat.S_ISDIR(st.st_mode):
        return {"kind": "dir", "mode": mode}
    if stat.S_ISREG(st.st_mode):
        entry: Entry = {"kind": "file", "mode": mode, "size": st.st_size, "mtime": st.st_mtime}
        if hashed:
            entry["sha256"] = digest(path)
        return entry
    return {"kind": "special"}


def same(a: Entry | None, b: Entry | None) -> bool:
    """Do two entries describe the same thing (a file by mode and content)?"""
    if a is None or b is None or a.get("kind") != b.get("kind"):
        return False
    kind = a["kind"]
    if kind == "file":
        return a.get("sha256") == b.get("sha256") and a.get("mode") == b.get("mode")
    if kind == "symlink":
        return a.get("target") == b.get("target")
    if kind == "dir":
        return a.get("mode") == b.get("mode")
    return True


def roots() -> set[str]:
    return {os.path.realpath(r) for r in package_roots()} | {STATE.prefix}


def ancestors(path: str, tops: set[str]) -> list[str]:
    """The folders between `path` and the package directory (or prefix) that holds it."""
    out = []
    parent = os.path.dirname(path)
    while parent not in tops and parent != os.path.dirname(parent) and in_environment(parent):
        out.append(parent)
        parent = os.path.dirname(parent)
    return out


def dists_scope(names: list[str]) -> tuple[dict[str, list[str]], list[str]]:
    """{name: canonical paths it owns now, every installation of it}, and notes."""
    owned: dict[str, list[str]] = {}
    notes: list[str] = []
    for name in names:
        paths: list[str] = []
        for location, entry, record in installations(name):
            found, said = dist_files(location, entry, record)
            paths += found
            notes += said
        owned[name] = sorted(set(paths))
    return owned, notes


def close_over(paths: list[str]) -> list[str]:
    """The paths with every folder between them and their package directory."""
    tops = roots()
    out = set(paths)
    for path in paths:
        out.update(ancestors(path, tops))
    return sorted(out)


def take(paths: list[str], hashed: bool = True) -> Record:
    """The record of what each path is now."""
    return {key_of(p): describe(p, hashed) for p in paths}


def listed_dirs() -> list[str]:
    """The folders an installer adds entries to: the package directories and the scripts
    folder."""
    scripts = os.path.join(STATE.prefix, "bin")
    return sorted({os.path.realpath(r) for r in package_roots()} | {scripts})


def listing(folders: list[str] | None = None) -> dict[str, list[str]]:
    """{folder's key: the names in it now}, for `created_since` after the apply: the
    package directories and bin/, and `folders` (those of the plan's distributions: what
    an installer killed half-way wrote inside them is found too)."""
    out: dict[str, list[str]] = {}
    for folder in sorted(set(listed_dirs()) | set(folders or [])):
        try:
            out[key_of(folder)] = sorted(os.listdir(folder))
        except OSError:
            continue
    return out


def created_since(before: dict[str, list[str]]) -> list[str]:
    """The paths in the listed folders that were not there at `before` (`listing()`), with
    everything under them: what an installer that failed half-way wrote and no RECORD
    names yet (an apply holds the environment's lock, so nothing else wrote them)."""
    out: list[str] = []
    for key, names in before.items():
        folder = path_of(key) if not os.path.isabs(key) else canonical(key)
        if folder is None:
            continue
        try:
            now = os.listdir(folder)
        except OSError:
            continue
        for name in sorted(set(now) - set(names)):
            if is_temp_name(name):
                continue  # envsync's own half-written files: leftovers() sees to them
            path = os.path.join(folder, name)
            if not in_environment(path):
                continue
            out.append(path)
            if os.path.isdir(path) and not os.path.islink(path):
                for parent, dirs, files in os.walk(path):
                    out.extend(os.path.join(parent, n) for n in dirs + files)
    return out


def leftovers(directory: str) -> list[str]:
    """envsync's own temporary files in a folder (writes that were killed half-way)."""
    try:
        return [os.path.join(directory, n) for n in os.listdir(directory) if is_temp_name(n)]
    except OSError:
        return []
