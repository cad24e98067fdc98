"""A startup graph shared by the nodes of one image: walked on one, checked on the others.

The nodes of a fleet of one image have the same paths, the same files and the same
interpreter, so they walk the same graph: its key (graphcache.graph_key: the roots,
sys.path, the editable finders, the interpreter, the home folder) is the same on each. A
new host that walked its graph sends it as a pack of its own (share.py): the graph's text,
its facts keys, and what makes it valid on any host, not its stats (which are this host's):
every folder the walk searched with its listing, every file it read with its content's
sha256, every path it found absent. A node given a graph pack of its own key checks each
of those on its own disk (listings, hashes: it reads its files, as any cold probe does)
and takes the graph only where all of them hold; then it keeps it as its own, with its
own stats. Anything that does not hold is walked, as if no pack had come. A graph pack is
trusted as the host that sent it is, as every pack (collect/share.py): what it says of
files is checked against this host's, what it says of their imports is not parsed again.
envsync gives a graph pack only to the hosts of the interpreter's path that sent it.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat

from .files import keep_digest, known_digest, read_bytes
from .graphfile import file_stamp, listing

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Dict, List, Optional

    HashCache = Optional[Dict[str, List[Any]]]


def content_digest(path: str, hashes: HashCache) -> str | None:
    """A file's sha256 as the walk takes it (through a link; a regular file's kept by its
    stat), None where it cannot be read."""
    try:
        st = os.lstat(path)
        cache = hashes if stat.S_ISREG(st.st_mode) else None
        known = known_digest(path, st, cache)
        if known is not None:
            return known
        sha = hashlib.sha256(read_bytes(path)).hexdigest()
    except OSError:
        return None
    keep_digest(path, st, sha, cache)
    return sha


def pack_text(
    key: str,
    tag: str,
    stamps: list[Any],
    header: str,
    modules: bytes,
    keys: dict[str, str],
    hashes: HashCache,
) -> bytes | None:
    """The graph pack of a graph just walked (None: a file it read cannot be read now)."""
    shas: dict[str, str] = {}
    for info in json.loads(modules.decode("utf-8")).values():
        if isinstance(info, dict) and isinstance(info.get("sha256"), str):
            shas[str(info.get("file"))] = info["sha256"]
    rows: list[list[Any]] = []
    for row in stamps:
        path = row[0]
        if row[1] is None:
            rows.append(["-", path])
        elif len(row) == 3:
            rows.append(["d", path, row[2]])
        else:
            sha = shas.get(path) or content_digest(path, hashes)
            if sha is None:
                return None
            rows.append(["f", path, sha])
    entries = {"rows": rows, "header": header, "modules": modules.decode("utf-8"), "keys": keys}
    head = json.dumps(["graph", key], separators=(",", ":"))
    body = json.dumps({"tag": tag, "v": 1, "entries": entries}, separators=(",", ":"))
    return ('{"id":' + head + "," + body[1:]).encode("utf-8")


def holds_here(rows: Any, hashes: HashCache) -> bool:
    """Whether every row of a graph pack holds on this host's disk."""
    if not isinstance(rows, list):
        return False
    for row in rows:
        if not isinstance(row, list) or len(row) < 2 or not isinstance(row[1], str):
            return False
        kind, path = row[0], row[1]
        if kind == "-":
            if file_stamp(path) is not None:
                return False
        elif kind == "d":
            if len(row) != 3 or listing(path) != row[2]:
                return False
        elif kind != "f" or len(row) != 3 or content_digest(path, hashes) != row[2]:
            return False
    return True


def own_stamps(rows: list[Any]) -> list[Any]:
    """A taken graph's stamps, as this host's walk would have kept them."""
    out: list[Any] = []
    for row in rows:
        found = [row[1], file_stamp(row[1])]
        if row[0] == "d":
            found.append(row[2])
        out.append(found)
    return out
