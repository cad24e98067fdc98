"""A state the environment had is taken back by its files' content: no walk, no parse.

The host side runs in this process on a copy of the real rich package and a small service
that imports it (as in test_graphpatch.py). Files are put back as a rollback or a
reinstall writes them: new files of the old content, with other inodes and times, so
that no stat of the past state holds and only the content can tell. Each graph taken
back is compared, byte for byte, with the graph of that state as it was first built.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from envsync.hostside.caches import graphcache, graphfile, graphpatch, graphstates, store
from envsync.hostside.caches.graphcache import RawJSON, cached_startup_graph
from envsync.hostside.graph import startup
from envsync.hostside.graph.finder import ModuleFinder
from tests.helpers import OLD_NS, put_back, service_site, with_extension

pytestmark = pytest.mark.quick

OPTIONS = {"roots": ["svc.main"], "internal": ["svc"]}
SERVICE = "import json\nimport rich.console\n\nfrom svc import util\n"


@pytest.fixture
def site(tmp_path: Path) -> Path:
    return service_site(tmp_path / "site-packages", SERVICE)


@pytest.fixture
def walks(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """How many times the graph was walked (graphcache.startup_graph called)."""
    count = [0]
    real = startup.startup_graph

    def counted(*args: object, **kwargs: object) -> object:
        count[0] += 1
        return real(*args, **kwargs)  # type: ignore[arg-type]  # the real walk's own arguments, passed through

    monkeypatch.setattr(graphcache, "startup_graph", counted)
    yield count


def _graph(sp: Path, base: Path) -> RawJSON:
    store._OPEN.clear()  # a probe is a process of its own: no store kept from the last one
    graph = cached_startup_graph(OPTIONS, ModuleFinder([str(sp)], {}), str(base), "t", {})
    assert graph is not None
    return graph


def _pasts(base: Path) -> list[Path]:
    return sorted(base.glob("graph-*" + graphfile.PAST + "*"))


def _left(site: Path, base: Path) -> tuple[RawJSON, Path, bytes, RawJSON]:
    """The first state's graph, then the state left for another course (svc.util imports
    gamma, walked): the first graph, util.py, its first text, and the second graph."""
    first = _graph(site, base)
    util = site / "svc" / "util.py"
    original = util.read_bytes()
    put_back(util, b"import gamma\n", 1)
    return first, util, original, _graph(site, base)


def test_a_file_put_back_takes_the_graph_it_had_without_a_walk(
    site: Path, tmp_path: Path, walks: list[int]
) -> None:
    base = tmp_path / "cache"
    first, util, original, changed = _left(site, base)  # another course: walked
    assert walks[0] == 2 and changed.modules != first.modules
    assert len(_pasts(base)) == 1  # the first state, kept beside the graph file
    put_back(util, original, 2)
    back = _graph(site, base)
    assert graphstates.TAKEN and walks[0] == 2 and graphpatch.PATCHED == []
    assert back.modules == first.modules and json.loads(back.header)["parsed"] == 0
    assert back.path is not None  # the graph file again, its new stats kept:
    again = _graph(site, base)  # the next run only stats them
    assert graphstates.TAKEN == [] and again.path is not None and again.modules == first.modules
    assert walks[0] == 2
    # and the state just left is a past state in turn: going there again walks nothing
    put_back(util, b"import gamma\n", 3)
    assert _graph(site, base).modules == changed.modules and walks[0] == 2


def test_a_package_upgraded_and_reinstalled_takes_its_graph_back(
    site: Path, tmp_path: Path, walks: list[int]
) -> None:
    """A new module in a package and an import of it (folders' listings change), then the
    old version's files written again and the new module gone."""
    base = tmp_path / "cache"
    first = _graph(site, base)
    init = site / "rich" / "__init__.py"
    original = init.read_bytes()
    added = site / "rich" / "added.py"
    added.write_text("VALUE = 2\n")
    os.utime(added, ns=(OLD_NS, OLD_NS))
    put_back(init, original + b"\nfrom rich import added\n", 1)
    upgraded = _graph(site, base)
    assert "rich.added" in json.loads(upgraded.modules) and walks[0] == 2
    added.unlink()
    put_back(init, original, 2)  # the folder's listing is the old one again
    back = _graph(site, base)
    assert graphstates.TAKEN and walks[0] == 2 and back.modules == first.modules


def test_other_content_is_never_taken_for_a_past_state(
    site: Path, tmp_path: Path, walks: list[int]
) -> None:
    """Put back with a difference (one byte): the past state does not hold; the graph is
    patched or walked, and is what a walk in an empty cache makes."""
    base = tmp_path / "cache"
    _, util, original, _ = _left(site, base)
    put_back(util, original + b"#", 2)
    got = _graph(site, base)
    assert graphstates.TAKEN == []
    fresh = _graph(site, tmp_path / "fresh")
    assert got.modules == fresh.modules


@pytest.mark.parametrize("damage", ["garbage", "truncated", "a chunk gone"])
def test_a_damaged_past_state_is_dropped_and_never_used(
    site: Path, tmp_path: Path, walks: list[int], damage: str
) -> None:
    base = tmp_path / "cache"
    first, util, original, _ = _left(site, base)
    (past,) = _pasts(base)
    if damage == "garbage":
        past.write_text("{}\n")
    elif damage == "truncated":
        past.write_bytes(past.read_bytes()[: past.stat().st_size // 2])
    else:
        index = json.loads(past.read_text().split("\n")[2])
        chunks = base / "chunks-t"
        (chunks / index[0][:2] / index[0][2:]).unlink()
    put_back(util, original, 2)
    got = _graph(site, base)
    assert graphstates.TAKEN == [] and walks[0] == 3
    assert got.modules == first.modules  # walked again: the same graph
    if damage != "a chunk gone":
        assert not past.exists()


def test_a_state_put_back_in_the_last_seconds_is_taken_but_not_kept(
    site: Path, tmp_path: Path, walks: list[int]
) -> None:
    base = tmp_path / "cache"
    first, util, original, _ = _left(site, base)
    new = util.with_name("util.py.new")
    new.write_bytes(original)  # now: its stat may not tell a change made in the same tick
    os.replace(new, util)
    back = _graph(site, base)
    assert graphstates.TAKEN and back.modules == first.modules and walks[0] == 2
    assert back.path is None  # not the graph file: what keys itself by it must not use it
    assert len(_pasts(base)) == 1  # still a past state


def test_only_the_newest_past_states_are_kept(site: Path, tmp_path: Path) -> None:
    base = tmp_path / "cache"
    _graph(site, base)
    util = site / "svc" / "util.py"
    for n in range(graphfile.PAST_KEPT + 3):
        put_back(util, f"import mod{n}\n".encode(), n + 1)
        _graph(site, base)
    assert len(_pasts(base)) == graphfile.PAST_KEPT


def test_an_extension_module_written_again_is_taken_back_by_its_being_there(
    site: Path, tmp_path: Path, walks: list[int]
) -> None:
    """A package reinstalled writes its shared objects again: the walk never reads one, so
    the past state asks only that it is there (a file of any content), not its hash."""
    base = tmp_path / "cache"
    fast = with_extension(site, "main")
    main = site / "svc" / "main.py"
    original = main.read_bytes()
    first = _graph(site, base)
    assert json.loads(first.modules)["svc.fast"]["kind"] == "extension"
    put_back(main, b"import gamma\n", 2)
    _graph(site, base)
    put_back(fast, b"\x7fELF the same version, written again", 3)
    put_back(main, original, 4)
    back = _graph(site, base)
    assert graphstates.TAKEN and walks[0] == 2 and back.modules == first.modules
    fast.unlink()  # gone: the state does not hold, and the walk finds no module there
    put_back(main, b"import gamma\n", 5)
    _graph(site, base)
    put_back(main, original, 6)
    gone = _graph(site, base)
    assert graphstates.TAKEN == [] and "svc.fast" not in json.loads(gone.modules)


def test_a_package_reinstalled_as_it_was_takes_the_graph_file_itself_back(
    site: Path, tmp_path: Path, walks: list[int]
) -> None:
    """`pip install` of the version there, or a version put back after a change whose graph
    was not kept (taken in the racy seconds): every file of the package written again, of
    the same content, an extension module among them (which no patch can make, the walk
    never reads one). The graph file's own rows hold again by content: no walk."""
    base = tmp_path / "cache"
    with_extension(site, "main")
    main = site / "svc" / "main.py"
    first = _graph(site, base)
    assert walks[0] == 1 and _pasts(base) == []
    for n, path in enumerate(sorted((site / "svc").glob("*.*")), 2):
        put_back(path, path.read_bytes(), n)  # new inodes and times, the same bytes
    back = _graph(site, base)
    assert [str(back.path)] == graphstates.TAKEN and walks[0] == 1
    assert back.modules == first.modules and _pasts(base) == []
    again = _graph(site, base)  # its rows' new stats kept: the next run only stats them
    assert graphstates.TAKEN == [] and again.modules == first.modules and walks[0] == 1
    put_back(main, main.read_bytes() + b"#", 40)  # other content: never taken back
    _graph(site, base)
    assert graphstates.TAKEN == []
