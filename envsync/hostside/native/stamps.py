"""A file's stat keys, as the host's hash cache keeps them: (size, mtime_ns, ctime_ns, inode)."""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass


@dataclass(frozen=True)
class Stamp:
    """Any write to a file changes one of these (ctime moves on every write)."""

    size: int
    mtime_ns: int
    ctime_ns: int
    inode: int

    def plain(self) -> list[int]:
        return [self.size, self.mtime_ns, self.ctime_ns, self.inode]


def stamp_of(st: os.stat_result) -> Stamp:
    return Stamp(st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)


def stamp(path: str) -> Stamp | int:
    """The file's stamp, or the errno stat gave (absent files: ENOENT whatever the errno)."""
    try:
        return stamp_of(os.stat(path))
    except OSError as e:
        return absent(e.errno or errno.ENOENT)


def absent(code: int) -> int:
    """Absent is one outcome whatever the errno: ld.so tries the next place either way."""
    return errno.ENOENT if code in (errno.ENOENT, errno.ENOTDIR) else code


def plain(value: Stamp | int) -> list[int] | int:
    """A stamp or an errno as JSON data."""
    return value.plain() if isinstance(value, Stamp) else absent(value)
