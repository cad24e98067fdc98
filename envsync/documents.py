"""The documents a user names (inventory, rule packs, locks, snapshots, plans): read and written.

Each failure to read is one line naming the file, raised as the calling stage's own error;
every output is written atomically (a temporary file, then os.replace).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import stat
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import IO, Any

from envsync.errors import InputError, OutputError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

TOMLDecodeError = tomllib.TOMLDecodeError
# A document larger than this is refused before it is parsed: a snapshot of an environment
# with every watched file hashed is a few MB; a document nested deeper than the parser's
# recursion allows is refused as such, not with a RecursionError.
MAX_DOCUMENT_BYTES = 64 << 20


def too_large(size: int, origin: str, what: str) -> str | None:
    """The reason a document of `size` bytes is refused, or None."""
    if size <= MAX_DOCUMENT_BYTES:
        return None
    return (
        f"{origin}: {what} is larger than {MAX_DOCUMENT_BYTES >> 20} MB "
        f"({size >> 20} MB); refusing to read it"
    )


NESTED = "nested too deeply to be an envsync document"


def not_found(path: Path, what: str, origin: str | None = None) -> str:
    """The line for a file that is not there: its absolute path and, for a relative one,
    the folder it was relative to (`origin`: where the name came from, e.g.
    ENVSYNC_INVENTORY)."""
    if path.is_absolute():
        return f"{path}: {what} not found"
    try:
        cwd = os.getcwd()
    except OSError:  # the working folder is gone: the name is all there is
        return f"{path}: {what} not found (relative to a folder that no longer exists)"
    named = f"{origin}={path}" if origin else str(path)
    return f"{os.path.join(cwd, path)}: {what} not found ({named}, relative to {cwd})"


def open_plain(path: str | os.PathLike[str], flags: int = os.O_RDONLY, mode: int = 0o600) -> int:
    """A descriptor of the regular file `path`, opened without following a link in its
    last part and without blocking on a FIFO (`O_NOFOLLOW | O_NONBLOCK`, then fstat): the
    way envsync opens what it reads from its state and cache folders and the logs it
    appends to. OSError, with a strerror that says why, for a link, a FIFO, a device or a
    folder; the descriptor is blocking again when returned."""
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, mode)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise OSError(e.errno, "a symbolic link, not a file (not followed)") from e
        if e.errno == errno.ENXIO:  # a FIFO opened to write with no reader
            raise OSError(e.errno, "a FIFO or a device, not a file") from e
        raise
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "a FIFO, a device or a folder, not a file")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def private(path: Path) -> bool:
    """Whether a folder of envsync's (a cache, its state) may be used: absent (envsync makes
    it 0700), or a folder, not a link, of this user's that no one else may write to: the
    host side's own test (hostside/boot.py), which a host's cache folder passes too."""
    from envsync.hostside.boot import private as host_private

    return not os.path.lexists(path) or host_private(str(path))


def read_plain(path: Path, limit: int = MAX_DOCUMENT_BYTES) -> bytes:
    """The bytes of a file of envsync's own folders (open_plain), up to `limit` (OSError
    past it)."""
    with os.fdopen(open_plain(path), "rb") as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise OSError(errno.EFBIG, f"larger than {limit} bytes")
    return data


def read_text(path: Path, error: type[InputError], what: str, *, plain: bool = False) -> str:
    """A document's text; `plain`: a file of envsync's own folders (open_plain: no link
    followed, no FIFO waited on)."""
    try:
        with os.fdopen(open_plain(path), "rb") if plain else path.open("rb") as f:
            size = os.fstat(f.fileno()).st_size
            why = too_large(size, str(path), what)
            if why:
                raise error(why)
            # Its size and one byte more, not the bound: read(n) allocates n bytes first (a
            # 64 MB buffer for every document); a file grown since is read up to the bound.
            data = f.read(size + 1)
            if len(data) > size:
                data += f.read(MAX_DOCUMENT_BYTES + 1 - len(data))
            why = too_large(len(data), str(path), what)
            if why:
                raise error(why)
            return data.decode("utf-8")
    except FileNotFoundError as e:
        raise error(not_found(path, what)) from e
    except (OSError, UnicodeDecodeError) as e:
        raise error(f"{path}: cannot read {what}: {e}") from e


def loads_toml(text: str, origin: str, error: type[InputError], invalid: str) -> dict[str, Any]:
    """`invalid` begins the message: "invalid TOML", "corrupt lock file", ..."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise error(f"{origin}: {invalid}: {e}") from e
    except RecursionError as e:
        raise error(f"{origin}: {invalid}: {NESTED}") from e


def read_toml(path: Path, error: type[InputError], what: str, invalid: str) -> dict[str, Any]:
    return loads_toml(read_text(path, error, what), str(path), error, invalid)


def read_json_object(
    path: Path, error: type[InputError], what: str, *, plain: bool = False
) -> dict[str, Any]:
    """A JSON document that must be an object (a snapshot, a plan; `plain`: read_text's)."""
    text = read_text(path, error, what, plain=plain)
    try:
        data = json.loads(text)
    except ValueError as e:
        raise error(f"{path}: not valid JSON: {e}") from e
    except RecursionError as e:
        raise error(f"{path}: not an envsync {what}: {NESTED}") from e
    if not isinstance(data, dict):
        raise error(f"{path}: not an envsync {what} (not a JSON object)")
    return data


# ---------------------------------------------------------------------------------------
# Writing: all or nothing


def streamed(path: Path) -> bool:
    """Is `path` a stream to write into as it is, never a file to replace: a device, a FIFO,
    a socket, or a name under /dev or /proc (`/dev/stdout`, `/proc/self/fd/1`), even
    through a link (replacing `/dev/stdout` would swap the link for a file)?"""
    text = os.path.abspath(str(path))
    if text.startswith(("/dev/", "/proc/")):
        return True
    try:
        if path.is_symlink() and os.path.abspath(
            os.path.join(os.path.dirname(text), os.readlink(text))
        ).startswith(("/dev/", "/proc/")):
            return True
        return path.exists() and not path.is_file() and not path.is_dir()
    except OSError:
        return False


def check_writable(path: Path) -> None:
    """Fail before a long collection when `path` can never be written."""
    if streamed(path):
        if path.exists() and not os.access(path, os.W_OK):
            raise OutputError(f"{path}: cannot write: Permission denied")
        return
    parent = path.parent if str(path.parent) else Path(".")
    if path.is_dir():
        raise OutputError(f"{path}: cannot write: Is a directory")
    if not parent.is_dir():
        why = "Not a directory" if parent.exists() else "No such file or directory"
        raise OutputError(f"{path}: cannot write: {why}")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise OutputError(f"{path}: cannot write: Permission denied")


def write_pieces(f: IO[str], text: str | Iterable[str]) -> None:
    """Write a string, or its pieces as they are made, to an open text file."""
    if isinstance(text, str):
        f.write(text)
    else:
        for piece in text:
            f.write(piece)


def write_atomic(path: Path, text: str | Iterable[str]) -> None:
    """Write `text` (a string, or its pieces as they are made) to `path` through a
    temporary file and os.replace: all or nothing.

    A stream (streamed(): /dev/stdout, a FIFO, a device) is written into as it is, never
    replaced, and never truncated (/dev/stdout may be a file a shell opened to append to).
    """
    if streamed(path):
        try:
            with path.open("a", encoding="utf-8") as f:
                write_pieces(f, text)
        except OSError as e:
            raise OutputError(f"{path}: cannot write: {e.strerror or e}") from e
        return
    import tempfile

    directory = path.parent if str(path.parent) else Path(".")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    except OSError as e:
        raise OutputError(f"{path}: cannot write: {e.strerror}") from e
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            write_pieces(f, text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException as e:  # a piece that fails to be made leaves no half file either
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(e, OSError):
            raise OutputError(f"{path}: cannot write: {e.strerror}") from e
        raise
