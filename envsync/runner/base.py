"""The Runner seam's pieces every runner shares: the result, the protocol, output caps, stopping."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from envsync.documents import MAX_DOCUMENT_BYTES

if TYPE_CHECKING:
    from envsync.errors import OutputTooLarge

CONNECT_TIMEOUT = 10.0  # seconds to connect and finish the SSH handshake
# Once a command has exited: how long what is left of its output may take to arrive (a
# grandchild that keeps its pipes open must not hold the command's result back).
EXIT_GRACE = 0.5
# What envsync reads of a command's output: the last MB of its stderr (only its tail is
# ever shown), and where the output is a document (a probe's, in a `capped()` block) its
# stdout up to the largest document envsync reads (documents.MAX_DOCUMENT_BYTES; past it
# the command is ended, OutputTooLarge): a host that prints without end (a .pth line at
# startup) costs a bounded memory, -j hosts at once. A transfer's archive (an apply copying
# a distribution from the reference) is not a document, and has no such bound.
MAX_STDOUT = MAX_DOCUMENT_BYTES
STDERR_KEPT = 1 << 20
_CAPPED = threading.local()


@contextlib.contextmanager
def capped(limit: int = MAX_STDOUT) -> Iterator[None]:
    """Commands this thread runs in the block write a document: at most `limit` bytes."""
    before = getattr(_CAPPED, "limit", None)
    _CAPPED.limit = limit
    try:
        yield
    finally:
        _CAPPED.limit = before


def stdout_cap(own: int | None) -> int | None:
    """The bound on a command's stdout: the runner's own when it was made with one, else
    the block's it runs in (capped()), else none."""
    return own if own is not None else getattr(_CAPPED, "limit", None)


def too_much(host: str, argv0: str, limit: int) -> OutputTooLarge:
    from envsync.errors import OutputTooLarge

    return OutputTooLarge(
        f"{host}: {argv0} wrote more than {limit >> 20} MB on stdout; it was ended",
        tip="does something print at the interpreter's startup there (a .pth file, "
        "sitecustomize)? run it by hand on the host",
    )


def keep_tail(err: bytearray) -> None:
    """Drop all but the last STDERR_KEPT bytes of a command's stderr (in place)."""
    if len(err) > 2 * STDERR_KEPT:
        del err[:-STDERR_KEPT]


# Set when the process is ending (SIGTERM): every command run in a `stoppable()` block (a
# collection: it changes nothing), in any thread, is ended at its runner's next poll (50 ms
# here, 0.5 s over SSH), and none starts there, so that the threads collecting hosts end
# too; a command outside one (an apply, its lock's holder) runs on to its own end.
STOPPING = threading.Event()
_STOPPABLE = threading.local()


def stop_all() -> None:
    """End every stoppable command now (their runners raise CommandStopped)."""
    STOPPING.set()


@contextlib.contextmanager
def stoppable() -> Iterator[None]:
    """Commands this thread runs in the block may be ended by stop_all()."""
    before = getattr(_STOPPABLE, "on", False)
    _STOPPABLE.on = True
    try:
        yield
    finally:
        _STOPPABLE.on = before


def stopping() -> bool:
    """Whether this thread's command is to end now."""
    return STOPPING.is_set() and bool(getattr(_STOPPABLE, "on", False))


def check_stopping(host: str) -> None:
    if stopping():
        from envsync.errors import CommandStopped

        raise CommandStopped(f"{host}: stopped: envsync is ending")


def tail(stderr: bytes, lines: int = 5) -> str:
    """The last lines of a command's error output, on one line."""
    text = stderr.decode("utf-8", "replace").strip().splitlines()
    return " | ".join(line.strip() for line in text[-lines:] if line.strip())


@dataclass(frozen=True, slots=True, kw_only=True)
class CommandResult:
    argv: tuple[str, ...]
    returncode: int
    stdout: bytes
    stderr: bytes
    duration_s: float

    def stderr_tail(self, lines: int = 5) -> str:
        return tail(self.stderr, lines)


class Runner(Protocol):
    """Runs one command on one host; never through a shell on the envsync side."""

    host: str

    def run(
        self, argv: Sequence[str], *, input: bytes | None = None, timeout: float
    ) -> CommandResult: ...
