"""The Runner seam: every command on a host goes through it, argv lists in, results out."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from envsync.runner.base import (
    CONNECT_TIMEOUT,
    EXIT_GRACE,
    MAX_STDOUT,
    STDERR_KEPT,
    STOPPING,
    CommandResult,
    Runner,
    capped,
    check_stopping,
    keep_tail,
    stdout_cap,
    stop_all,
    stoppable,
    stopping,
    tail,
    too_much,
)

if TYPE_CHECKING:
    from envsync.model.inventory import HostSpec


def make_runner(
    spec: HostSpec, *, accept_new: bool = False, connect_timeout: float = CONNECT_TIMEOUT
) -> Runner:
    """The runner for a host (the one place that chooses): this machine, SSH (through jump
    hosts), and either of them behind the host's exec prefix (a container, pod or node)."""
    if spec.connection is not None:
        from envsync.errors import RunnerError

        raise RunnerError(
            f"{spec.name}: reached through Ansible's {spec.connection!r} connection, which "
            "envsync's own runners do not speak",
            tip="collect it with --engine ansible",
        )
    runner: Runner
    if spec.ssh is None:
        from envsync.runner.local import LocalRunner

        runner = LocalRunner(spec.name)
    else:
        from envsync.runner.ssh import SSHRunner  # paramiko: only for SSH hosts

        runner = SSHRunner(spec, accept_new=accept_new, connect_timeout=connect_timeout)
    if spec.exec:
        from envsync.runner.exec import ExecRunner

        runner = ExecRunner(spec, runner)
    return runner


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
    "EXIT_GRACE",
    "MAX_STDOUT",
    "STDERR_KEPT",
    "STOPPING",
    "CommandResult",
    "Runner",
    "Runners",
    "capped",
    "check_stopping",
    "keep_tail",
    "make_runner",
    "stdout_cap",
    "stop_all",
    "stoppable",
    "stopping",
    "tail",
    "too_much",
]
