"""The envsync error hierarchy: one root, one base per stage, each with its exit code."""

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


class SnapshotError(InputError):
    """A snapshot file cannot be read or is not an envsync snapshot."""


class LockError(InputError):
    """A lock file cannot be read, is corrupt, or has an unsupported version."""


class RequirementsError(InputError):
    """A requirements file cannot serve as a reference environment."""


class OutputError(InputError):
    """An output file cannot be written."""


class CollectError(EnvsyncError):
    """Collecting facts from a host failed."""

    exit_code = ExitCode.COLLECT


class RunnerError(CollectError):
    """A command could not be run on a host (not found, timed out, transport failure)."""


class PlanError(EnvsyncError):
    """A plan that cannot run on the target: refused before anything changes."""

    exit_code = ExitCode.APPLY
