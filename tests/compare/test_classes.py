"""Hosts folded into classes by the digest of what the diff compares; each class diffed once."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from envsync.collect.identity import environment as environment_digest
from envsync.collect.importcheck import NO_IMPORT_CHECK
from envsync.compare import targets as compare
from envsync.model.codec import from_data
from envsync.model.environment import Crash, Snapshot, System
from envsync.report import render_fleet
from tests import fleet_sim

DATA = Path(__file__).resolve().parent.parent / "data" / "snapshots" / "ct129.json"


@pytest.fixture(scope="module")
def base() -> Snapshot:
    return from_data(Snapshot, json.loads(DATA.read_text()))


def test_the_digest_ignores_the_host_and_the_act_of_collection(base: Snapshot) -> None:
    digest = environment_digest(base)
    assert len(digest) == 16
    assert environment_digest(replace(base, host="other", collected_at="x", duration_s=9)) == digest
    assert isinstance(base.system, System)
    assert environment_digest(replace(base, system=replace(base.system, hostname="h2"))) == digest


@pytest.mark.parametrize(
    "change",
    [
        lambda s: fleet_sim.variant(s, 3),
        lambda s: replace(s, env={"NCCL_SOCKET_IFNAME": "eth1"}),
        lambda s: replace(s, service_flags={"--grammar-backend": "none"}),
        lambda s: replace(s, crash=Crash(exception="ImportError: x")),
        lambda s: replace(s, system=replace(s.system, kernel="6.1.0")),
    ],
)
def test_what_the_diff_or_the_classifier_reads_makes_another_class(
    base: Snapshot, change: Callable[[Snapshot], Snapshot]
) -> None:
    assert environment_digest(change(base)) != environment_digest(base)


def test_a_thousand_hosts_in_twelve_classes_are_diffed_twelve_times(
    base: Snapshot, monkeypatch: pytest.MonkeyPatch
) -> None:
    snapshots = fleet_sim.fleet(base, 1000, 12)
    calls: list[str] = []
    real = compare.compare

    def counted(*args: Any, **kwargs: Any) -> object:
        calls.append(args[2].host)
        return real(*args, **kwargs)

    monkeypatch.setattr(compare, "compare", counted)
    started = time.perf_counter()
    with fleet_sim.session(snapshots) as session:
        among = compare.targets(session, list(snapshots))
        result = compare._compare_each(session, among, reference=base, import_check=NO_IMPORT_CHECK)
    took = time.perf_counter() - started
    assert len(calls) == 12 and len(result.reports) == 1000
    assert [len(c.hosts) for c in result.classes] == fleet_sim.sizes(1000, 12)
    assert result.classes[0].nodeset == "gpu[0001-0890]"
    assert result.reports[900].target == "gpu0901"  # each host's report carries its name
    page = render_fleet("html", result.reports, classes=result.classes)
    assert page.count("<tr data-order=") == 12
    table = render_fleet("table", result.reports, classes=result.classes, width=160)
    assert "1000 hosts in 12 classes against ct129" in table
    assert took < 60  # measured in benchmarks/fleet.py; here: not one diff per host
