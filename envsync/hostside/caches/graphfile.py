"""A startup graph's cache file: the stamps that keep it valid, and its lines.

A cache file holds five lines: the stamps of every source the walk read and every folder
it searched (a folder's with its listing), the graph's header (every field but the
modules, with their digest), the digests of the modules' chunks (chunks.py), each
module's parsed-facts key (store.py), which a patch of the graph starts from
(graphpatch.py), and the sha256 of each module's file, by path.

A graph file that another state of the environment replaces is kept beside it, as a past
state (`PATH.past-DIGEST`, the newest PAST_KEPT of them): a host that comes back to a
state it had (a rollback, a file put back, the version it had reinstalled) takes that
state's graph by its files' content, without walking (graphstates.py).
"""

from __future__ import annotations

import json
import os

from ..shared import Stamp, racy, stamp, text_digest
from .folder import save_text
from .store import read_file, remove

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, List, Optional

    Stamped = Optional[List[int]]


def file_stamp(path: str) -> Stamped:
    """What changes whenever a file or folder changes: a new entry changes its folder's
    mtime, a write its mtime and ctime, a replacement its inode (None: it does not exist)."""
    found = stamp(path)
    return found.plain() if isinstance(found, Stamp) else None


def listing(path: str) -> str | None:
    """A folder's entries as the import system sees them: every name but __pycache__,
    whose creation (a service's first start compiles its modules) changes the folder's
    mtime and nothing that an import finds (None: not a folder)."""
    try:
        names = sorted(n for n in os.listdir(path) if n != "__pycache__")
    except OSError:
        return None
    return text_digest("\0".join(names).encode("utf-8", "surrogateescape"))


def graph_stamps(graph: dict[str, Any], searched: set[str], extra: list[str]) -> list[Any]:
    """Stamps of every source read and every folder searched to build `graph` (a folder's
    with its listing: a folder whose stamp changed and whose listing did not is the same)."""
    paths = set(searched)
    paths.update(extra)
    files = set()
    for info in graph["modules"].values():
        if info.get("file"):
            files.add(info["file"])
    paths.update(files)
    out: list[Any] = []
    for p in sorted(paths):
        row: list[Any] = [p, file_stamp(p)]
        if p not in files and row[1] is not None:
            found = listing(p)
            if found is not None:
                row.append(found)
        out.append(row)
    return out


def holds(row: list[Any], now: int) -> bool:
    """Whether a stamp row still holds: the same stat, or a folder with the same listing
    (then the row takes the folder's new stat, unless it changed in the last seconds, so
    that the next run stats it again instead of listing it)."""
    found = file_stamp(row[0])
    if found == row[1]:
        return True
    if len(row) != 3 or row[1] is None or found is None or listing(row[0]) != row[2]:
        return False
    if not racy(found[1], now):
        row[1] = found
        REFRESHED.append(row[0])
    return True


REFRESHED: list[str] = []  # folders whose stamps still_valid took anew on this run


def save_graph(
    path: str,
    stamps: list[Any],
    header: dict[str, Any],
    index: list[str],
    keys: dict[str, str],
    modules: dict[str, Any],
) -> None:
    """Keep a graph's cache file (its header as a cached graph's: nothing parsed), the
    one it replaces kept as a past state."""
    read = int(header.get("parsed", 0)) + int(header.get("cached", 0))
    told = dict(header, parsed=0, cached=read)
    lines = [json.dumps(stamps, separators=(",", ":")), json.dumps(told, separators=(",", ":"))]
    lines += [json.dumps(index), json.dumps(keys, separators=(",", ":"))]
    lines.append(json.dumps(file_shas(modules), separators=(",", ":")))
    keep_past(path, lines[2])
    save_text(path, "\n".join(lines) + "\n")


def file_shas(modules: dict[str, Any]) -> dict[str, str]:
    """{file: sha256} of the graph's modules' sources, as the walk hashed them, and {file:
    ""} of its extension modules, which the walk never reads: their being there is all
    the graph holds of them (graphstates.py checks them so)."""
    out: dict[str, str] = {}
    for info in modules.values():
        if isinstance(info, dict):
            file, sha = info.get("file"), info.get("sha256")
            if isinstance(file, str) and isinstance(sha, str):
                out[file] = sha
            elif isinstance(file, str) and info.get("kind") == "extension":
                out[file] = ""
    return out


PAST_KEPT = 4  # past states kept per graph file
PAST = ".past-"


def past_states(path: str) -> list[str]:
    """The past states kept beside the graph file `path`, the newest first."""
    folder, name = os.path.split(path)
    found = []
    try:
        entries = list(os.scandir(folder or "."))
    except OSError:
        return []
    for entry in entries:
        if entry.name.startswith(name + PAST):
            try:
                found.append((entry.stat(follow_symlinks=False).st_mtime_ns, entry.path))
            except OSError:
                continue
    return [p for _, p in sorted(found, reverse=True)]


def keep_past(path: str, index: str) -> None:
    """Before the graph file `path` is replaced by the graph whose chunks' index is
    `index`, keep it as a past state (one of another graph only, of five lines), and
    remove the oldest past states beyond PAST_KEPT."""
    try:
        text = read_file(path)[0]
    except (OSError, ValueError):
        text = b""
    lines = text.split(b"\n")
    if len(lines) >= 5 and lines[2] != index.encode("utf-8"):
        past = path + PAST + text_digest(lines[2])
        try:
            os.replace(path, past)
            os.utime(past)  # the newest past state
        except OSError:
            pass
    for old in past_states(path)[PAST_KEPT:]:
        remove(old)
