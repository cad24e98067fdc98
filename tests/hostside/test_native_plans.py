"""The native layer's plan of what startup loads is made again only when the graph's course
or a file it read changed: an edit the graph is patched for keeps it, and so does a state
the environment comes back to.

On a copy of the real rich package and a small service (as test_graphpatch.py), with
the host side in this process; `Planner.run` is counted.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from envsync.hostside.caches import graphpatch, graphstates, store
from envsync.hostside.caches.graphcache import cached_startup_graph
from envsync.hostside.graph.finder import ModuleFinder
from envsync.hostside.native import scan as nativescan
from tests.helpers import put_back, service_site

pytestmark = pytest.mark.quick

OPTIONS = {"roots": ["svc.main"], "internal": ["svc"]}


@pytest.fixture
def site(tmp_path: Path) -> Path:
    return service_site(tmp_path / "site-packages", "import rich.console\n\nfrom svc import util\n")


@pytest.fixture
def plans(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    count = [0]
    real = nativescan.Planner.run

    def counted(self: nativescan.Planner, roots: list[str]) -> None:
        count[0] += 1
        real(self, roots)

    monkeypatch.setattr(nativescan.Planner, "run", counted)
    yield count


def _plan(sp: Path, base: Path, kept: dict[str, Any]) -> list[Any]:
    store._OPEN.clear()
    finder = ModuleFinder([str(sp)], {})
    graph = cached_startup_graph(OPTIONS, finder, str(base), "t", {})
    return nativescan.planned_loads(graph, finder, None, [], str(base), "t", kept)


def test_a_plan_outlives_a_patch_and_comes_back_with_a_past_state(
    site: Path, tmp_path: Path, plans: list[int]
) -> None:
    base = tmp_path / "cache"
    kept: dict[str, Any] = {}
    first = _plan(site, base, kept)  # walked and planned, both kept
    assert plans[0] == 1
    assert _plan(site, base, kept) == first and plans[0] == 1  # warm
    util = site / "svc" / "util.py"
    original = util.read_text()
    put_back(util, (original + "\n# a local patch\n").encode(), 1)  # the same course: patched
    assert _plan(site, base, kept) == first
    assert graphpatch.PATCHED == ["svc.util"] and plans[0] == 1
    put_back(util, b"import json\n", 2)  # another course: walked, planned again
    _plan(site, base, kept)
    assert plans[0] == 2
    put_back(util, original.encode(), 3)  # back: the first state, and its plan
    assert _plan(site, base, kept) == first
    assert graphstates.TAKEN and plans[0] == 2
