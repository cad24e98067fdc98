"""LocalRunner: commands on this machine through subprocess, argv lists, no shell."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Mapping, Sequence

from envsync.runner import CommandNotFound, CommandResult, CommandTimeout


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
            proc = subprocess.run(
                argv,
                input=input,
                capture_output=True,
                timeout=timeout,
                env=self._env if self._env is not None else os.environ.copy(),
                check=False,
            )
        except subprocess.TimeoutExpired as e:
            raise CommandTimeout(
                f"{self.host}: {argv[0]} did not finish within {timeout:g}s"
            ) from e
        except FileNotFoundError as e:
            raise CommandNotFound(f"{self.host}: {argv[0]} does not exist") from e
        except PermissionError as e:
            raise CommandNotFound(f"{self.host}: {argv[0]} is not executable") from e
        except OSError as e:
            raise CommandNotFound(f"{self.host}: cannot run {argv[0]}: {e.strerror}") from e
        return CommandResult(
            argv=argv,
            returncode=proc.returncode,
            stdout=proc.stdout,
            stderr=proc.stderr,
            duration_s=time.perf_counter() - started,
        )
