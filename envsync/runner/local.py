"""LocalRunner: commands on this machine through subprocess, argv lists, no shell."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence

from envsync.errors import CommandNotFound, CommandTimeout
from envsync.runner import CommandResult


class LocalRunner:
    def __init__(self, host: str = "local", *, env: Mapping[str, str] | None = None) -> None:
        self.host = host
        self._env = dict(env) if env is not None else None

    def run(
        self, argv: Sequence[str], *, input: bytes | None = None, timeout: float
    ) -> CommandResult:
        argv = tuple(argv)
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
        try:
            stdout, stderr = proc.communicate(input, timeout=timeout)
        except subprocess.TimeoutExpired as e:
            _, stderr = _kill_group(proc)
            raise CommandTimeout(
                f"{self.host}: {argv[0]} did not finish within {timeout:g}s", stderr=stderr
            ) from e
        except BaseException:
            _kill_group(proc)
            raise
        return CommandResult(
            argv=argv,
            returncode=proc.returncode,
            stdout=stdout,
            stderr=stderr,
            duration_s=time.perf_counter() - started,
        )


def _kill_group(proc: subprocess.Popen[bytes]) -> tuple[bytes, bytes]:
    """End the command and its children; what they wrote until then."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.kill()
    return proc.communicate()
