"""The facts store is keyed by the code that makes its entries (caches.FACTS_CODE): the list
holds every host-side module that code imports, read from the tree (the imports under
TYPE_CHECKING aside: they never run)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import envsync.hostside
from envsync.hostside.caches.folder import ELF_CODE, FACTS_CODE, cache_path, facts_digest

pytestmark = pytest.mark.quick

HOSTSIDE = Path(str(envsync.hostside.__file__)).parent


def _imports_of(module: str) -> set[str]:
    """The host-side modules `module` ("native/elf") imports where it runs, as paths."""
    tree = ast.parse((HOSTSIDE / f"{module}.py").read_text())
    folder = module.rpartition("/")[0].split("/") if "/" in module else []
    found: set[str] = set()
    todo: list[ast.AST] = [tree]
    while todo:
        node = todo.pop()
        test = node.test if isinstance(node, ast.If) else None
        if isinstance(node, ast.If) and isinstance(test, ast.Name) and test.id == "TYPE_CHECKING":
            todo.extend(node.orelse)
            continue
        if isinstance(node, ast.ImportFrom) and node.level >= 1:
            base = folder[: len(folder) - (node.level - 1)]
            names = [node.module] if node.module else [a.name for a in node.names]
            found.update("/".join([*base, *n.split(".")]) for n in names)
        todo.extend(ast.iter_child_nodes(node))
    return found


def test_the_facts_code_holds_everything_it_imports() -> None:
    for module in FACTS_CODE:
        outside = _imports_of(module) - set(FACTS_CODE)
        assert not outside, f"{module} imports {sorted(outside)}: add them to FACTS_CODE"


def test_the_elf_code_holds_everything_it_imports() -> None:
    assert _imports_of("native/elf") >= {"native/binary", "native/dynsym"}  # the reader works
    for module in ELF_CODE:
        outside = _imports_of(module) - set(ELF_CODE)
        assert not outside, f"{module} imports {sorted(outside)}: add them to ELF_CODE"


def test_the_elf_store_is_keyed_by_its_own_code() -> None:
    one = cache_path("/c", "elves", "aaaa")
    assert one == cache_path("/c", "elves", "bbbb")  # another host side, the same reader
    assert one is not None and one != cache_path("/c", "imports", "aaaa")
    assert facts_digest("aaaa", ELF_CODE) in one


def test_the_facts_store_is_the_same_for_host_sides_of_the_same_facts_code() -> None:
    one = cache_path("/c", "imports", "aaaa")
    assert one == cache_path("/c", "imports", "bbbb")
    assert one is not None and facts_digest("aaaa") in one
    assert cache_path("/c", "graph", "aaaa") != cache_path("/c", "graph", "bbbb")
