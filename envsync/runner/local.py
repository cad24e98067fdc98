"""LocalRunner: commands on this machine through subprocess, argv lists, no shell.

A command's output is read until both its pipes end, bounded twice: by its timeout (then
its process group is killed and reading stops at once), and, once the command itself has
exited, by a short grace for what is left in the pipes, so that a grandchild that keeps
them open (a `setsid` child a sitecustomize left behind) never holds envsync up. The grace
runs from the exit or the last bytes read, whichever is later, and what the pipes hold when
it ends is still read: a reader the machine did not schedule for a while never cuts short
an output that was written whole.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from typing import IO

from envsync.errors import CommandNotFound, CommandTimeout
from envsync.runner.base import (
    EXIT_GRACE,
    CommandResult,
    check_stopping,
    keep_tail,
    stdout_cap,
    stopping,
    too_much,
)


class LocalRunner:
    def __init__(
        self,
        host: str = "local",
        *,
        env: Mapping[str, str] | None = None,
        max_stdout: int | None = None,  # None: the capped() block's, if any
    ) -> None:
        self.host = host
        self._env = dict(env) if env is not None else None
        self.max_stdout = max_stdout

    def run(
        self, argv: Sequence[str], *, input: bytes | None = None, timeout: float
    ) -> CommandResult:
        argv = tuple(argv)
        check_stopping(self.host)
        started = time.perf_counter()
        try:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=self._env if self._env is not None else os.environ.copy(),
                # Its own session, so that a timeout can end the command and its children.
                start_new_session=True,
            )
        except FileNotFoundError as e:
            raise CommandNotFound(f"{self.host}: {argv[0]} does not exist") from e
        except PermissionError as e:
            raise CommandNotFound(f"{self.host}: {argv[0]} is not executable") from e
        except OSError as e:
            raise CommandNotFound(f"{self.host}: cannot run {argv[0]}: {e.strerror}") from e
        cap = stdout_cap(self.max_stdout)
        try:
            stdout, stderr, finished = _collect(proc, input, started + timeout, cap)
        except BaseException:
            _kill_group(proc)
            raise
        if cap is not None and len(stdout) > cap:
            _kill_group(proc)
            raise too_much(self.host, argv[0], cap)
        if not finished:
            _kill_group(proc)
            check_stopping(self.host)
            raise CommandTimeout(
                f"{self.host}: {argv[0]} did not finish within {timeout:g}s", stderr=stderr
            )
        return CommandResult(
            argv=argv,
            returncode=proc.returncode,
            stdout=stdout,
            stderr=stderr,
            duration_s=time.perf_counter() - started,
        )


POLL = 0.05


def _collect(
    proc: subprocess.Popen[bytes], data: bytes | None, deadline: float, limit_out: int | None
) -> tuple[bytes, bytes, bool]:
    """(stdout, stderr, whether the command exited by the deadline): `data` written to its
    stdin, its pipes read until they end, the deadline passes, a grace after it exited, or
    stdout is past `limit_out` (then not finished); stderr's tail only is kept."""
    out, err = bytearray(), bytearray()
    sinks: dict[int, bytearray] = {}
    selector = selectors.DefaultSelector()
    for pipe, sink in ((proc.stdout, out), (proc.stderr, err)):
        if pipe is not None:
            sinks[pipe.fileno()] = sink
            selector.register(pipe.fileno(), selectors.EVENT_READ)
    pending = memoryview(data or b"")
    stdin = proc.stdin.fileno() if proc.stdin is not None else None
    if stdin is not None:
        if pending:
            os.set_blocking(stdin, False)
            selector.register(stdin, selectors.EVENT_WRITE)
        else:
            _close(proc.stdin)
    exited: float | None = None
    read_at = 0.0  # when the last bytes came: the grace runs from then, or from the exit
    try:
        while selector.get_map():
            now = time.perf_counter()
            if exited is None and proc.poll() is not None:
                exited = now
            limit = deadline if exited is None else min(deadline, max(exited, read_at) + EXIT_GRACE)
            if stopping():
                break
            if now >= limit:
                # What the pipes already hold is read before giving up on them: a reader
                # that was not scheduled for the grace (a loaded machine) must not cut
                # the output of a command that wrote it all and exited.
                if now >= deadline or not selector.select(0):
                    break
                limit = now
            for key, _ in selector.select(max(0.0, min(limit - now, POLL))):
                if key.fd == stdin:
                    try:
                        pending = pending[os.write(key.fd, pending[: 1 << 16]) :]
                    except BrokenPipeError:
                        pending = pending[:0]
                    if not pending:
                        selector.unregister(key.fd)
                        _close(proc.stdin)
                    continue
                chunk = os.read(key.fd, 1 << 16)
                if chunk:
                    read_at = time.perf_counter()
                    sinks[key.fd] += chunk
                    if sinks[key.fd] is err:
                        keep_tail(err)
                    elif limit_out is not None and len(out) > limit_out:
                        return bytes(out), bytes(err), False
                else:
                    selector.unregister(key.fd)
    finally:
        selector.close()
        for pipe in (proc.stdin, proc.stdout, proc.stderr):
            _close(pipe)
    if exited is None:
        if stopping():
            return bytes(out), bytes(err), False
        try:
            proc.wait(timeout=max(0.0, deadline - time.perf_counter()))
        except subprocess.TimeoutExpired:
            return bytes(out), bytes(err), False
    return bytes(out), bytes(err), True


def _close(pipe: IO[bytes] | None) -> None:
    if pipe is not None:
        with contextlib.suppress(OSError):
            pipe.close()


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """End the command and its children (what it wrote is what was read until then)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        proc.kill()
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=5)
