"""Reachability by demand on a host (envsync/hostside/reach.py): how surely startup runs
each of some modules, and by which path, read from the modules up.

The whole walk (the probe's startup graph) answers the same questions from the roots
down; tests/collect/test_reach.py holds the two to the same answers.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from envsync.collect import ProbeOptions
from envsync.collect.ask import ask
from envsync.errors import DecodeError
from envsync.hostside import protocol
from envsync.model.inventory import HostSpec
from envsync.model.vocab import Context
from envsync.runner import Runner

MARKER = protocol.REACH_MARKER


@dataclass(frozen=True, slots=True, kw_only=True)
class Reached:
    """How surely startup runs a module: `context` (None: no path), a path of that
    context from a root's module to it, or `wide`: the whole walk's question (why)."""

    module: str
    context: Context | None = None
    path: tuple[str, ...] = ()
    wide: str | None = None
    absent: bool = False  # missing here: `importers`, the modules that import it
    importers: tuple[Reached, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class Answers:
    reached: dict[str, Reached]
    parsed: int  # files parsed now
    cached: int  # files whose facts were kept
    read: int  # files the text search read
    figures: dict[str, float]  # the host's own: seconds, searches, seconds searching


def reach(
    host: HostSpec,
    runner: Runner,
    options: ProbeOptions,
    roots: Sequence[tuple[str, Context]],
    modules: Sequence[str],
    *,
    governed: Sequence[str] = (),
    wide: int | None = None,
    budget: int | None = None,
    grep: bool = True,
) -> Answers:
    """Ask `host` how surely startup, from `roots` ((module, context): the launch flags'
    roots, in order; site's are the host's own), runs each of `modules`."""
    payload = {
        "roots": [[module, context] for module, context in roots],
        "launch": list(options.roots),
        "internal": list(options.internal),
        "workdir": options.workdir,
        "isolated": options.isolated,
        "main": options.main,
        "governed": sorted(governed),
        "modules": list(modules),
        "wide": wide,
        "budget": budget,
        "grep": grep,
    }
    answer = ask(host, runner, options, protocol.REACH, payload, MARKER, "the reachability query")
    try:
        data = json.loads(answer)
        reached = {name: _reached(name, got) for name, got in data["answers"].items()}
        figures = {k: float(data[k]) for k in ("duration_s", "searches", "search_s") if k in data}
        return Answers(
            reached=reached,
            parsed=data["parsed"],
            cached=data["cached"],
            read=data["read"],
            figures=figures,
        )
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise DecodeError(f"{host.name}: the reachability answer is not readable: {e}") from e


def _reached(name: str, got: dict[str, Any]) -> Reached:
    return Reached(
        module=name,
        context=got.get("context"),
        path=tuple(str(m) for m in got.get("path") or ()),
        wide=got.get("wide"),
        absent=bool(got.get("absent")),
        importers=tuple(_reached(m, r) for m, r in sorted((got.get("importers") or {}).items())),
    )
