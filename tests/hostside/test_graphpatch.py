"""A cached graph patched where only modules' files changed: the same graph as a new walk.

The host side runs in this process on a copy of the real rich package (and a small service
that imports it). After each edit the graph from the cache is compared, byte for byte, with
a walk of the same files in an empty cache folder, and `graphpatch.PATCHED` says whether
the cache was patched or walked again.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from envsync.hostside.caches import graphpatch, graphstates, store
from envsync.hostside.caches.graphcache import RawJSON, cached_startup_graph
from envsync.hostside.graph.finder import ModuleFinder
from tests.helpers import OLD_NS, put_back, service_site, with_extension

pytestmark = pytest.mark.quick

OPTIONS = {"roots": ["svc.main"], "internal": ["svc"]}
SERVICE = """\
import json
import rich.console

from svc import util


def serve():
    import rich.table
    return util.VALUE
"""


@pytest.fixture
def site(tmp_path: Path) -> Path:
    return service_site(tmp_path / "site-packages", SERVICE)


def _graph(sp: Path, base: Path) -> RawJSON:
    store._OPEN.clear()  # a probe is a process of its own: no store kept from the last one
    finder = ModuleFinder([str(sp)], {})
    graph = cached_startup_graph(OPTIONS, finder, str(base), "test", {})
    assert graph is not None
    return graph


def _same_as_a_walk(sp: Path, tmp_path: Path, got: RawJSON) -> None:
    fresh = _graph(sp, tmp_path / f"fresh-{len(list(tmp_path.glob('fresh-*')))}")
    assert graph_patch_free(fresh)
    assert got.modules == fresh.modules
    header = {k: v for k, v in json.loads(got.header).items() if k not in ("parsed", "cached")}
    assert header == {
        k: v for k, v in json.loads(fresh.header).items() if k not in ("parsed", "cached")
    }


def graph_patch_free(graph: RawJSON) -> bool:
    return graphpatch.PATCHED == [] and graph.decoded is not None  # walked on this run


def _edit(path: Path, text: str, n: int) -> None:
    path.write_text(text)
    os.utime(path, ns=(OLD_NS + n * 10**9, OLD_NS + n * 10**9))


EDITS = {
    "a comment at the end": lambda t: t + "\n# a local patch\n",
    "a line at the top: every line after it moves": lambda t: "# patched\n" + t,
    "a new function: what it defines changes": lambda t: t + "\n\ndef patched():\n    return 1\n",
    "a statement inside a function": lambda t: t.replace("        return ", "        return  ", 1),
}


@pytest.mark.parametrize("edit", sorted(EDITS))
def test_an_edit_that_keeps_the_walks_course_is_patched_into_the_same_graph(
    site: Path, tmp_path: Path, edit: str
) -> None:
    base = tmp_path / "cache"
    first = _graph(site, base)
    assert first.decoded is not None and "rich.table" in json.loads(first.modules)
    table = site / "rich" / "table.py"
    original = table.read_text()
    _edit(table, EDITS[edit](original), 1)
    second = _graph(site, base)
    assert graphpatch.PATCHED == ["rich.table"]
    assert json.loads(second.header)["parsed"] == 1
    _same_as_a_walk(site, tmp_path, second)
    # put back: the first graph is a past state that holds again by content (a state
    # the environment had: graphstates.py), nothing is patched or parsed
    _edit(table, original, 2)
    third = _graph(site, base)
    assert graphstates.TAKEN and graphpatch.PATCHED == []
    assert json.loads(third.header)["parsed"] == 0 and third.modules == first.modules
    # and the patch was kept: the next run only stats the files
    fourth = _graph(site, base)
    assert fourth.path is not None and fourth.modules == first.modules


def test_two_edited_files_are_patched_together(site: Path, tmp_path: Path) -> None:
    base = tmp_path / "cache"
    _graph(site, base)
    for n, name in enumerate(("table.py", "console.py"), 1):
        path = site / "rich" / name
        _edit(path, "# patched\n" + path.read_text(), n)
    got = _graph(site, base)
    assert sorted(graphpatch.PATCHED) == ["rich.console", "rich.table"]
    _same_as_a_walk(site, tmp_path, got)


def test_an_extension_module_rebuilt_beside_an_edit_is_patched(site: Path, tmp_path: Path) -> None:
    """A library rebuilt (its shared object written again, other content) with an edited
    source beside it: the walk never reads an extension module, so its entry stands and the
    edit is patched; the graph is a walk's."""
    base = tmp_path / "cache"
    fast = with_extension(site, "util", b"\x7fELF the first build")
    first = _graph(site, base)
    assert json.loads(first.modules)["svc.fast"]["kind"] == "extension"
    # another inode, other content; the folder's listing the same
    put_back(fast, b"\x7fELF another build", 2)
    table = site / "rich" / "table.py"
    _edit(table, table.read_text() + "\n# patched\n", 3)
    got = _graph(site, base)
    assert graphpatch.PATCHED == ["rich.table"] and json.loads(got.header)["parsed"] == 1
    _same_as_a_walk(site, tmp_path, got)
    fast.unlink()  # gone: the folder's listing changes, walked again
    assert _graph(site, base).decoded is not None and graphpatch.PATCHED == []


CHANGES = {
    "a new import: another course": ("svc/util.py", "import os\nimport rich.text\n\nVALUE = 1\n"),
    "an import removed": ("svc/util.py", "\nVALUE = 1\n"),
    "a file that no longer parses": ("svc/util.py", "import os\n\nVALUE = (\n"),
    "an import moved out of a function": (
        "svc/main.py",
        SERVICE.replace("    import rich.table\n", "").replace(
            "import json", "import json\nimport rich.table"
        ),
    ),
}


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_an_edit_that_changes_the_course_is_walked_again(
    site: Path, tmp_path: Path, change: str
) -> None:
    base = tmp_path / "cache"
    _graph(site, base)
    rel, text = CHANGES[change]
    _edit(site / rel, text, 1)
    got = _graph(site, base)
    assert graphpatch.PATCHED == [] and got.decoded is not None
    _same_as_a_walk(site, tmp_path, got)


def test_a_new_module_in_a_searched_folder_is_walked_again(site: Path, tmp_path: Path) -> None:
    base = tmp_path / "cache"
    _graph(site, base)
    (site / "svc" / "extra.py").write_text("")
    os.utime(site / "svc", ns=(OLD_NS + 10**9, OLD_NS + 10**9))
    _edit(site / "svc" / "util.py", "import os\nfrom svc import extra\n\nVALUE = 1\n", 1)
    got = _graph(site, base)
    assert graphpatch.PATCHED == []
    assert "svc.extra" in json.loads(got.modules)
    _same_as_a_walk(site, tmp_path, got)


def test_an_edit_in_the_last_seconds_is_patched_but_not_kept(site: Path, tmp_path: Path) -> None:
    base = tmp_path / "cache"
    _graph(site, base)
    kept = next(base.glob("graph-*.json")).read_bytes()
    util = site / "svc" / "util.py"
    util.write_text("import os\n\nVALUE = 2\n")  # now: the racy window
    second = _graph(site, base)
    assert graphpatch.PATCHED == ["svc.util"]
    _same_as_a_walk(site, tmp_path, second)
    assert next(base.glob("graph-*.json")).read_bytes() == kept  # the next run hashes it again


@pytest.mark.parametrize(
    "damage", ["no keys line", "keys of another shape", "a key that is no text"]
)
def test_a_cache_file_of_another_shape_is_walked_again(
    site: Path, tmp_path: Path, damage: str
) -> None:
    base = tmp_path / "cache"
    _graph(site, base)
    cached = next(base.glob("graph-*.json"))
    lines = cached.read_text().split("\n")
    if damage == "no keys line":
        lines = [*lines[:3], ""]
    elif damage == "keys of another shape":
        lines[3] = "[1, 2]"
    else:
        lines[3] = json.dumps({name: 7 for name in json.loads(lines[3])})
    cached.write_text("\n".join(lines))
    _edit(site / "rich" / "table.py", "# patched\n" + (site / "rich" / "table.py").read_text(), 1)
    got = _graph(site, base)
    assert graphpatch.PATCHED == [] and got.decoded is not None
    _same_as_a_walk(site, tmp_path, got)
