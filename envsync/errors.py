"""The envsync error hierarchy: one root, one base per stage, each with its exit code.

Every error envsync raises is defined here (the host-side programs keep their own, which
cross the seam as marked lines of output).
"""

from __future__ import annotations

from envsync.exitcodes import ExitCode


class EnvsyncError(Exception):
    """Root of every error envsync reports; `str()` is the one line the user sees."""

    exit_code: ExitCode = ExitCode.USAGE

    def __init__(self, message: str, *, tip: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.tip = tip

    def __str__(self) -> str:
        line = self.message if not self.tip else f"{self.message} (Tip: {self.tip})"
        # One line whatever a name in it holds (a host named "a\nb" in a crafted file).
        return line.replace("\r", "\\r").replace("\n", "\\n")


class InputError(EnvsyncError):
    """Bad input from the user: arguments, files, paths."""


class InventoryError(InputError):
    """The inventory file is missing, malformed or inconsistent."""


class RulesError(InputError):
    """A rule pack cannot be read or is malformed."""


class SnapshotError(InputError):
    """A snapshot file cannot be read or is not an envsync snapshot."""


class LockError(InputError):
    """A lock file cannot be read, is corrupt, or has an unsupported version."""


class StateError(InputError):
    """A recorded state of a host (`HOST@good`, `HOST@-1`, `HOST@TIME`) that cannot be
    named or read: an unknown host, a malformed suffix, no such state, a damaged file."""


class RequirementsError(InputError):
    """A requirements file cannot serve as a reference environment."""


class OutputError(InputError):
    """An output file cannot be written."""


class CollectError(EnvsyncError):
    """Collecting facts from a host failed."""

    exit_code = ExitCode.COLLECT


class RunnerError(CollectError):
    """A command could not be run on a host (not found, timed out, transport failure)."""


class CommandTimeout(RunnerError):
    """The command did not finish in time (`stderr`: what it wrote before it was ended)."""

    def __init__(self, message: str, *, tip: str | None = None, stderr: bytes = b"") -> None:
        super().__init__(message, tip=tip)
        self.stderr = stderr


class OutputTooLarge(RunnerError):
    """The command wrote more on stdout than envsync reads (runner.MAX_STDOUT)."""


class CommandStopped(RunnerError):
    """envsync is ending (SIGTERM): the command was ended, or not started."""


class CommandNotFound(RunnerError):
    """The program to run does not exist on the host."""


class HostKeyError(RunnerError):
    """The host's key is unknown, or differs from the known one."""


class SSHError(RunnerError):
    """The connection could not be made or was lost."""


class ExecError(RunnerError):
    """The exec prefix cannot run commands inside (missing, not running, denied, hung)."""


class PlanError(EnvsyncError):
    """A plan that cannot run on the target: refused before anything changes."""

    exit_code = ExitCode.APPLY


class StalePlan(EnvsyncError):
    """A saved plan that no longer fits the target (it changed since), or names paths
    outside its packages: refused before anything changes."""


class AgentError(EnvsyncError):
    """The host agent failed: `kind` says how (its own word, or "crashed"); the caller
    decides what that means for the user and which exit code it gets."""

    exit_code = ExitCode.APPLY

    def __init__(self, message: str, *, kind: str, tip: str | None = None) -> None:
        super().__init__(message, tip=tip)
        self.kind = kind


class ApplyError(EnvsyncError):
    """A step failed; what was done is rolled back."""

    exit_code = ExitCode.APPLY


class RollbackError(EnvsyncError):
    """Restoring a backup failed, or there is none."""

    exit_code = ExitCode.APPLY


class TargetLocked(EnvsyncError):
    """Another envsync is changing this target."""

    exit_code = ExitCode.LOCKED


class DeployError(EnvsyncError):
    """The service could not be (re)started, stopped or watched."""

    exit_code = ExitCode.SMOKE


class DecodeError(ValueError):
    """Plain data that is not the dataclass it should be; the message starts with the
    dotted path of the offending value (`plan.steps[2].requirements: ...`). Each reader
    wraps it in its own stage's error, naming the file."""
