"""One change at a time per environment: the mutex a changing command holds on the host.

The lock is a file inside the environment (`PREFIX/.envsync/lock`), so whoever reaches
the environment (another user, another HOME, a bind mount, a container's view of the same
venv) meets the same lock. A `hold` process holds it with flock for as long as the command
that took it lives; lock.json beside it says who and carries the command's token. The
kernel releases an flock with its holder, so a lock whose holder died is free (its
lock.json, left behind, says whose it was), whatever PID namespace either lived in. Every
operation sent with {"lock": token} checks that the lock is held with that token and
holds a flock of its own while it runs (busy/), so that a holder whose client is gone lets
running steps finish, restores an apply that did not finish, and only then releases.
"""

from __future__ import annotations

import fcntl
import json
import os
import sys
import time

from .backups import backup_dir, journal, state_of
from .failure import Failure
from .paths import STATE, state_dir, state_file_mode, write_json
from .restore import op_restore
from .transfer import unlink

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from ..protocol import (
        Holder,
        HoldReply,
        HoldRequest,
        LockedReply,
        LockedRequest,
        UnlockReply,
        UnlockRequest,
    )

HEARTBEAT_SECONDS = 0.5
# A lock being released (lock.json gone, its holder about to exit) is not refused.
RELEASING_SECONDS = 2.0


def open_mutex_file(path: str) -> int:
    """Open (making it) a file to flock: whoever may change the environment must be able to
    take its lock, even when another user made the file."""
    state_dir(STATE.root)
    nofollow = getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | nofollow, state_file_mode())
    except PermissionError:
        # another user's file, narrowed by that user's umask: an flock needs only a
        # descriptor, and a read-only one excludes the same way
        fd = os.open(path, os.O_RDONLY | nofollow)
    os.set_inheritable(fd, False)
    return fd


def try_flock(fd: int, how: int = fcntl.LOCK_EX) -> bool:
    try:
        fcntl.flock(fd, how | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def flock_held(path: str) -> bool:
    """Does some process hold an flock on `path` (this test takes none for long)?"""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return False
    try:
        return not try_flock(fd, fcntl.LOCK_SH)
    finally:
        os.close(fd)


class Guard:
    """An flock around changing lock.json: one writer at a time."""

    def __enter__(self) -> Guard:
        self.fd = open_mutex_file(STATE.guard)
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc: object) -> None:
        os.close(self.fd)


def read_holder() -> dict[str, Any] | None:
    try:
        with open(STATE.holder) as f:
            data: Any = json.load(f)
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return {"damaged": True}  # a torn or foreign file: nobody alive holds it
    return data if isinstance(data, dict) else {"damaged": True}


def busy_files(but: str | None = None) -> list[str]:
    """The busy files of operations still running a step under the lock (their flock held);
    files of operations that are gone are removed."""
    try:
        names = os.listdir(STATE.busy)
    except OSError:
        return []
    found = []
    for name in sorted(names):
        path = os.path.join(STATE.busy, name)
        if path == but or name.startswith("."):
            continue  # ".NAME": one being made (flock'ed, then renamed into place)
        if flock_held(path):
            found.append(path)
        else:
            unlink(path)
    return found


def busy_pids(but: str | None = None) -> list[int]:
    """The pids (as the processes saw themselves) of steps still running under the lock."""
    pids = []
    for path in busy_files(but):
        try:
            pids.append(int(os.path.basename(path).split("-")[0]))
        except ValueError:
            continue
    return sorted(pids)


def held() -> bool:
    """Is the lock held by a live command (or does a step of one still run)?"""
    return flock_held(STATE.lock) or bool(busy_files())


def op_locked(op: LockedRequest) -> LockedReply:
    """Has the `hold` of this token taken the lock (and whose stale lock did it take)?"""
    lock = read_holder() or {}
    ours = lock.get("token") == op["token"] and flock_held(STATE.lock)
    return {"ours": ours, "stale": lock.get("took_over")}


def owns(token: str) -> bool:
    lock = read_holder()
    return lock is not None and lock.get("token") == token


def op_hold(op: HoldRequest) -> HoldReply:
    """Take the lock (queueing up to `wait` seconds) and keep it while the client is alive;
    when the client is gone, finish its business and release. The flock is this process's
    from the moment it is taken: when it dies, the kernel releases it."""
    try:
        return hold(op)
    except OSError as e:
        raise Failure(
            "cannot-lock",
            f"cannot take this environment's lock in {STATE.root}: "
            f"{e.strerror or e}; nothing was changed",
        ) from None


def hold(op: HoldRequest) -> HoldReply:
    token = op["token"]
    wait = float(op.get("wait") or 0)
    started = time.time()
    fd = open_mutex_file(STATE.lock)
    while True:
        if try_flock(fd):
            if not busy_files():
                break
            fcntl.flock(fd, fcntl.LOCK_UN)  # a step of a command that is gone still runs
        current = read_holder()
        releasing = current is None and time.time() - started < RELEASING_SECONDS
        if time.time() - started >= wait and not releasing:
            who: Holder = {}
            if current and current.get("who"):
                who = current["who"]
            return {
                "acquired": False,
                "who": who,
                "busy": busy_pids(),
                "waited": wait,
            }
        time.sleep(0.05 if releasing else 0.2)
    with Guard():
        previous = read_holder()
        write_json(
            STATE.holder,
            {
                "token": token,
                "who": op["who"],
                "pid": os.getpid(),
                "took_over": None if previous is None else previous.get("who") or {"damaged": True},
            },
            mode=state_file_mode(),
        )
    out = sys.stdout.buffer
    beat = time.time()
    while owns(token):
        time.sleep(0.1)
        if time.time() - beat < HEARTBEAT_SECONDS:
            continue
        beat = time.time()
        try:  # the client reads these; when it is gone the write fails
            out.write(b".")
            out.flush()
        except (OSError, ValueError):
            abandon(token)
            return {"held": False}
    return {"held": True}


def abandon(token: str) -> None:
    """The command holding the lock is gone: let its steps end, undo its unfinished apply."""
    while busy_files():
        time.sleep(0.2)
    op_unlock({"token": token, "why": "the envsync applying this is gone"})


def finish(lock: dict[str, Any], why: str) -> None:
    """Before a lock is released: restore its apply if that did not finish."""
    ident = lock.get("backup")
    if not ident:
        return
    try:
        where = backup_dir(ident)
        if state_of(os.path.basename(where)) in ("applying", "restoring"):
            journal(where, f"{why}: restoring")
            op_restore({"id": ident, "force": True})
    except (OSError, ValueError, Failure) as e:
        try:
            journal(backup_dir(ident), f"restoring failed: {e}")
        except (OSError, Failure):
            return


def op_unlock(op: UnlockRequest) -> UnlockReply:
    """Release the lock; an apply under it that neither finished nor rolled back is undone."""
    lock = read_holder()
    if not lock or lock.get("token") != op["token"]:
        return {"released": False}
    finish(lock, op.get("why") or "the apply ended unfinished")
    with Guard():
        if not owns(op["token"]):
            return {"released": False}
        unlink(STATE.holder)
    return {"released": True}


def note_backup(token: str, where: str) -> None:
    """An apply under the lock: its holder restores this backup if the client vanishes."""
    with Guard():
        lock = read_holder()
        if lock and lock.get("token") == token:
            lock["backup"] = os.path.basename(where)
            write_json(STATE.holder, lock, mode=state_file_mode())


class Busy:
    """Run an operation under the lock `token` (checked first), holding a busy flock."""

    def __init__(self, token: str) -> None:
        import secrets

        self.token = token
        self.path = os.path.join(STATE.busy, f"{os.getpid()}-{secrets.token_hex(4)}")
        self.fd = -1

    def __enter__(self) -> Busy:
        if not owns(self.token) or not flock_held(STATE.lock):
            raise Failure("lock-lost", "this command no longer holds the target's lock; refusing")
        state_dir(STATE.busy)
        making = os.path.join(STATE.busy, "." + os.path.basename(self.path))
        self.fd = open_mutex_file(making)
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        os.replace(making, self.path)  # seen only once its flock is held
        return self

    def __exit__(self, *exc: object) -> None:
        unlink(self.path)
        os.close(self.fd)
