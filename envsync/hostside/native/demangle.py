"""C++ symbol names made readable: c++filt's words when the host has it, else a best effort.

The best effort reads only what a finding needs from an Itanium name: its qualified name
(`_ZN3c1010TensorImpl4sizeEl` -> `c10::TensorImpl::size(...)`); whatever it cannot read
keeps the mangled name.
"""

from __future__ import annotations

import dataclasses
import shutil
import subprocess

from .verdicts import Fails, UndefinedSymbol

TYPE_CHECKING = False  # typing costs milliseconds on a host: for the checker only
if TYPE_CHECKING:
    from collections.abc import Sequence

    from .verdicts import Load

CXXFILT_TIMEOUT = 20
_SPECIAL = {"C1": None, "C2": None, "C3": None, "D0": "~", "D1": "~", "D2": "~"}
_STD = {"St": ["std"], "Sa": ["std", "allocator"], "Sb": ["std", "basic_string"]}


def demangle(names: Sequence[str], cxxfilt: str | None = "c++filt") -> dict[str, str]:
    """{mangled: readable} for the C++ names among `names` (c++filt when found on PATH)."""
    mangled = sorted({n for n in names if n.startswith("_Z")})
    if not mangled:
        return {}
    tool = shutil.which(cxxfilt) if cxxfilt else None
    told = _cxxfilt(tool, mangled) if tool else None
    if told is not None:
        return told
    out = {}
    for name in mangled:
        readable = best_effort(name)
        if readable is not None:
            out[name] = readable
    return out


def _cxxfilt(tool: str, names: list[str]) -> dict[str, str] | None:
    """One c++filt run for all names (on stdin: names are data, never arguments)."""
    try:
        proc = subprocess.run(
            [tool],
            input="\n".join(names) + "\n",
            capture_output=True,
            text=True,
            timeout=CXXFILT_TIMEOUT,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    lines = proc.stdout.splitlines()
    if proc.returncode != 0 or len(lines) != len(names):
        return None
    return {name: line for name, line in zip(names, lines) if line != name}


def best_effort(name: str) -> str | None:
    """The qualified name of an Itanium-mangled function or object, "(...)" when it takes
    arguments; None when the name is beyond this reader."""
    if not name.startswith("_Z"):
        return None
    text, i = name[2:], 0
    if text.startswith("N"):
        parts, i = _nested(text, 1)
    else:
        parts, i = _unqualified(text, 0)
    if parts is None:
        return None
    return "::".join(parts) + ("(...)" if i < len(text) else "")


def _nested(text: str, i: int) -> tuple[list[str] | None, int]:
    while i < len(text) and text[i] in "rVKRO":  # cv- and ref-qualifiers of a method
        i += 1
    parts: list[str] = []
    while i < len(text) and text[i] != "E":
        if text[i : i + 2] in _STD:
            parts += _STD[text[i : i + 2]]
            i += 2
        elif text[i : i + 2] in _SPECIAL and parts:
            prefix = _SPECIAL[text[i : i + 2]]
            parts.append(parts[-1] if prefix is None else prefix + parts[-1])
            i += 2
        elif text[i].isdigit():
            part, i = _source_name(text, i)
            if part is None:
                return None, i
            parts.append(part)
        else:
            return None, i  # templates, substitutions, operators: beyond this reader
    return (parts or None), i + 1


def _unqualified(text: str, i: int) -> tuple[list[str] | None, int]:
    prefix: list[str] = []
    if text.startswith("St", i):
        prefix, i = ["std"], i + 2
    part, i = _source_name(text, i)
    return (None if part is None else [*prefix, part]), i


def _source_name(text: str, i: int) -> tuple[str | None, int]:
    start = i
    while i < len(text) and text[i].isdigit():
        i += 1
    if i == start:
        return None, i
    length = int(text[start:i])
    if length <= 0 or i + length > len(text):
        return None, i
    return text[i : i + length], i + length


def with_demangled(load: Load, cxxfilt: str | None = "c++filt") -> Load:
    """The load with each undefined symbol's readable name filled in (one c++filt run)."""
    verdict = load.verdict
    if not isinstance(verdict, Fails):
        return load
    symbols = [r.symbol for r in verdict.reasons if isinstance(r, UndefinedSymbol)]
    readable = demangle(symbols, cxxfilt)
    if not readable:
        return load
    reasons = tuple(
        dataclasses.replace(r, demangled=readable.get(r.symbol))
        if isinstance(r, UndefinedSymbol)
        else r
        for r in verdict.reasons
    )
    return dataclasses.replace(load, verdict=Fails(reasons=reasons))
