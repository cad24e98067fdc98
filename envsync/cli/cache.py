"""`envsync cache info|prune|clear`: envsync's caches on this machine, in the spirit of
`pip cache` and `uv cache` (envsync/collect/caches.py holds the stage)."""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, Literal

from envsync.cli.ranges import megabytes
from envsync.exitcodes import ExitCode

if TYPE_CHECKING:
    from envsync.cli.options import Command, Invocation
    from envsync.collect.caches import CacheArea
    from envsync.sources.session import Session

Action = Literal["info", "prune", "clear"]
ACTIONS: tuple[Action, ...] = ("info", "prune", "clear")


@dataclass(frozen=True, slots=True, kw_only=True)
class CacheOptions:
    action: Action
    format: Literal["table", "json"] = "table"
    max_size_mb: float | None = None


def add_command(sub: Any, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "cache",
        parents=[common],
        help="show, prune or clear envsync's caches on this machine (sizes, entries, where)",
    )
    p.add_argument(
        "action",
        choices=ACTIONS,
        help="info: what each cache holds; prune: each under its cap (least recently used "
        "first); clear: remove them (recorded states are kept)",
    )
    p.add_argument("--format", choices=("table", "json"), default="table", help="default: table")
    p.add_argument(
        "--max-size",
        type=megabytes,
        metavar="MB",
        help="prune: to this size in MB, each cache (default: its cap)",
    )
    p.set_defaults(build=partial(build, command=cmd_cache))


def build(args: argparse.Namespace, command: Command[CacheOptions]) -> Invocation:
    from envsync.cli.options import Invocation, SessionOptions

    options = CacheOptions(action=args.action, format=args.format, max_size_mb=args.max_size)
    return Invocation(run=partial(command, options), session=SessionOptions(quiet=args.quiet))


def _mb(size: int) -> str:
    return f"{size / (1 << 20):.1f} MB"


def render(areas: tuple[CacheArea, ...], fmt: str) -> str:
    if fmt == "json":
        data = {
            "schema_version": 1,
            "caches": [
                {
                    "name": a.name,
                    "path": a.path,
                    "entries": a.entries,
                    "bytes": a.bytes,
                    "cap_bytes": a.cap_bytes,
                    "kinds": [{"kind": k, "entries": n, "bytes": b} for k, n, b in a.kinds],
                }
                for a in areas
            ],
        }
        return json.dumps(data, indent=2) + "\n"
    lines = []
    for a in areas:
        lines.append(
            f"{a.name}: {a.path}: {a.entries} entries, {_mb(a.bytes)} of {_mb(a.cap_bytes)}"
        )
        lines += [f"  {k}: {n} entries, {_mb(b)}" for k, n, b in a.kinds]
    return "\n".join(lines) + "\n"


def cmd_cache(options: CacheOptions, session: Session) -> ExitCode:
    from envsync.cli.output import emit
    from envsync.collect import caches

    if options.action == "prune":
        limit = None if options.max_size_mb is None else int(options.max_size_mb * (1 << 20))
        received, host = caches.prune(limit)
        session.note(f"pruned {_mb(received)} from received/, {_mb(host)} from the host caches")
    elif options.action == "clear":
        session.note(f"cleared {_mb(caches.clear())} (recorded states are kept)")
    emit(render(caches.areas(), options.format), None)
    return ExitCode.OK
