"""git's own files read without running git: the index, loose objects, trees.

A repository's own configuration can make `git status` run programs (core.fsmonitor,
clean filters, hooks): envsync reads the files instead.
"""

from __future__ import annotations

import hashlib
import os

from .files import read_bytes

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import Any, Dict, List, Tuple

    IndexEntry = Dict[str, Any]
    Index = Tuple[List[IndexEntry], int, Dict[str, str]]


def read_index(path: str, prefixes: tuple[str, ...] = ("",)) -> Index:
    """The entries of a git index (versions 2 to 4) whose paths start with one of
    `prefixes`, its object id width, and its cached trees ({folder: tree id})."""
    import struct

    with open(path, "rb") as f:
        data = f.read()
    if data[:4] != b"DIRC":
        raise ValueError("not a git index")
    version, count = struct.unpack(">II", data[4:12])
    if version not in (2, 3, 4):
        raise ValueError(f"index version {version}")
    # SHA-256 repositories: the index ends with a 32-byte checksum instead of 20.
    width = 32 if len(data) > 44 and hashlib.sha256(data[:-32]).digest() == data[-32:] else 20
    wanted = tuple(p.encode("utf-8", "surrogateescape") for p in prefixes)
    entries = []
    pos = 12
    previous = b""
    for _ in range(count):
        start = pos
        (flags,) = struct.unpack(">H", data[pos + 40 + width : pos + 42 + width])
        pos += 42 + width
        extended = 0
        if flags & 0x4000 and version >= 3:
            (extended,) = struct.unpack(">H", data[pos : pos + 2])
            pos += 2
        if version == 4:
            strip, pos = varint(data, pos)
            end = data.index(b"\0", pos)
            name = previous[: len(previous) - strip] + data[pos:end]
            pos = end + 1
        else:
            end = data.index(b"\0", pos)
            name = data[pos:end]
            pos = start + ((end - start) // 8 + 1) * 8
        previous = name
        if not name.startswith(wanted):
            continue
        fields = struct.unpack(">10I", data[start : start + 40])
        entries.append(
            {
                "path": name.decode("utf-8", "surrogateescape"),
                "sha": data[start + 40 : start + 40 + width].hex(),
                "mode": fields[6],
                "size": fields[9],
                "mtime": (fields[2], fields[3]),
                "ino": fields[5],
                "stage": (flags >> 12) & 3,
                "assume": bool(flags & 0x8000),
                "skip": bool(extended & 0x4000),
            }
        )
    trees: dict[str, str] = {}
    while pos + 8 <= len(data) - width:
        signature = data[pos : pos + 4]
        (size,) = struct.unpack(">I", data[pos + 4 : pos + 8])
        if signature == b"TREE":
            cached_trees(data[pos + 8 : pos + 8 + size], 0, "", width, trees)
        pos += 8 + size
    return entries, width, trees


def cached_trees(data: bytes, pos: int, prefix: str, width: int, out: dict[str, str]) -> int:
    """The index's cache-tree extension: tree ids of folders whose entries are unchanged
    since git last wrote a tree (pre-order: each node, then its subtrees)."""
    nul = data.index(b"\0", pos)
    path = prefix + data[pos:nul].decode("utf-8", "surrogateescape")
    newline = data.index(b"\n", nul)
    count, subtrees = data[nul + 1 : newline].split(b" ")
    pos = newline + 1
    if int(count) >= 0:
        out[path] = data[pos : pos + width].hex()
        pos += width
    for _ in range(int(subtrees)):
        pos = cached_trees(data, pos, path + "/" if path else "", width, out)
    return pos


def varint(data: bytes, pos: int) -> tuple[int, int]:
    """git's offset varint (index v4 path compression)."""
    byte = data[pos]
    pos += 1
    value = byte & 127
    while byte & 128:
        byte = data[pos]
        pos += 1
        value = ((value + 1) << 7) | (byte & 127)
    return value, pos


def blob_id(path: str, mode: int, width: int) -> str:
    """The object id git gives a working-tree file: hash of `blob <len>\\0<content>`."""
    if mode & 0o170000 == 0o120000:
        data = os.readlink(path).encode("utf-8", "surrogateescape")
    else:
        data = read_bytes(path)
    digest = hashlib.sha256() if width == 32 else hashlib.sha1()
    digest.update(b"blob %d\0" % len(data))
    digest.update(data)
    return digest.hexdigest()


def loose_object(common: str, sha: str) -> tuple[bytes, bytes]:
    import zlib

    path = os.path.join(common, "objects", sha[:2], sha[2:])
    with open(path, "rb") as f:
        data = zlib.decompress(f.read())
    head, _, body = data.partition(b"\0")
    return head.split(b" ")[0], body


def tree_entries(common: str, oid: str, width: int) -> Iterator[tuple[bytes, str, str]]:
    """(mode, name, object id) of a loose tree object."""
    kind, body = loose_object(common, oid)
    if kind != b"tree":
        raise ValueError(f"{oid} is not a tree")
    pos = 0
    while pos < len(body):
        space = body.index(b" ", pos)
        nul = body.index(b"\0", space)
        yield (
            body[pos:space],
            body[space + 1 : nul].decode("utf-8", "surrogateescape"),
            body[nul + 1 : nul + 1 + width].hex(),
        )
        pos = nul + 1 + width


def subtree(common: str, root: str, folder: str, width: int) -> str | None:
    """The tree id of `folder` (a/b/c) under the tree `root` (None: it has none)."""
    oid = root
    for part in folder.split("/"):
        found = [o for _, n, o in tree_entries(common, oid, width) if n == part]
        if not found:
            return None
        oid = found[0]
    return oid


def head_files(
    common: str, commit: str, prefixes: list[str], width: int, cached: dict[str, str]
) -> dict[str, str] | str | None:
    """{path: object id} of HEAD's files under `prefixes`, read from loose objects; "same"
    when the index's cached trees of the prefixes are HEAD's (nothing staged there); None
    when an object is packed (reading packs is not worth it: the index answers the rest)."""
    import zlib

    try:
        kind, body = loose_object(common, commit)
        if kind != b"commit":
            return None
        root = body.split(b"\n", 1)[0].split(b" ")[1].decode()
        folders = [p.rstrip("/") for p in prefixes if p.endswith("/")]
        if folders and len(folders) == len(prefixes):
            same = True
            for folder in folders:
                oid = subtree(common, root, folder, width)
                same = same and oid is not None and cached.get(folder) == oid
            if same:
                return "same"
        out = {}
        todo = [("", root)]
        while todo:
            base, sha = todo.pop()
            for mode, entry, child in tree_entries(common, sha, width):
                name = base + entry
                if mode == b"40000":
                    if any(p.startswith(name + "/") or name.startswith(p) for p in prefixes):
                        todo.append((name + "/", child))
                elif mode != b"160000" and any(name.startswith(p) for p in prefixes):
                    out[name] = child
        return out
    except (OSError, ValueError, IndexError, zlib.error):
        return None
