"""This machine's own key, and what envsync keeps sealed with it.

What envsync keeps in its cache folder to skip work (a verdict, a digest derived from a
part a host sent) must never lower a verdict when the folder was edited or restored from
another machine or job. Each such entry carries an HMAC made with this machine's key,
kept in envsync's state folder (never the cache folder): an entry that does not verify is
dropped and computed again.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from collections.abc import Mapping
from pathlib import Path

from envsync.documents import private, read_plain

SECRET_NAME = "verdict-key"


def state_home(environ: Mapping[str, str]) -> Path:
    """envsync's folder of state on this machine: `$XDG_STATE_HOME/envsync`."""
    base = environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(base) / "envsync"


def secret_path() -> Path:
    return state_home(os.environ) / SECRET_NAME


def secret() -> bytes | None:
    """This machine's key for kept entries, made once (random, 0600); None where it can
    be neither read nor made, or its folder is another user's or others may write to it
    (then nothing is kept: a key another user could replace seals nothing)."""
    path = secret_path()
    if not private(path.parent):
        return None
    try:
        key = read_plain(path, 256)
        if len(key) >= 32:
            return key
    except OSError:
        pass
    key = secrets.token_hex(32).encode()
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        if not private(path.parent):  # made by another since it was looked at
            return None
        tmp = path.with_name(f".{SECRET_NAME}.{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            os.write(fd, key)
        finally:
            os.close(fd)
        try:
            os.link(tmp, path)  # the first to make it wins; the others read it
        finally:
            os.unlink(tmp)
    except FileExistsError:
        pass
    except OSError:
        return None
    try:
        key = read_plain(path, 256)
    except OSError:
        return None
    return key if len(key) >= 32 else None


def mac(key: bytes, found: str, body: bytes) -> str:
    """The seal of `body` kept under the name `found`."""
    return hmac.new(key, found.encode() + b"\n" + body, hashlib.sha256).hexdigest()


def verifies(key: bytes, found: str, body: bytes, seal: object) -> bool:
    return hmac.compare_digest(str(seal), mac(key, found, body))
