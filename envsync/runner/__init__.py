"""The Runner seam: every command on a host goes through it, argv lists in, results out."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from envsync.errors import RunnerError

if TYPE_CHECKING:
    from envsync.inventory import HostSpec

CONNECT_TIMEOUT = 10.0  # seconds to connect and finish the SSH handshake


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


def make_runner(
    spec: HostSpec, *, accept_new: bool = False, connect_timeout: float = CONNECT_TIMEOUT
) -> Runner:
    """The runner for a host: this machine's processes, or SSH (the one place that chooses)."""
    if spec.is_local:
        from envsync.runner.local import LocalRunner

        return LocalRunner(spec.name)
    from envsync.runner.ssh import SSHRunner  # paramiko: only for SSH hosts

    return SSHRunner(spec, accept_new=accept_new, connect_timeout=connect_timeout)


class Runners:
    """One runner per host for a whole command (one SSH connection per host), closed at end."""

    def __init__(self, *, accept_new: bool = False, connect_timeout: float = CONNECT_TIMEOUT):
        self.accept_new = accept_new
        self.connect_timeout = connect_timeout
        self._runners: dict[str, Runner] = {}
        self._lock = threading.Lock()

    def __call__(self, spec: HostSpec) -> Runner:
        with self._lock:
            if spec.name not in self._runners:
                self._runners[spec.name] = make_runner(
                    spec, accept_new=self.accept_new, connect_timeout=self.connect_timeout
                )
            return self._runners[spec.name]

    def close(self) -> None:
        for runner in self._runners.values():
            close = getattr(runner, "close", None)
            if close is not None:
                close()


__all__ = [
    "CONNECT_TIMEOUT",
    "CommandNotFound",
    "CommandResult",
    "CommandTimeout",
    "Runner",
    "Runners",
    "make_runner",
]
