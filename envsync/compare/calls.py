"""The calls made at import, asked about on a live target: where a module missing only
there is imported in a function, the host follows the calls startup makes toward it
(envsync/classify/calls.py says what to ask, envsync/collect/follow.py asks)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from envsync.classify.launched import Startup
from envsync.collect import ProbeOptions
from envsync.errors import CollectError, DecodeError
from envsync.model.environment import Snapshot
from envsync.model.inventory import HostSpec
from envsync.runner import Runner

if TYPE_CHECKING:
    from envsync.classify.graph import GraphIndex


def asked_calls(
    spec: HostSpec | None,
    options: ProbeOptions,
    snap: Snapshot,
    reference: Snapshot,
    run: Startup,
    runners: Callable[[HostSpec], Runner],
) -> tuple[Snapshot, bool, GraphIndex | None]:
    """The target with the imports in functions that calls made at import run, where a
    live target has any of a module missing only there (envsync/classify/calls.py);
    whether the question, if any, was answered (a report made without its answer is not
    kept); and the index of the graph it asked on, where that is the graph to classify
    (its modules decoded, its reachability computed: not again to classify)."""
    from envsync.classify.calls import might_call, missing_here, question, with_calls
    from envsync.classify.engine import plain_graph
    from envsync.classify.startup import Analysis
    from envsync.collect.follow import follow_calls

    graph = snap.startup
    if spec is None or graph is None or not run.entrypoint:
        return snap, True, None
    missing = missing_here(graph, reference.startup)
    if not might_call(graph, missing):
        return snap, True, None
    plain = plain_graph(graph)
    if plain is None:
        return snap, True, None
    snap = replace(snap, startup=plain)
    analysis = Analysis(plain, run, run.command)
    index = analysis.index
    asked = None
    if index is not None:
        asked = question(plain, index, analysis.reached, missing)
    if asked is None:
        return snap, True, index
    try:
        called = follow_calls(spec, runners(spec), options, asked)
    except (CollectError, DecodeError):
        return snap, False, index  # not answered: its imports stay "function"
    if not called:
        return snap, True, index
    return replace(snap, startup=with_calls(plain, called)), True, None
