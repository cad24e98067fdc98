"""The Runner seam: every command on a host goes through it, argv lists in, results out."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from envsync.errors import RunnerError


@dataclass(frozen=True, slots=True, kw_only=True)
class CommandResult:
    argv: tuple[str, ...]
    returncode: int
    stdout: bytes
    stderr: bytes
    duration_s: float

    def stderr_tail(self, lines: int = 5) -> str:
        text = self.stderr.decode("utf-8", "replace").strip().splitlines()
        return " | ".join(line.strip() for line in text[-lines:] if line.strip())


class Runner(Protocol):
    """Runs one command on one host; never through a shell on the envsync side."""

    host: str

    def run(
        self, argv: Sequence[str], *, input: bytes | None = None, timeout: float
    ) -> CommandResult: ...


class CommandTimeout(RunnerError):
    """The command did not finish in time."""


class CommandNotFound(RunnerError):
    """The program to run does not exist on the host."""


__all__ = ["CommandNotFound", "CommandResult", "CommandTimeout", "Runner"]
