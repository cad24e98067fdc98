"""Reading and hashing files on the host: text, metadata header blocks, sha256 on threads.

A file's hash is reused from the cache only while its size, mtime, ctime and inode are
unchanged (shared.Stamp), and only for files that were not modified in the last seconds
before it was cached (shared.racy).
"""

from __future__ import annotations

import hashlib
import os
import threading
import time

from .shared import racy, stamp_of

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Dict, List, Union

    # path -> [size, mtime_ns, ctime_ns, inode, sha256]
    HashCache = Dict[str, List[Union[int, str]]]

HASH_THREADS = min(4, os.cpu_count() or 1)


def read_text(path: str) -> str:
    with open(path, "rb") as f:
        return f.read().decode("utf-8", "replace")


def read_header_block(path: str) -> str:
    """A metadata file up to its first blank line: the long description after the
    headers is never read."""
    chunks = []
    with open(path, "rb") as f:
        while True:
            chunk = f.read(16384)
            if not chunk:
                break
            chunks.append(chunk)
            if b"\n\n" in chunk or b"\r\n\r\n" in chunk:
                break
    return b"".join(chunks).decode("utf-8", "replace")


def file_sha256(path: str) -> str:
    fd = os.open(path, os.O_RDONLY)
    try:
        digest = hashlib.sha256()
        while True:
            chunk = os.read(fd, 1 << 22)
            if not chunk:
                return digest.hexdigest()
            digest.update(chunk)
    finally:
        os.close(fd)


def is_bytecode(path: str) -> bool:
    return path.endswith((".pyc", ".pyo")) or "/__pycache__/" in "/" + path


def hash_files(paths: list[str], cache: HashCache | None = None) -> dict[str, str | OSError]:
    """{path: sha256 hex, or the OSError} for absolute paths, hashed on a few threads.

    hashlib releases the GIL on large buffers and file reads release it too, so threads
    overlap I/O and hashing without the cost of starting processes. `cache` is updated
    in place.
    """
    results: dict[str, str | OSError] = {}
    todo = paths
    if cache is not None:
        todo = []
        for path in paths:
            try:
                st = os.stat(path)
            except OSError as e:
                results[path] = e
                continue
            known = cache.get(path)
            stamp: list[int | str] = list(stamp_of(st).plain())
            if known is not None and len(known) == 5 and known[:4] == stamp:
                results[path] = str(known[4])
            else:
                todo.append(path)
                cache[path] = stamp  # completed with the hash below, if it is not racy

    def work(chunk: list[str]) -> None:
        for path in chunk:
            try:
                results[path] = file_sha256(path)
            except OSError as e:
                results[path] = e

    count = min(HASH_THREADS, max(1, len(todo) // 64))
    threads = [threading.Thread(target=work, args=(todo[i::count],)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if cache is not None:
        now = time.time_ns()
        for path in todo:
            made = cache.get(path)
            digest = results.get(path)
            if isinstance(digest, str) and made and not racy(int(made[1]), now):
                cache[path] = [*made[:4], digest]
            else:
                cache.pop(path, None)
    return results
