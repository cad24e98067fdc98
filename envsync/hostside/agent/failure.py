"""The failures the agent foresees: a kind its caller can act on, and a message."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import NoReturn


class Failure(Exception):
    """A failure the agent foresees (nothing it did is left half-done)."""

    def __init__(self, kind: str, message: str) -> None:
        Exception.__init__(self, message)
        self.kind = kind
        self.message = message


def refuse(what: object, why: str) -> NoReturn:
    raise Failure("unsafe-path", f"refusing {what!r}: {why}; nothing was changed")
