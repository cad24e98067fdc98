"""The service on the host: its kept state, a plain process started, watched and stopped,
a systemd drop-in.

A plain-process service is followed as every process that carries its mark, an
environment variable each of its processes inherits (through forks, `setsid` and the double
fork of a daemon), and its session: a service whose first process exits once it has
daemonized is still running, is smoke-tested, and is stopped whole (its port freed).
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import time

from .failure import Failure, refuse
from .paths import STATE, open_log, state_dir, state_file_mode, write_json
from .transfer import put

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from ..protocol import (
        SetServiceReply,
        SetServiceRequest,
        StartReply,
        StartRequest,
        StopReply,
        StopRequest,
        WatchReply,
        WatchRequest,
        WriteDropinReply,
        WriteDropinRequest,
    )


def read_service() -> dict[str, Any]:
    """What envsync keeps for the service in this environment ({} when nothing)."""
    try:
        with open(STATE.service) as f:
            state: Any = json.load(f)
    except (OSError, ValueError):
        return {}
    return state if isinstance(state, dict) else {}


def op_set_service(op: SetServiceRequest) -> SetServiceReply:
    """Keep the service's launch flags and/or its last crash (null: forget it)."""
    state_dir(STATE.root)
    state = read_service()
    for key in ("flags", "crash"):
        if key in op:
            state[key] = op[key]
    state = {k: v for k, v in state.items() if v is not None}
    write_json(STATE.service, state, mode=state_file_mode())
    return {}


def run_files(name: str) -> tuple[str, str]:
    """The pid and log files of the plain-process service `name`."""
    state_dir(STATE.root)
    state_dir(STATE.run)
    base = os.path.join(STATE.run, re.sub(r"[^A-Za-z0-9_.-]", "_", name))
    return base + ".pid", base + ".log"


MARK = "ENVSYNC_SERVICE"  # its value: the environment's state folder, the service, a nonce


def members(started: dict[str, Any]) -> list[int]:
    """The live processes of a service started as `started` ({"pid", "mark"}): those that
    carry its mark, and those of its session."""
    pid = started.get("pid")
    mark = started.get("mark")
    want = (f"{MARK}={mark}\0").encode() if isinstance(mark, str) and mark else None
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        other = int(entry)
        if other == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
            if fields[0] == b"Z":
                continue  # a zombie is dead
            if isinstance(pid, int) and int(fields[3]) == pid:  # its session
                found.append(other)
                continue
            if want is not None:
                with open(f"/proc/{entry}/environ", "rb") as f:
                    if want in b"\0" + f.read():
                        found.append(other)
        except (OSError, IndexError, ValueError):
            continue
    if isinstance(pid, int) and pid not in found and alive(pid):
        found.append(pid)
    return sorted(found)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie is dead
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][:1] != "Z"
    except (OSError, IndexError):
        return True


def read_started(path: str) -> dict[str, Any] | None:
    """{"pid", "mark"} of the service started last (an older envsync wrote the pid alone)."""
    try:
        with open(path) as f:
            text = f.read().strip()
    except OSError:
        return None
    try:
        data: Any = json.loads(text)
    except ValueError:
        return None
    if isinstance(data, int):
        return {"pid": data}
    return data if isinstance(data, dict) and isinstance(data.get("pid"), int) else None


def op_stop(op: StopRequest) -> StopReply:
    """Stop every process of the service (TERM, then KILL after the grace), its port freed
    once they are gone; the pid it was started as (None: it was not running)."""
    import signal

    pid_file, _ = run_files(op["name"])
    started = read_started(pid_file)
    if started is None:
        return {"stopped": None}
    running = members(started)
    was_running = bool(running)
    for sig, wait in ((signal.SIGTERM, op.get("grace", 10.0)), (signal.SIGKILL, 5.0)):
        if not running:
            break
        for pid in running:
            try:
                os.kill(pid, sig)
            except (ProcessLookupError, PermissionError):
                continue
        deadline = time.time() + wait
        while running and time.time() < deadline:
            time.sleep(0.05)
            running = members(started)
    if running:
        raise Failure(
            "cannot-stop",
            "processes {} of the service did not end".format(", ".join(map(str, running))),
        )
    os.unlink(pid_file)
    return {"stopped": started["pid"] if was_running else None}


def port_free(port: int, wait: float = 0.0) -> None:
    """Refuse to start a service whose port another process already holds.

    `wait`: how long the port may take to come free, for the instance just stopped: its
    leader can read as dead (a zombie) while its other threads still hold the socket."""
    import errno
    import socket

    deadline = time.time() + wait
    while True:
        probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        # As servers do: a port whose old connections linger (TIME_WAIT) is free; one that
        # a process listens on is not.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("0.0.0.0", port))
            return
        except OSError as e:
            if e.errno != errno.EADDRINUSE:
                return
            if time.time() >= deadline:
                raise Failure(
                    "port-in-use", f"port {port} is already in use on this host (another service?)"
                ) from None
        finally:
            probe.close()
        time.sleep(0.1)


def op_start(op: StartRequest) -> StartReply:
    """Stop the previous instance, start the service in its own session, log to a file."""
    import subprocess

    stopped = op_stop({"name": op["name"]})["stopped"]
    port = op.get("port")
    if port:
        port_free(int(port), wait=10.0 if stopped else 0.0)
    pid_file, log_file = run_files(op["name"])
    import secrets

    mark = "{}:{}:{}".format(STATE.root, op["name"], secrets.token_hex(8))
    env = dict(os.environ)
    env.update(op.get("env") or {})
    env[MARK] = mark
    with os.fdopen(open_log(log_file, truncate=True, mode=state_file_mode()), "wb") as log:
        try:
            proc = subprocess.Popen(
                op["argv"],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=os.path.expanduser(op.get("cwd") or "~"),
                start_new_session=True,
                close_fds=True,
            )
        except OSError as e:
            raise Failure(
                "cannot-start", "cannot start {}: {}".format(op["argv"][0], e.strerror or e)
            ) from None
    write_json(pid_file, {"pid": proc.pid, "mark": mark}, mode=state_file_mode())
    return {"pid": proc.pid, "log": log_file, "started": time.time()}


def op_watch(op: WatchRequest) -> WatchReply:
    """Is the service alive, and what has it logged since `offset`."""
    pid_file, log_file = run_files(op["name"])
    started = read_started(pid_file)
    pid = started["pid"] if started else None
    running = members(started) if started else []
    text, offset = "", op.get("offset", 0)
    try:
        with open(log_file, "rb") as f:
            f.seek(offset)
            data = f.read(1 << 20)
            offset += len(data)
            text = data.decode("utf-8", "replace")
    except OSError:
        text = ""
    return {"pid": pid, "alive": bool(running), "processes": running, "log": text, "offset": offset}


def op_write_dropin(op: WriteDropinRequest) -> WriteDropinReply:
    """Write a systemd drop-in, keeping a copy of any previous one in the state's run/."""
    path = op["path"]
    if not re.match(r"^/etc/systemd/system/[A-Za-z0-9@_.:-]+\.d/envsync\.conf$", path or ""):
        refuse(path, "not an envsync drop-in of a systemd unit")
    saved = None
    if os.path.isfile(path):
        state_dir(STATE.root)
        state_dir(STATE.run)
        saved = os.path.join(
            STATE.run,
            os.path.basename(os.path.dirname(path))
            + "-"
            + os.path.basename(path)
            + f".{int(time.time())}.bak",
        )
        shutil.copy2(path, saved)
    put(path, io.BytesIO(op["text"].encode()), 0o644)
    return {"backup": saved}
