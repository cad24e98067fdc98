"""Calls made at import, followed on a host (envsync/hostside/follow.py): which imports in
functions startup runs after all, how surely, and through which calls."""

from __future__ import annotations

import json
from dataclasses import dataclass

from envsync.collect import ProbeOptions
from envsync.collect.ask import ask
from envsync.errors import DecodeError
from envsync.hostside import protocol
from envsync.hostside.shared import CONTEXTS
from envsync.model.inventory import HostSpec
from envsync.model.vocab import Context
from envsync.runner import Runner

MARKER = protocol.FOLLOW_MARKER


@dataclass(frozen=True, slots=True, kw_only=True)
class Question:
    """Which imports to follow calls toward ((module, line)), through which modules (each
    with the context startup runs it in)."""

    targets: tuple[tuple[str, int], ...]
    allowed: tuple[tuple[str, Context], ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class Called:
    """An import that calls made at import run: how surely, and the calls (file, line,
    statement), from a module's statement to the import."""

    context: Context
    chain: tuple[tuple[str, int, str], ...]


def follow_calls(
    host: HostSpec, runner: Runner, options: ProbeOptions, asked: Question
) -> dict[tuple[str, int], Called]:
    """Ask `host` which of `asked`'s imports the calls made at import run, and how."""
    payload = {
        "launch": list(options.roots),
        "internal": list(options.internal),
        "workdir": options.workdir,
        "isolated": options.isolated,
        "main": options.main,
        "allowed": [list(pair) for pair in asked.allowed],
        "targets": [list(pair) for pair in asked.targets],
    }
    answer = ask(
        host, runner, options, protocol.FOLLOW, payload, MARKER, "the calls made at import"
    )
    try:
        out: dict[tuple[str, int], Called] = {}
        for key, got in json.loads(answer)["answers"].items():
            module, _, line = str(key).rpartition(":")
            context = got["context"]
            if context not in CONTEXTS:
                raise ValueError(f"no such context: {context!r}")
            chain = tuple((str(f), int(n), str(s)) for f, n, s in got["chain"])
            if not chain:
                raise ValueError(f"{key}: no calls")
            out[(module, int(line))] = Called(context=context, chain=chain)
        return out
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        why = f"{host.name}: the answer on calls made at import is not readable: {e}"
        raise DecodeError(why) from e
