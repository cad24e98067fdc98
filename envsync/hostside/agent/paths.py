"""Where the agent may read and write: this environment's package directories and state.

The only places a plan's files may be are the environment's site directories and the
source trees of its editable installs; every path from a plan, an archive or a backup is
checked against them before anything is written. A distribution owns the files its RECORD
names inside the environment (never a folder, `./`, or a path outside), and its metadata
folder: that, and nothing a RECORD line could say besides, is what a change may touch.
"""

from __future__ import annotations

import json
import os
import re
import stat
import sys

from ..shared import StatePaths, normalize, temp_name
from .failure import refuse

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

STATE = StatePaths(sys.prefix)


def state_dir(path: str) -> str:
    """Make a folder of envsync's state (in the environment), as open as the environment
    itself is: whoever may change the environment may take its lock and read its backups."""
    try:
        mode = stat.S_IMODE(os.stat(STATE.prefix).st_mode) | 0o700
    except OSError:
        mode = 0o700
    if not os.path.isdir(path):
        os.makedirs(path, exist_ok=True)
        os.chmod(path, mode)
    return path


def state_file_mode() -> int:
    """The mode of envsync's state files: readable and writable as the environment is."""
    try:
        return (stat.S_IMODE(os.stat(STATE.prefix).st_mode) & 0o666) | 0o600
    except OSError:
        return 0o600


def open_log(path: str, truncate: bool = False, mode: int = 0o600) -> int:
    """A descriptor to append to (`truncate`: to rewrite) a log of envsync's own (a
    backup's journal and trace, a service's output): never through a link in its last
    part, never a FIFO, socket or device (OSError), as envsync opens its logs."""
    import errno

    flags = os.O_WRONLY | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | os.O_NONBLOCK
    fd = os.open(path, flags | (os.O_TRUNC if truncate else os.O_APPEND), mode)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(errno.EINVAL, "not a regular file", path)
    return fd


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


def metadata_name(meta: str) -> str | None:
    """The normalized `Name:` of a .dist-info folder's METADATA, or None."""
    try:
        fd = os.open(os.path.join(meta, "METADATA"), os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        head = os.read(fd, 4096).decode("utf-8", "replace")
    finally:
        os.close(fd)
    match = re.search(r"^Name:\s*(\S+)", head, re.MULTILINE)
    return normalize(match.group(1)) if match else None


def installations(name: str) -> list[tuple[str, str, list[str]]]:
    """Every (location, dist-info folder, [RECORD lines]) of `name` in the environment, the
    one that imports first first: a stale second .dist-info is its own, too."""
    want = normalize(name)
    found = []
    for location in site_dirs():
        try:
            entries = sorted(os.listdir(location))
        except OSError:
            continue
        for entry in entries:
            if entry.endswith(".dist-info") and metadata_name(os.path.join(location, entry)) == (
                want
            ):
                found.append(
                    (location, entry, record_files(os.path.join(location, entry, "RECORD")))
                )
    return found


def installed(name: str) -> tuple[str, str, list[str]] | None:
    """(location, dist-info dir name, [files relative to location]) of `name`, or None."""
    found = installations(name)
    return found[0] if found else None


def record_files(path: str) -> list[str]:
    """The paths a RECORD lists ([] when it cannot be read)."""
    import csv

    try:
        with open(path, newline="") as f:
            return [row[0] for row in csv.reader(f) if row and row[0]]
    except (OSError, ValueError, csv.Error):
        return []


def inside(root: str, rel: str) -> bool:
    full = os.path.realpath(os.path.join(root, rel))
    return full == os.path.realpath(root) or full.startswith(os.path.realpath(root) + os.sep)


def canonical(path: str) -> str:
    """`path` with its folder's symlinks resolved, its last part kept as it is: the place a
    write or a removal acts on (a symlink there is the link itself, never its target)."""
    path = os.path.normpath(path)
    return os.path.join(os.path.realpath(os.path.dirname(path)), os.path.basename(path))


def within(path: str, root: str) -> bool:
    """Is the canonical `path` `root` or below it (both canonical)?"""
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


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


def editable_sources() -> list[str]:
    """The source trees of the environment's editable installs (direct_url.json)."""
    out = []
    for location in site_dirs():
        for entry in os.listdir(location):
            if entry.endswith(".dist-info"):
                source = editable_source(os.path.join(location, entry))
                if source is not None:
                    out.append(source)
    return out


def package_roots() -> list[str]:
    """The environment's package directories, the only places a plan's files may be: its
    site directories and the source trees of its editable installs."""
    return [os.path.realpath(d) for d in site_dirs()] + editable_sources()


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


def in_environment(path: str) -> bool:
    """May a change touch this canonical path: in a package directory, or elsewhere in the
    environment's own folder (the scripts a RECORD lists in bin/), never envsync's state."""
    if "\0" in path or not os.path.isabs(path) or within(path, STATE.root):
        return False
    if within(path, STATE.prefix) and path != STATE.prefix:
        return True
    return any(within(path, root) and path != root for root in package_roots())


def dist_files(location: str, entry: str, record: list[str]) -> tuple[list[str], list[str]]:
    """The canonical paths a distribution owns (the files and links its RECORD names inside
    the environment, then everything in its metadata folder), and notes on the RECORD lines
    that name none: a folder (`./`, `pkg/`), a path outside, an unreadable line."""
    root = os.path.realpath(location)
    paths: list[str] = []
    notes: list[str] = []
    for rel in record:
        if not rel or "\0" in rel or rel.endswith(("/", "\\")):
            notes.append(f"{entry}/RECORD names {rel!r}, not a file: ignored")
            continue
        full = canonical(rel if os.path.isabs(rel) else os.path.join(root, rel))
        if full == root or not in_environment(full):
            notes.append(f"{entry}/RECORD names {rel!r}, outside the environment: ignored")
            continue
        if os.path.isdir(full) and not os.path.islink(full):
            notes.append(f"{entry}/RECORD names {rel!r}, a folder: ignored")
            continue
        paths.append(full)
    meta = canonical(os.path.join(root, entry))
    paths.append(meta)
    for dirpath, dirnames, names in os.walk(meta):
        paths += [os.path.join(dirpath, n) for n in names]
        # a link to a folder is the link itself: os.walk lists it and never enters it
        paths += [os.path.join(dirpath, d) for d in dirnames]
    return sorted(set(paths)), notes


def dist_paths(location: str, entry: str, files: list[str]) -> list[str]:
    """The files a distribution owns inside its own location (what a copy from the
    reference moves: never a script in bin/, which carries its own venv's path)."""
    root = os.path.realpath(location)
    return [
        p for p in dist_files(location, entry, files)[0] if within(p, root) and not os.path.isdir(p)
    ]


def write_json(path: str, data: Any, mode: int = 0o600) -> None:
    """A JSON file of envsync's own, replaced whole and flushed to disk."""
    tmp = temp_name(path)
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0)
    with os.fdopen(os.open(tmp, flags, mode), "w") as f:
        json.dump(data, f, indent=1, sort_keys=True)
        f.flush()
        os.fsync(f.fileno())
    os.chmod(tmp, mode)
    os.replace(tmp, path)
