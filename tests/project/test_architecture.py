"""The tree's import graph has no cycle: read from the source (ast), every import counted.

Module-level and function-level imports alike (a function-level import only hides a cycle
until the function runs), `TYPE_CHECKING` ones too, relative imports resolved. The host side
(envsync/hostside, imported as envsync_host on a host) is one more package of the graph.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HOST_NAME = "envsync_host"  # the host side's name on a host (hostside/__init__.py)


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules(root: Path = ROOT) -> dict[str, Path]:
    """Every module of envsync/ under `root`, by its dotted name."""
    return {module_name(path, root): path for path in sorted((root / "envsync").rglob("*.py"))}


def _host_alias(name: str) -> str:
    if name == HOST_NAME or name.startswith(HOST_NAME + "."):
        return "envsync.hostside" + name[len(HOST_NAME) :]
    return name


def _imported(node: ast.Import | ast.ImportFrom, here: str, is_package: bool) -> Iterator[str]:
    """The dotted names one import statement reaches (a `from x import y` reaches x.y when
    that is a module, x otherwise)."""
    if isinstance(node, ast.Import):
        yield from (_host_alias(alias.name) for alias in node.names)
        return
    if node.level:
        base = here.split(".") if is_package else here.split(".")[:-1]
        base = base[: len(base) - (node.level - 1)]
        origin = ".".join([*base, *([node.module] if node.module else [])])
    else:
        origin = _host_alias(node.module or "")
    for alias in node.names:
        yield f"{origin}.{alias.name}"


def _owner(name: str, known: Mapping[str, Path]) -> str | None:
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def import_graph(known: Mapping[str, Path]) -> dict[str, dict[str, int]]:
    """module -> {module it imports: the line of the first such import}."""
    graph: dict[str, dict[str, int]] = {}
    for name, path in known.items():
        edges = graph.setdefault(name, {})
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if not isinstance(node, ast.Import | ast.ImportFrom):
                continue
            reached = {_owner(t, known) for t in _imported(node, name, path.name == "__init__.py")}
            for other in sorted(r for r in reached if r is not None and r != name):
                edges.setdefault(other, node.lineno)
    return graph


def cycles(graph: Mapping[str, Mapping[str, int]]) -> list[list[str]]:
    """The strongly connected parts of more than one module (Tarjan's), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in graph.get(node, {}):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            part = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                part.append(top)
                if top == node:
                    break
            if len(part) > 1:
                found.append(sorted(part))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def describe(
    part: list[str], graph: Mapping[str, Mapping[str, int]], known: Mapping[str, Path]
) -> str:
    arrows = [
        f"  {a} -> {b} ({known[a]}:{line})"
        for a in part
        for b, line in sorted(graph[a].items())
        if b in part
    ]
    return "import cycle: " + " <-> ".join(part) + "\n" + "\n".join(arrows)


def test_envsync_has_no_import_cycle() -> None:
    known = modules()
    graph = import_graph(known)
    found = cycles(graph)
    assert not found, "\n".join(describe(part, graph, known) for part in found)


def test_the_graph_sees_function_level_relative_and_host_side_imports(tmp_path: Path) -> None:
    """The reader itself: a cycle closed only by a function-level import, a relative one or
    one through the host side's own name is still a cycle."""
    pkg = tmp_path / "envsync"
    (pkg / "hostside").mkdir(parents=True)
    for rel, text in {
        "__init__.py": "",
        "a.py": "from envsync import b\n",
        "b.py": "def f():\n    from envsync.a import x\n",
        "hostside/__init__.py": "",
        "hostside/c.py": "from .d import y\n",
        "hostside/d.py": "TYPE_CHECKING = False\nif TYPE_CHECKING:\n    import envsync_host.c\n",
        "hostside/e.py": "from . import d\n",
    }.items():
        (pkg / rel).write_text(text)
    found = cycles(import_graph(modules(tmp_path)))
    assert found == [["envsync.a", "envsync.b"], ["envsync.hostside.c", "envsync.hostside.d"]]


def rooms(graph: Mapping[str, Mapping[str, int]]) -> dict[str, dict[str, int]]:
    """The graph between envsync's rooms: each package right under envsync/ is one room (its
    modules' imports are its own), each module right under envsync/ one more."""

    def room(name: str) -> str:
        return ".".join(name.split(".")[:2])

    out: dict[str, dict[str, int]] = {}
    for name, edges in graph.items():
        mine = out.setdefault(room(name), {})
        for other, line in edges.items():
            if room(other) != room(name):
                mine.setdefault(room(other), line)
    return out


def test_envsyncs_packages_stand_in_layers() -> None:
    """No package imports one that imports it back, however deep the modules that do it:
    the rooms stand in layers, each importing only the ones below."""
    graph = import_graph(modules())
    found = cycles(rooms(graph))
    assert not found, found
    assert len(rooms(graph)) <= 24, sorted(rooms(graph))  # the flat core stays in rooms


def test_the_room_graph_sees_a_cycle_between_packages(tmp_path: Path) -> None:
    pkg = tmp_path / "envsync"
    for rel, text in {
        "__init__.py": "",
        "low/__init__.py": "",
        "low/a.py": "def f():\n    from envsync.high.b import y\n",
        "high/__init__.py": "",
        "high/b.py": "from envsync.low import c\n",
        "low/c.py": "",
    }.items():
        (pkg / rel).parent.mkdir(parents=True, exist_ok=True)
        (pkg / rel).write_text(text)
    graph = import_graph(modules(tmp_path))
    assert cycles(graph) == []  # no module imports in a circle...
    assert cycles(rooms(graph)) == [["envsync.high", "envsync.low"]]  # ...but the rooms do
