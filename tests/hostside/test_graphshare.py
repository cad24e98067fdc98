"""A graph pack holds on a host only where everything the walk read is the same there:
each folder's listing, each file's content, each path it found absent (graphshare.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from envsync.hostside.graphfile import listing
from envsync.hostside.graphshare import content_digest, holds_here, own_stamps, pack_text

pytestmark = pytest.mark.quick


@pytest.fixture
def tree(tmp_path: Path) -> list[list[object]]:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("import os\n")
    (tmp_path / "site.pth").write_text("import pkg\n")
    stamps: list[list[object]] = [
        [str(tmp_path / "pkg"), [1, 2, 3, 4], listing(str(tmp_path / "pkg"))],
        [str(tmp_path / "pkg" / "__init__.py"), [1, 2, 3, 4]],
        [str(tmp_path / "site.pth"), [1, 2, 3, 4]],
        [str(tmp_path / "absent.py"), None],
    ]
    modules = {
        "pkg": {
            "kind": "source",
            "file": str(tmp_path / "pkg" / "__init__.py"),
            "sha256": content_digest(str(tmp_path / "pkg" / "__init__.py"), {}),
        }
    }
    text = pack_text("k", "tag", stamps, "{}", json.dumps(modules).encode(), {"pkg": "x"}, {})
    assert text is not None and text.startswith(b'{"id":["graph","k"]')
    rows = json.loads(text)["entries"]["rows"]
    assert [r[0] for r in rows] == ["d", "f", "f", "-"]
    return rows


def test_a_graph_pack_holds_where_all_it_read_is_the_same(tree: list[list[object]]) -> None:
    assert holds_here(tree, {})
    stamps = own_stamps(tree)
    assert stamps[0][2] == tree[0][2] and stamps[3][1] is None


@pytest.mark.parametrize("change", ["a file's content", "a folder's listing", "an absent path"])
def test_a_graph_pack_does_not_hold_where_anything_differs(
    tree: list[list[object]], change: str
) -> None:
    pkg = Path(str(tree[0][1]))
    if change == "a file's content":
        (pkg / "__init__.py").write_text("import sys\n")
    elif change == "a folder's listing":
        (pkg / "extra.py").write_text("")
    else:
        Path(str(tree[3][1])).write_text("")
    assert not holds_here(tree, {})


def test_rows_of_another_shape_do_not_hold(tree: list[list[object]]) -> None:
    assert not holds_here([["x", "/"]], {})
    assert not holds_here("rows", {})
    assert not holds_here([["f", "/nonexistent", "ab"]], {})
