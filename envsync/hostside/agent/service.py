"""The service on the host: its kept state, a plain process started, watched and stopped,
a systemd drop-in, and commands run as a step (pip)."""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import time

from .failure import Failure, refuse
from .paths import STATE
from .transfer import put, write_json

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def read_service() -> dict[str, Any]:
    """What envsync keeps for the service in this environment ({} when nothing)."""
    try:
        with open(STATE.service) as f:
            state: Any = json.load(f)
    except (OSError, ValueError):
        return {}
    return state if isinstance(state, dict) else {}


def op_set_service(op: dict[str, Any]) -> dict[str, Any]:
    """Keep the service's launch flags and/or its last crash (null: forget it)."""
    os.makedirs(os.path.dirname(STATE.service), mode=0o700, exist_ok=True)
    state = read_service()
    for key in ("flags", "crash"):
        if key in op:
            state[key] = op[key]
    state = {k: v for k, v in state.items() if v is not None}
    write_json(STATE.service, state)
    return {}


def run_files(name: str) -> tuple[str, str]:
    """The pid and log files of the plain-process service `name`."""
    os.makedirs(STATE.run, mode=0o700, exist_ok=True)
    base = os.path.join(STATE.run, "{}-{}".format(re.sub(r"[^A-Za-z0-9_.-]", "_", name), STATE.key))
    return base + ".pid", base + ".log"


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


def read_pid(path: str) -> int | None:
    try:
        with open(path) as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


def op_stop(op: dict[str, Any]) -> dict[str, Any]:
    import signal

    pid_file, _ = run_files(op["name"])
    pid = read_pid(pid_file)
    if pid is None:
        return {"stopped": None}
    if alive(pid):
        for sig, wait in ((signal.SIGTERM, op.get("grace", 10.0)), (signal.SIGKILL, 5.0)):
            try:
                os.killpg(pid, sig)
            except (ProcessLookupError, PermissionError):
                break
            deadline = time.time() + wait
            while alive(pid) and time.time() < deadline:
                time.sleep(0.05)
            if not alive(pid):
                break
    os.unlink(pid_file)
    return {"stopped": pid}


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


def op_start(op: dict[str, Any]) -> dict[str, Any]:
    """Stop the previous instance, start the service in its own session, log to a file."""
    import subprocess

    stopped = op_stop({"name": op["name"]})["stopped"]
    if op.get("port"):
        port_free(int(op["port"]), wait=10.0 if stopped else 0.0)
    pid_file, log_file = run_files(op["name"])
    env = dict(os.environ)
    env.update(op.get("env") or {})
    with open(log_file, "wb") as log:
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
    with open(pid_file, "w") as f:
        f.write(f"{proc.pid}\n")
    return {"pid": proc.pid, "log": log_file, "started": time.time()}


def op_watch(op: dict[str, Any]) -> dict[str, Any]:
    """Is the service alive, and what has it logged since `offset`."""
    pid_file, log_file = run_files(op["name"])
    pid = read_pid(pid_file)
    text, offset = "", op.get("offset", 0)
    try:
        with open(log_file, "rb") as f:
            f.seek(offset)
            data = f.read(1 << 20)
            offset += len(data)
            text = data.decode("utf-8", "replace")
    except OSError:
        text = ""
    return {"pid": pid, "alive": bool(pid) and alive(pid or 0), "log": text, "offset": offset}


def op_write_dropin(op: dict[str, Any]) -> dict[str, Any]:
    """Write a systemd drop-in, keeping a copy of any previous one under ~/.envsync/run."""
    path = op["path"]
    if not re.match(r"^/etc/systemd/system/[A-Za-z0-9@_.:-]+\.d/envsync\.conf$", path or ""):
        refuse(path, "not an envsync drop-in of a systemd unit")
    saved = None
    if os.path.isfile(path):
        os.makedirs(STATE.run, mode=0o700, exist_ok=True)
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


def op_run(op: dict[str, Any]) -> dict[str, Any]:
    """Run a command (the step's pip) here, so that the lock knows it is running."""
    import subprocess

    try:
        proc = subprocess.run(op["argv"], stdin=subprocess.DEVNULL, capture_output=True)
    except OSError as e:
        why = e.strerror or e
        raise Failure("not-found", f"cannot run {op['argv'][0]}: {why}") from None
    return {
        "returncode": proc.returncode,
        "stdout": proc.stdout[-65536:].decode("utf-8", "replace"),
        "stderr": proc.stderr[-65536:].decode("utf-8", "replace"),
    }
