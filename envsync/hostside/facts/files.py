"""Reading and hashing files on the host: text, metadata header blocks, sha256 on threads.

A file's hash is reused from the cache only while its size, mtime, ctime and inode are
unchanged (shared.Stamp: ctime moves on every write and cannot be set back), and only for
files that were not modified in the last seconds before it was cached (shared.racy). A
watched file that is a symlink is recorded as the link it is (`symlink:TARGET`), never
followed out of its package; a FIFO, socket or device is never opened (a FIFO would block
the probe): it is recorded as skipped, with what it is.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
import threading
import time

from ..shared import LINK_VALUE, SKIPPED_VALUE, racy, stamp_of

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Dict, List, Optional, Tuple, Union

    # path -> [size, mtime_ns, ctime_ns, inode, sha256]
    HashCache = Dict[str, List[Union[int, str]]]
    Records = List[Tuple[str, Optional[str]]]  # (path, sha256 hex or None) of RECORD rows

HASH_THREADS = min(4, os.cpu_count() or 1)


def open_regular(path: str, follow: bool = True) -> int:
    """A descriptor to read a regular file; a FIFO, socket or device is refused at once
    (opened without blocking, then told by fstat), a last-part link too unless `follow`."""
    flags = os.O_RDONLY | os.O_NONBLOCK | (0 if follow else getattr(os, "O_NOFOLLOW", 0))
    fd = os.open(path, flags)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(errno.EINVAL, "not a regular file", path)
    return fd


# The most of one module the host side reads and parses. A syntax tree costs at most about
# 1 KB of memory per mark of syntax (punctuation, operators, line ends: a 4 MB literal
# `[1,1,...]` takes 2 GB); marks inside strings cost nothing, which the count cannot tell
# (a 4 MB policy module of one string has 528,000 marks and parses in 27 MB). The torch
# stack's largest module, 1.4 MB, has 156,000 marks and takes 118 MB. Past either bound a
# module is not read: an error of its own (a door: never benign), its path and size said;
# so one module costs a parse at most about 1 GB.
MODULE_BOUND = 16 << 20  # bytes
TOKEN_BOUND = 1_000_000  # marks of syntax
_MARKS = b",()[]{}=:.;\n+-*/%&|^~<>@"
_WORDS = (b" and ", b" or ", b" if ", b" else ", b" in ", b" is ", b"not ")  # operators too


def marks(data: bytes) -> int:
    """The marks of syntax in a source (what its syntax tree's size follows)."""
    return len(data) - len(data.translate(None, _MARKS)) + sum(data.count(w) for w in _WORDS)


class TooLarge(OSError):
    """A file past the bound its reader holds to."""

    def __init__(self, path: str, size: int, bound: int) -> None:
        super().__init__(
            errno.EFBIG, f"{size} bytes, over the {bound >> 20} MiB bound for one module", path
        )


def read_bytes(path: str, bound: int | None = None) -> bytes:
    """A regular file's content (OSError for a FIFO, socket or device: never blocks);
    `bound`: TooLarge for a file longer than that, read no further."""
    with os.fdopen(open_regular(path), "rb") as f:
        if bound is None:
            return f.read()
        size = os.fstat(f.fileno()).st_size
        data = f.read(bound + 1) if size <= bound else b""
        if size > bound or len(data) > bound:  # grown since: still past it
            raise TooLarge(path, max(size, len(data)), bound)
        return data


def stream_sha256(path: str) -> str:
    """The sha256 of a regular file read in pieces (through links), never held whole."""
    with os.fdopen(open_regular(path), "rb") as f:
        digest = hashlib.sha256()
        for chunk in iter(lambda: f.read(1 << 22), b""):
            digest.update(chunk)
        return digest.hexdigest()


def read_text(path: str) -> str:
    return read_bytes(path).decode("utf-8", "replace")


def special_kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISDIR(mode):
        return "a folder"
    return "not a regular file"


def not_regular(path: str, st: os.stat_result) -> str | None:
    """The value a watched path that is no regular file is recorded as (None: it is one)."""
    if stat.S_ISLNK(st.st_mode):
        try:
            return LINK_VALUE + os.readlink(path)
        except OSError as e:
            return f"unreadable: {e.strerror}"
    if not stat.S_ISREG(st.st_mode):
        return SKIPPED_VALUE + special_kind(st.st_mode)
    return None


def read_header_block(path: str) -> str:
    """A metadata file up to its first blank line: the long description after the
    headers is never read."""
    chunks = []
    with os.fdopen(open_regular(path), "rb") as f:
        while True:
            chunk = f.read(16384)
            if not chunk:
                break
            chunks.append(chunk)
            if b"\n\n" in chunk or b"\r\n\r\n" in chunk:
                break
    return b"".join(chunks).decode("utf-8", "replace")


def file_sha256(path: str) -> str:
    """The sha256 of a regular file (never through a last-part link, never a FIFO)."""
    fd = open_regular(path, follow=False)
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


def known_digest(path: str, st: os.stat_result, cache: HashCache | None) -> str | None:
    """The sha256 `cache` holds for `path` while its stat is the one it was kept with."""
    known = cache.get(path) if cache is not None else None
    if known is not None and len(known) == 5 and known[:4] == list(stamp_of(st).plain()):
        return str(known[4])
    return None


def keep_digest(path: str, st: os.stat_result, digest: str, cache: HashCache | None) -> None:
    """Keep the sha256 of `path` as of its stat `st` (taken before it was read), unless the
    file changed in the last seconds (git's racy rule: its stat may not tell a change)."""
    if cache is None:
        return
    if racy(st.st_mtime_ns, time.time_ns()):
        cache.pop(path, None)
    else:
        cache[path] = [*stamp_of(st).plain(), digest]


def hash_files(paths: list[str], cache: HashCache | None = None) -> dict[str, str | OSError]:
    """{path: sha256 hex, `symlink:TARGET`, `skipped: a FIFO` ..., or the OSError} for
    absolute paths, hashed on a few threads.

    hashlib releases the GIL on large buffers and file reads release it too, so threads
    overlap I/O and hashing without the cost of starting processes. `cache` is updated
    in place.
    """
    results: dict[str, str | OSError] = {}
    todo = []
    stats: dict[str, os.stat_result] = {}  # as each was before it was hashed
    for path in paths:
        try:
            st = os.lstat(path)
        except OSError as e:
            results[path] = e
            continue
        other = not_regular(path, st)
        if other is not None:
            results[path] = other
            continue
        known = known_digest(path, st, cache)
        if known is not None:
            results[path] = known
            continue
        todo.append(path)
        stats[path] = st

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
    for path in todo:
        digest = results.get(path)
        if isinstance(digest, str):
            keep_digest(path, stats[path], digest, cache)
        elif cache is not None:
            cache.pop(path, None)
    return results


def source_text(data: bytes) -> str:
    """A source file's text as Python decodes it: a UTF-8 BOM dropped, a coding cookie
    in the first two lines obeyed (PEP 263), UTF-8 otherwise."""
    if data.startswith(b"\xef\xbb\xbf"):
        return data[3:].decode("utf-8", "replace")
    head = data[:400].split(b"\n", 2)[:2]
    if any(b"coding" in line and line.lstrip().startswith(b"#") for line in head):
        import io
        import tokenize

        try:
            encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
            return data.decode(encoding, "replace")
        except (SyntaxError, LookupError):
            pass
    return data.decode("utf-8", "replace")
