"""Hosts folded into classes: hosts whose environments are identical are one class.

Identical means the same digest of what the diff compares (diff.view: distributions and
versions, watched files' hashes, interpreter, torch, GPU, system and NCCL facts, recorded
variables) and of what classifying reads besides (the startup graph's modules by content,
the service flags envsync keeps, a crash it watched). A fleet is then diffed once per class,
and reported as node sets (`gpu[001-087]: as the reference`), not one column per host.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from envsync.findings import Report
from envsync.model import Distribution, ModuleFacts, Snapshot

DIGEST_LENGTH = 16  # hex digits: 64 bits, no collision among any fleet's classes


# The digests of watched distributions' files, by the files themselves: a fleet's hosts
# hold the same few sets of thousands of files, each set filtered and hashed once.
_FILES: dict[tuple[bool, frozenset[tuple[str, str]]], str] = {}
_FILES_KEPT = 256


def _files_digest(dist: Distribution) -> str:
    from envsync.diff import comparable_files

    assert dist.files is not None
    key = (dist.source is not None, frozenset(dist.files.items()))
    found = _FILES.get(key)
    if found is None:
        text = json.dumps(comparable_files(dist), sort_keys=True, separators=(",", ":"))
        found = hashlib.sha256(text.encode()).hexdigest()
        if len(_FILES) >= _FILES_KEPT:
            _FILES.pop(next(iter(_FILES)))
        _FILES[key] = found
    return found


def module_rows(modules: Mapping[str, ModuleFacts]) -> dict[str, list[Any]]:
    """What a class key reads of each module: its kind, content digest and error. A graph
    kept undecoded answers from its raw data (decoding 6,000 modules to read three fields
    was most of a warm `check --lock`)."""
    rows = getattr(modules, "rows", None)
    if callable(rows):
        found: dict[str, list[Any]] = rows()
        return dict(sorted(found.items()))
    return {name: [f.kind, f.sha256, f.error] for name, f in sorted(modules.items())}


def environment_digest(snapshot: Snapshot) -> str:
    """The digest of a host's environment: equal for hosts a diff cannot tell apart (its
    name, paths and when it was collected do not count)."""
    from envsync.diff import view

    watched = {d.name: _files_digest(d) for d in snapshot.distributions if d.files is not None}
    bare = replace(
        snapshot,
        distributions=tuple(
            replace(d, files=None) if d.files is not None else d for d in snapshot.distributions
        ),
    )
    graph = snapshot.startup
    data: dict[str, Any] = {
        "view": view(bare),
        "files": watched,
        "startup": None
        if graph is None
        else {
            "roots": list(graph.roots),
            "resolved": dict(graph.resolved),
            "modules": module_rows(graph.modules),
        },
        "service_flags": dict(snapshot.service_flags or {}),
        "crash": snapshot.crash.exception if snapshot.crash else None,
    }
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:DIGEST_LENGTH]


@dataclass(frozen=True, slots=True, kw_only=True)
class HostClass:
    """Hosts with one environment (and one service): their report is diffed once."""

    key: str  # the environment's digest (and the service's, where hosts run others)
    hosts: tuple[str, ...]
    report: Report  # the first host's; every other host's is the same, with its name

    @property
    def nodeset(self) -> str:
        from envsync.nodeset import fold

        return fold(self.hosts)

    @property
    def digest(self) -> str:
        return self.key.partition(":")[0]


def fold_reports(
    reports: Sequence[Report], keys: Iterable[str] | None = None
) -> tuple[HostClass, ...]:
    """Reports grouped by their hosts' keys (in the order first seen); without keys, hosts
    whose reports say the same (findings and notes) are one class."""
    chosen = list(keys) if keys is not None else [_report_key(r) for r in reports]
    groups: dict[str, list[Report]] = {}
    for key, report in zip(chosen, reports, strict=True):
        groups.setdefault(key, []).append(report)
    return tuple(
        HostClass(key=key, hosts=tuple(r.target for r in members), report=members[0])
        for key, members in groups.items()
    )


def _report_key(report: Report) -> str:
    from envsync.codec import to_data

    data = to_data(report)
    data.pop("target", None)
    text = json.dumps(data, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:DIGEST_LENGTH]
