"""One change at a time per environment: the lock a changing command holds on the host.

A command that changes the environment takes the lock, a file under ~/.envsync/locks/
written under an flock guard by a `hold` process that stays alive for as long as the
command does (the lock names it: when it dies, the lock is stale). Every operation sent
with {"lock": token} checks that it still holds the lock and registers itself as busy,
so that a holder whose client is gone lets running steps finish, restores an apply that
did not finish, and only then releases.
"""

from __future__ import annotations

import json
import os
import sys
import time

from .backup import backup_dir, op_journal, op_restore
from .failure import Failure
from .paths import STATE
from .service import alive
from .transfer import unlink, write_json

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

HEARTBEAT_SECONDS = 0.5


def start_time(pid: int) -> str | None:
    """The process's start time (clock ticks since boot), to tell a reused pid apart."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def running(holder: Any) -> bool:
    if not holder or not isinstance(holder, dict):
        return False
    pid = holder.get("pid")
    if not isinstance(pid, int) or not alive(pid):
        return False
    started = holder.get("started")
    return started is None or start_time(pid) in (None, started)


class Guard:
    """An flock around reading and replacing the lock file: one taker at a time."""

    def __enter__(self) -> Guard:
        import fcntl

        os.makedirs(STATE.locks, mode=0o700, exist_ok=True)
        self.fd = os.open(STATE.lock + ".guard", os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc: object) -> None:
        os.close(self.fd)


def read_lock() -> dict[str, Any] | None:
    try:
        with open(STATE.lock) as f:
            data: Any = json.load(f)
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return {"damaged": True}  # a torn or foreign file: nobody alive holds it
    return data if isinstance(data, dict) else {"damaged": True}


def busy_pids(but: int | None = None) -> list[int]:
    """Agent processes still running a step under the lock."""
    try:
        names = os.listdir(STATE.busy)
    except OSError:
        return []
    pids = []
    for name in names:
        try:
            with open(os.path.join(STATE.busy, name)) as f:
                holder: Any = json.load(f)
        except (OSError, ValueError):
            continue
        if not isinstance(holder, dict):
            continue
        if holder.get("pid") != but and running(holder):
            pids.append(holder["pid"])
        elif holder.get("pid") != but:
            unlink(os.path.join(STATE.busy, name))
    return sorted(pids)


def held(lock: dict[str, Any] | None) -> bool:
    """Is the lock held by a live command (or one whose step still runs)?"""
    if lock is None:
        return False
    return running(lock.get("holder")) or bool(busy_pids())


def op_locked(op: dict[str, Any]) -> dict[str, Any]:
    """Has the `hold` of this token taken the lock (and whose stale lock did it take)?"""
    lock = read_lock() or {}
    ours = lock.get("token") == op["token"]
    return {"ours": ours and running(lock.get("holder")), "stale": lock.get("took_over")}


def owns(token: str) -> bool:
    lock = read_lock()
    return bool(lock) and lock is not None and lock.get("token") == token


def op_hold(op: dict[str, Any]) -> dict[str, Any]:
    """Take the lock (queueing up to `wait` seconds) and keep it while the client is alive;
    when the client is gone, finish its business and release. The lock names this process
    as its holder from the moment it is taken: a holder that dies leaves a stale lock."""
    token = op["token"]
    deadline = time.time() + float(op.get("wait") or 0)
    while True:
        with Guard():
            current = read_lock()
            if not held(current):
                entry = {
                    "token": token,
                    "who": op["who"],
                    "holder": {"pid": os.getpid(), "started": start_time(os.getpid())},
                    "took_over": None
                    if current is None
                    else current.get("who") or {"damaged": True},
                }
                write_json(STATE.lock, entry)
                break
        if time.time() >= deadline:
            return {
                "acquired": False,
                "who": (current or {}).get("who") or {},
                "busy": busy_pids(),
                "waited": float(op.get("wait") or 0),
            }
        time.sleep(0.2)
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
    while busy_pids():
        time.sleep(0.2)
    op_unlock({"token": token, "why": "the envsync applying this is gone"})


def finish(lock: dict[str, Any], why: str) -> None:
    """Before a lock is released: restore its apply if that did not finish."""
    ident = lock.get("backup")
    if not ident:
        return
    try:
        with open(os.path.join(backup_dir(ident), "manifest.json")) as f:
            state = json.load(f).get("state")
        if state == "applying":
            op_journal({"id": ident, "event": f"{why}: restoring"})
            op_restore({"id": ident})
    except (OSError, ValueError, Failure) as e:
        try:
            op_journal({"id": ident, "event": f"restoring failed: {e}"})
        except (OSError, Failure):
            return


def op_unlock(op: dict[str, Any]) -> dict[str, Any]:
    """Release the lock; an apply under it that neither finished nor rolled back is undone."""
    lock = read_lock()
    if not lock or lock.get("token") != op["token"]:
        return {"released": False}
    finish(lock, op.get("why") or "the apply ended unfinished")
    with Guard():
        if not owns(op["token"]):
            return {"released": False}
        os.unlink(STATE.lock)
    return {"released": True}


def note_backup(token: str, where: str) -> None:
    """An apply under the lock: its holder restores this backup if the client vanishes."""
    with Guard():
        lock = read_lock()
        if lock and lock.get("token") == token:
            lock["backup"] = os.path.basename(where)
            write_json(STATE.lock, lock)


class Busy:
    """Register this process as running a step under the lock `token` (checked first)."""

    def __init__(self, token: str) -> None:
        self.token = token
        self.path = os.path.join(STATE.busy, str(os.getpid()))

    def __enter__(self) -> Busy:
        if not owns(self.token):
            raise Failure("lock-lost", "this command no longer holds the target's lock; refusing")
        os.makedirs(STATE.busy, mode=0o700, exist_ok=True)
        me = {"pid": os.getpid(), "started": start_time(os.getpid())}
        with open(self.path, "w") as f:
            json.dump(me, f)
        return self

    def __exit__(self, *exc: object) -> None:
        unlink(self.path)
