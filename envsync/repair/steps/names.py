"""What a plan may name: a distribution by its PEP 508 name, a requirement as a plain
`NAME==VERSION`; nothing an installer could read as an option, a path, a URL or a second
requirement.

A plan is untrusted data once it is saved: every kind of step checks its names with these
before anything runs.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from packaging.version import InvalidVersion, Version

# PEP 508's name, PEP 440's characters: nothing an installer could read as an option, a
# path, a URL or a second requirement.
_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?")
_VERSION = re.compile(r"[A-Za-z0-9][A-Za-z0-9.+!_-]*")


def name_problem(name: str) -> str | None:
    """Why `name` is not a distribution name an installer may be handed (None: it is)."""
    return None if _NAME.fullmatch(name) else "not a valid distribution name (PEP 508)"


def requirement_problem(text: str) -> str | None:
    """Why `text` is not a plain `NAME==VERSION` an installer may be handed (None: it is):
    no option, path, URL, marker or second requirement can hide in one that is."""
    name, sep, version = text.partition("==")
    if not sep:
        return "not NAME==VERSION"
    why = name_problem(name)
    if why:
        return why
    if not _VERSION.fullmatch(version):
        return "not a valid version (PEP 440)"
    try:
        Version(version)
    except InvalidVersion:
        return "not a valid version (PEP 440)"
    return None


def names_problems(i: int, kind: str, names: Iterable[str]) -> list[str]:
    """What is wrong with the distributions step `i` (of `kind`) names, one line each."""
    problems = []
    for name in names:
        why = name_problem(name)
        if why:
            problems.append(f"step {i} ({kind}) names the distribution {name!r}: {why}")
    return problems
