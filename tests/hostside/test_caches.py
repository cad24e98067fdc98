"""The facts store is keyed by the code that makes its entries (caches.FACTS_CODE): the list
holds every host-side module that code imports, read from the tree (the imports under
TYPE_CHECKING aside: they never run)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import envsync.hostside
from envsync.hostside.caches import FACTS_CODE, cache_path, facts_digest

pytestmark = pytest.mark.quick

HOSTSIDE = Path(str(envsync.hostside.__file__)).parent


def _imports(module: str) -> set[str]:
    """The sibling modules that `module` imports where it runs (not under TYPE_CHECKING)."""
    tree = ast.parse((HOSTSIDE / f"{module}.py").read_text())
    found: set[str] = set()
    todo: list[ast.AST] = [tree]
    while todo:
        node = todo.pop()
        test = node.test if isinstance(node, ast.If) else None
        if isinstance(node, ast.If) and isinstance(test, ast.Name) and test.id == "TYPE_CHECKING":
            todo.extend(node.orelse)
            continue
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            if node.module:
                found.add(node.module.partition(".")[0])
            else:
                found.update(alias.name for alias in node.names)
        todo.extend(ast.iter_child_nodes(node))
    return found


def test_the_facts_code_holds_everything_it_imports() -> None:
    for module in FACTS_CODE:
        outside = _imports(module) - set(FACTS_CODE)
        assert not outside, f"{module} imports {sorted(outside)}: add them to FACTS_CODE"


def test_the_facts_store_is_the_same_for_host_sides_of_the_same_facts_code() -> None:
    one = cache_path("/c", "imports", "aaaa")
    assert one == cache_path("/c", "imports", "bbbb")
    assert one is not None and facts_digest("aaaa") in one
    assert cache_path("/c", "graph", "aaaa") != cache_path("/c", "graph", "bbbb")
