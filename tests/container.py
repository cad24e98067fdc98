"""A running container for envsync's tests, made of real Linux isolation (no runtime).

`Container(venv_root, mounts=...)` starts bubblewrap with its own mount, PID, UTS and IPC
namespaces: the machine's root read-only as the image, a private /tmp, and the given
folders bound inside (the venv at /opt/venv, writable like a container's layer). Its main
process holds the namespaces until `stop()`. `exec_prefix` enters them the way
`docker exec -i` does (setns, through nsenter), so a command run with it sees the inside
world: /opt/venv, not the folder outside; its own /tmp and PIDs.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

BWRAP = shutil.which("bwrap") or "/usr/bin/bwrap"
NSENTER = shutil.which("nsenter") or "/usr/bin/nsenter"
VENV = "/opt/venv"


def available() -> str | None:
    """Why a container cannot run here, or None when it can."""
    if not os.path.exists(BWRAP):
        return "no bwrap (apt-get install bubblewrap)"
    if not os.path.exists(NSENTER):
        return "no nsenter (util-linux)"
    if os.geteuid() != 0:
        return "entering another process's namespaces needs root"
    return None


def sandbox(options: list[str]) -> tuple[subprocess.Popen[bytes], int]:
    """bwrap with `options` around a sleeping process; the PID of its namespaces' first."""
    read, write = os.pipe()
    proc = subprocess.Popen(
        [BWRAP, *options, "--info-fd", str(write), "sleep", "infinity"],
        pass_fds=(write,),
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    os.close(write)
    with os.fdopen(read) as info:
        text = info.read()
    if not text:
        raise RuntimeError(f"bwrap exited {proc.wait(timeout=10)} without starting")
    pid = int(json.loads(text)["child-pid"])
    # bwrap tells the PID before the inside is mounted: ready once `sleep` runs there.
    deadline = time.monotonic() + 10
    while not _sleeping(pid):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"bwrap did not start its process (exit {proc.poll()})")
        time.sleep(0.01)
    return proc, pid


def _sleeping(pid: int) -> bool:
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        return any(
            Path(f"/proc/{p}/cmdline").read_bytes() == b"sleep\0infinity\0"
            for p in [str(pid), *children]
        )
    except OSError:
        return False


class Container:
    def __init__(
        self, venv_root: Path, *, mounts: dict[str, Path] | None = None, hostname: str = "sglang-0"
    ) -> None:
        self.venv_root = venv_root
        self.mounts = dict(mounts or {})
        self.hostname = hostname
        self.proc: subprocess.Popen[bytes] | None = None
        self.pid = 0  # the namespaces' first process, as seen from outside

    def start(self) -> Container:
        argv = [
            BWRAP,
            "--ro-bind", "/", "/",
            "--tmpfs", "/opt",
            "--bind", str(self.venv_root), VENV,
            "--tmpfs", "/tmp",
            "--dev", "/dev",
            "--proc", "/proc",
            "--unshare-pid", "--unshare-uts", "--unshare-ipc",
            "--hostname", self.hostname,
        ]  # fmt: skip
        for inside, outside in self.mounts.items():
            argv += ["--ro-bind", str(outside), inside]
        self.proc, self.pid = sandbox(argv[1:])
        return self

    @property
    def exec_prefix(self) -> list[str]:
        """Like `docker exec -i NAME`: the command after it runs inside."""
        return [NSENTER, "--target", str(self.pid), "--mount", "--uts", "--ipc", "--pid", "--"]

    def stop(self) -> None:
        """Like `docker kill`: the first process dies, and with it everything inside."""
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)
        self.proc = None
