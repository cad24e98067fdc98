"""ExecRunner: commands inside a container, pod or Slurm allocation, through an exec prefix.

Every command is the host's prefix (`docker exec -i sglang`, `kubectl exec -i POD --`,
`srun -w gpu7 --`) followed by envsync's argv, run by the runner beneath: this machine's
(an argv list, no shell) or the SSH host's (quoted for its shell). Before its first
command the runner checks that the prefix reaches the interpreter inside, so that a
prefix that cannot (its program missing, the container gone, access denied, a hang) is
reported as such, with the prefix's own error output, rather than as a failed probe.
"""

from __future__ import annotations

import os
import shlex
import threading
from collections.abc import Sequence

from envsync.errors import CommandNotFound, CommandTimeout, ExecError, RunnerError
from envsync.model.inventory import HostSpec
from envsync.runner.base import CommandResult, Runner, tail

# Printed by the interpreter inside when the prefix reached it.
READY = "envsync-exec-ready"
_READY_CHECK = f"import sys;sys.stdout.write({READY!r})"
# What container, pod and job-step CLIs say when the thing to enter is not there.
_GONE = (
    "no such container",
    "not running",
    "state improper",
    "notfound",
    "not found",
    "no such",
    "does not exist",
    "cannot find",
    "can't find",
    "completed pod",
    "invalid node",
    "unable to upgrade connection",
)
_DENIED = (
    "permission denied",
    "forbidden",
    "operation not permitted",
    "access denied",
    "not authorized",
    "unauthorized",
)


def exec_argv(prefix: Sequence[str], argv: Sequence[str]) -> tuple[str, ...]:
    """What runs for `argv` inside: the prefix, then argv unchanged (no shell between)."""
    return (*prefix, *argv)


class ExecRunner:
    """One host behind an exec prefix, on top of the runner that runs the prefix."""

    def __init__(self, spec: HostSpec, inner: Runner) -> None:
        if not spec.exec:
            raise RunnerError(f"{spec.name}: not an exec host")
        self.host = spec.name
        self.spec = spec
        self.prefix = tuple(spec.exec)
        self.inner = inner
        self._ready = False
        self._lock = threading.Lock()

    def run(
        self, argv: Sequence[str], *, input: bytes | None = None, timeout: float
    ) -> CommandResult:
        self._check_ready(timeout)
        try:
            return self._run(exec_argv(self.prefix, argv), input, timeout)
        except CommandTimeout as e:
            # Name the command that hung, not the prefix's program that ran it.
            raise CommandTimeout(
                f"{self.host}: {argv[0]} did not finish within {timeout:g}s "
                f"inside `{shlex.join(self.prefix)}`",
                stderr=e.stderr,
            ) from e

    def close(self) -> None:
        close = getattr(self.inner, "close", None)
        if close is not None:
            close()

    # -- the prefix's own failures --------------------------------------------------------

    def _where(self) -> str:
        return f" on {self.spec.ssh}" if self.spec.ssh else " on this machine"

    def _run(self, argv: tuple[str, ...], input: bytes | None, timeout: float) -> CommandResult:
        try:
            return self.inner.run(argv, input=input, timeout=timeout)
        except CommandNotFound as e:
            raise self._missing(None) from e

    def _check_ready(self, timeout: float) -> None:
        with self._lock:
            if self._ready:
                return
            argv = exec_argv(self.prefix, [self.spec.python, "-c", _READY_CHECK])
            try:
                result = self._run(argv, None, timeout)
            except CommandTimeout as e:
                said = tail(e.stderr)
                raise ExecError(
                    f"{self.host}: `{shlex.join(self.prefix)}` did not reach the interpreter "
                    f"inside within {timeout:g}s (the container, pod or allocation may be "
                    f"stuck or queued){': ' + said if said else ''}",
                    tip=f"try it by hand: {shlex.join(self.prefix)} "
                    f"{shlex.quote(self.spec.python)} -V; raise --timeout if it is only slow",
                ) from e
            if result.returncode != 0 or READY not in result.stdout.decode("utf-8", "replace"):
                raise self._failure(result)
            self._ready = True

    def _missing(self, said: str | None) -> ExecError:
        program = self.prefix[0]
        return ExecError(
            f"{self.host}: `{program}`, the program of hosts.{self.host}.exec, is not "
            f"installed{self._where()}{': ' + said if said else ''}",
            tip=f"install {os.path.basename(program)} there, or give its full path in exec",
        )

    def _failure(self, result: CommandResult) -> ExecError:
        """Which of the prefix's failures this is, from its exit code and error output."""
        said = result.stderr_tail(3) or result.stdout.decode("utf-8", "replace").strip()[-300:]
        low = said.lower()
        program = os.path.basename(self.prefix[0])
        prefix = shlex.join(self.prefix)
        if result.returncode == 127 and program in said and "not found" in low:
            return self._missing(said)  # a remote shell's "docker: command not found"
        python = self.spec.python
        if python in said and any(w in low for w in ("no such file", "not found", "denied")):
            return ExecError(
                f"{self.host}: python {python!r} cannot be run inside `{prefix}`: {said}",
                tip=f"set hosts.{self.host}.python to the interpreter inside "
                f"(e.g. check with `{prefix} ls -l {shlex.quote(python)}`)",
            )
        if any(w in low for w in _DENIED):
            return ExecError(
                f"{self.host}: permission denied running `{prefix}`{self._where()}: {said}",
                tip="the user envsync runs as needs the right to exec there "
                "(docker group, Kubernetes RBAC for pods/exec, a Slurm account)",
            )
        if any(w in low for w in _GONE):
            return ExecError(
                f"{self.host}: the container, pod or node of `{prefix}` is not running or "
                f"does not exist: {said}",
                tip=f"start it, or fix hosts.{self.host}.exec",
            )
        return ExecError(
            f"{self.host}: `{prefix}` could not run the interpreter inside "
            f"(exit code {result.returncode}): {said or 'no output'}",
            tip=f"try it by hand: {prefix} {shlex.quote(python)} -V",
        )
