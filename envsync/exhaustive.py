"""`assert_never` for Python 3.10 (typing has it from 3.11): the last case of every match
over a union of kinds (fixes, steps), so that a kind added to the union and not handled
is a type error under mypy, and an AssertionError if it ever runs."""

from __future__ import annotations

from typing import NoReturn


def assert_never(value: NoReturn) -> NoReturn:
    raise AssertionError(f"a kind no case handles: {type(value).__name__}")
