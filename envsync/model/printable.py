"""Strings from a host made safe to show: control characters become visible escapes.

A package's METADATA, a file name, a service's log or a host name can carry an escape
sequence (`\\x1b[8m` hides the rest of a line on a terminal), a carriage return that
overwrites what came before, or a bidirectional override that reorders it. Every string
that reaches a terminal, Markdown, HTML or XML passes through `printable` first (the CLI's
printing, every report format but JSON, which escapes them itself): the one place that
says which characters are shown as `\\xNN`.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Any, TypeVar

T = TypeVar("T")

# C0 controls, DEL, C1 controls, and the invisible marks that reorder or hide text.
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff]")


def _escape(char: str, keep: str) -> str:
    if char in keep:
        return char
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str, keep: str = "\n\t") -> str:
    """`text` with every control character but those in `keep` shown as an escape."""
    if not _UNSAFE.search(text):
        return text
    return _UNSAFE.sub(lambda m: _escape(m.group(), keep), text)


def printable_data(value: T, keep: str = "\n\t") -> T:
    """Every string inside `value` (dataclasses, tuples, lists, mappings) made printable."""
    return _walk(value, keep)  # type: ignore[no-any-return]


def _walk(value: Any, keep: str) -> Any:
    if isinstance(value, str):
        return printable(value, keep)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        changes = {
            f.name: _walk(getattr(value, f.name), keep) for f in dataclasses.fields(value) if f.init
        }
        return dataclasses.replace(value, **changes)
    if isinstance(value, tuple):
        return tuple(_walk(v, keep) for v in value)
    if isinstance(value, list):
        return [_walk(v, keep) for v in value]
    if isinstance(value, Mapping):
        return {_walk(k, keep): _walk(v, keep) for k, v in value.items()}
    return value
