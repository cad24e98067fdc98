"""A startup graph's modules text in chunks, cut where the text itself says.

The modules of a graph are one JSON object, a module's facts each beginning with its
"kind". The text is cut after a module whose own text's crc32 is a multiple of
CHUNK_EVERY: a boundary moves only where a module changed, so a graph that changed in one
module shares every other chunk with the graph before it. Chunks are slices of the text:
joined, they are the text, byte for byte, and its digest holds. The host keeps its graphs
so (graphcache.py), and envsync what hosts sent (collect/wire.py). A chunk is known by
the digest of its text, named only by sealed files (shared.seal): it carries no seal of
its own, so a warm run hashes each chunk once.
"""

from __future__ import annotations

import os
import zlib

from ..shared import text_digest
from .store import read_file, remove, touch, write_file

CHUNK_EVERY = 16  # modules per chunk, on average
MODULE_START = b':{"kind":'  # every module's facts begin so (startup.py)


def cut(text: bytes) -> list[bytes]:
    """A graph's modules text cut into runs of modules, where the text says: after a
    module whose text's crc32 is a multiple of CHUNK_EVERY, so that a change of one module
    moves no boundary but its own."""
    out: list[bytes] = []
    start = 0  # of the chunk
    at = text.find(MODULE_START)  # the module being read ends where the next one starts
    while at >= 0:
        nxt = text.find(MODULE_START, at + 1)
        if nxt < 0:
            break
        cut = text.rfind(b',"', at, nxt)  # the next module's name begins after it
        if cut > at and zlib.crc32(text[at:cut]) % CHUNK_EVERY == 0:
            out.append(text[start : cut + 1])
            start = cut + 1
        at = nxt
    out.append(text[start:])
    return out


def chunk_path(folder: str, digest: str) -> str:
    return os.path.join(folder, digest[:2], digest[2:])


def save_chunks(folder: str, text: bytes) -> list[str]:
    """Keep the chunks of `text` in `folder` (those not kept yet); their digests, in order."""
    digests = []
    for chunk in cut(text):
        digest = text_digest(chunk)
        path = chunk_path(folder, digest)
        if not os.path.exists(path):
            write_file(path, chunk, by_name=True)  # its name is its seal
        digests.append(digest)
    return digests


def load_chunks(folder: str, digests: list[str]) -> bytes | None:
    """The text the chunks make, each checked against its digest (None: one is missing;
    every damaged one is removed, so the next save writes it). A chunk needs no seal of
    its own: only sealed files (a graph's index) name it, by the digest of its text."""
    parts: list[bytes] | None = []
    for digest in digests:
        path = chunk_path(folder, digest)
        try:
            data, used = read_file(path, by_name=True)  # checked by its digest below
        except OSError:
            return None
        if text_digest(data) != digest:
            remove(path)
            parts = None
        elif parts is not None:
            touch(path, used)  # used: the last to be pruned
            parts.append(data)
    return None if parts is None else b"".join(parts)
