"""Calls made at import, followed across modules (graph/follow.py): how surely startup
runs some imports that stand in functions, and through which calls.

Its one argument is a JSON object: {"launch": [...] (the roots as the probe's options
give them), "main", "workdir", "isolated", "internal", "allowed": [[MODULE, CONTEXT], ...]
(the modules whose code may lead there, each as surely as startup runs it), "targets":
[[MODULE, LINE], ...]}. The answer, on stdout's last line after the marker: {"answers":
{"MODULE:LINE": {"context", "chain": [[FILE, LINE, STATEMENT], ...]}}, "parsed", "runs",
"exhausted", "duration_s"}.
"""

from __future__ import annotations

import json
import sys
import time

from .facts.editable import editable_mapping
from .graph.finder import ModuleFinder
from .graph.follow import follow
from .graph.startup import GraphBuilder, builder
from .protocol import FOLLOW_MARKER
from .shared import CONTEXTS

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from .shared import Context


def answer(options: dict[str, Any], digest: str) -> dict[str, Any]:
    started = time.time()
    paths = [p for p in sys.path if p]
    finder = ModuleFinder(paths, editable_mapping(paths))
    launch = dict(options, roots=list(options.get("launch") or []))
    # the reader of the launch as the probe sets it up: its finder searches the
    # service's sys.path (a script's folder first), nothing else is read
    reader, _, _ = builder(GraphBuilder, launch, finder, None, digest)
    allowed: dict[str, Context] = {
        str(m): c for m, c in options.get("allowed") or [] if c in CONTEXTS
    }
    targets = [(str(m), int(line)) for m, line in options.get("targets") or []]
    out = follow(reader.finder, allowed, targets, reader.main, reader.runs)
    out["duration_s"] = round(time.time() - started, 3)
    return out


def main(args: list[str], digest: str, cache: str | None) -> int:
    options = json.loads(args[0]) if args else {}
    out = answer(options, digest)
    sys.stdout.write("\n" + FOLLOW_MARKER + json.dumps(out, sort_keys=True) + "\n")
    return 0
