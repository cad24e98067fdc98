"""Hosts folded into classes: hosts whose environments are identical are one class.

Identical means the same environment (identity.environment: what the diff compares and
what classifying reads besides, the startup graph's modules by content, the service flags
envsync keeps, a crash it watched) and the same service (compare.class_key). A fleet is
then diffed once per class, and reported as node sets (`gpu[001-087]: as the reference`),
not one column per host.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from envsync.collect.identity import DIGEST_LENGTH
from envsync.model.findings import Report


@dataclass(frozen=True, slots=True, kw_only=True)
class HostClass:
    """Hosts with one environment (and one service): their report is diffed once."""

    key: str  # the environment's digest (and the service's, where hosts run others)
    hosts: tuple[str, ...]
    report: Report  # the first host's; every other host's is the same, with its name

    @property
    def nodeset(self) -> str:
        from envsync.model.nodeset import fold

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
    from envsync.model.codec import to_data

    data = to_data(report)
    data.pop("target", None)
    text = json.dumps(data, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:DIGEST_LENGTH]
