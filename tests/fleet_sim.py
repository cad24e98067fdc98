"""A simulated fleet for the fold tests and benchmarks/fleet.py: N hosts in K classes.

The hosts' snapshots are one real snapshot (a file, or one just taken) with K variants
(class 0 as the reference; class k with one distribution at another version and one
extra), handed out through a Session engine that serves them from memory: the seam
`--engine` plugs into, so that compare folds, diffs and reports them as it would hosts.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace

from envsync.collect import ProbeOptions
from envsync.errors import CollectError
from envsync.model.environment import Distribution, Snapshot
from envsync.runner import Runners
from envsync.sources.inventory import HostSpec, Inventory
from envsync.sources.session import Session


def variant(base: Snapshot, k: int) -> Snapshot:
    """Class k of the fleet: 0 is the base; others differ in two distributions."""
    if k == 0:
        return base
    dists = list(base.distributions)
    i = (k - 1) % len(dists)
    dists[i] = replace(dists[i], version=f"{dists[i].version}.post{k}")
    dists.append(Distribution(name=f"extra-{k}", display_name=f"extra-{k}", version="1.0"))
    return replace(base, distributions=tuple(dists))


def sizes(hosts: int, classes: int) -> list[int]:
    """Most hosts as the reference, the rest in classes of about 1% each."""
    small = max(1, hosts // 100)
    rest = [small] * (classes - 1)
    return [hosts - sum(rest), *rest]


def fleet(base: Snapshot, hosts: int = 1000, classes: int = 12) -> dict[str, Snapshot]:
    """{host name: snapshot}: gpu0001... in `classes` classes (sizes())."""
    out: dict[str, Snapshot] = {}
    n = 0
    for k, size in enumerate(sizes(hosts, classes)):
        snap = variant(base, k)
        for _ in range(size):
            n += 1
            name = f"gpu{n:04d}"
            out[name] = replace(snap, host=name)
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryEngine:
    """Hands out the simulated snapshots as the hosts' answers."""

    snapshots: dict[str, Snapshot]

    def collect(
        self, requests: Sequence[tuple[int, HostSpec, ProbeOptions]]
    ) -> Iterator[tuple[int, Snapshot | CollectError]]:
        for i, spec, _ in requests:
            yield i, self.snapshots[spec.name]


def session(snapshots: dict[str, Snapshot], python: str = "/usr/bin/python3") -> Session:
    hosts = {name: HostSpec(name=name, python=python) for name in snapshots}
    return Session(
        inventory=Inventory(path=None, hosts=hosts),
        runners=Runners(),
        engine=MemoryEngine(snapshots=snapshots),
    )
