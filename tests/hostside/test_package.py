"""The host side is a package of its own: stdlib only, its own face, checked at Python 3.8."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import pytest

from envsync import hostside
from envsync.hostside import protocol
from envsync.hostside.agent import ops

HOSTSIDE = Path(hostside.__file__).parent
ENVSYNC = HOSTSIDE.parent
MODULES = sorted(HOSTSIDE.rglob("*.py"))
# What envsync may import of it (hostside/__init__.py's docstring says so).
# store and chunks: the caches' rules (a cap, least recently used, content-defined chunks),
# which envsync's own received copies follow too
FACE = {"shared", "protocol", "boot", "native.verdicts", "caches.store", "caches.chunks"}
# Modules that run alone (their source is a -c program): not even relative imports.
ALONE = {"facts/torchdeep.py"}
# What a module reads of the host's own environment (pip decides the host's wheel tags).
THE_HOSTS_OWN = {"pipconfig.py": {"pip"}}


def imports(path: Path) -> list[tuple[int, str, int]]:
    """(level, module, line) of every import statement in a file, nested ones too."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [(0, alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            out.append((node.level, node.module or "", node.lineno))
    return out


def test_the_host_side_imports_only_the_stdlib_and_itself() -> None:
    assert len(MODULES) > 20
    foreign = []
    for path in MODULES:
        rel = path.relative_to(HOSTSIDE).as_posix()
        for level, module, line in imports(path):
            top = module.partition(".")[0]
            if level and rel not in ALONE:
                continue  # itself, relatively: it runs under another name on hosts
            if not level and top in sys.stdlib_module_names:
                continue
            if not level and top in THE_HOSTS_OWN.get(rel, ()):
                continue
            foreign.append(f"{rel}:{line}: {'.' * level}{module}")
    assert foreign == []


def test_typing_is_imported_for_the_checker_only() -> None:
    """typing costs milliseconds on every host run: only under `if TYPE_CHECKING:`."""
    heavy = {"typing", "dataclasses", "inspect", "tempfile"}
    found = []
    for path in MODULES:
        # The native layer's records are dataclasses: it runs only where a startup graph is
        # read, and a warm check imports only its verdicts (benchmarks/native.py measures it).
        allowed = {"dataclasses"} if path.parent.name == "native" else set()
        tree = ast.parse(path.read_text())
        checking = {
            id(n)
            for block in ast.walk(tree)
            if isinstance(block, ast.If)
            and isinstance(block.test, ast.Name)
            and block.test.id == "TYPE_CHECKING"
            for n in ast.walk(block)
        }
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)) and id(node) not in checking:
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
                names += [node.module or ""] if isinstance(node, ast.ImportFrom) else []
                if node_level(node) == 0 and {n.partition(".")[0] for n in names} & (
                    heavy - allowed
                ):
                    found.append(f"{path.name}:{node.lineno}")
    assert found == []


def node_level(node: ast.Import | ast.ImportFrom) -> int:
    return node.level if isinstance(node, ast.ImportFrom) else 0


def test_envsync_uses_the_host_side_only_through_its_face() -> None:
    used = {}
    for path in sorted(ENVSYNC.rglob("*.py")):
        if HOSTSIDE in path.parents:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            where = f"{path.relative_to(ENVSYNC)}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.startswith("envsync.hostside."):
                        used[where] = alias.name.removeprefix("envsync.hostside.")
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                "envsync.hostside"
            ):
                package = (node.module or "").removeprefix("envsync.hostside").lstrip(".")
                for alias in node.names:  # `from envsync.hostside.caches import store`
                    name = f"{package}.{alias.name}".lstrip(".")
                    is_module = (HOSTSIDE / (name.replace(".", "/") + ".py")).is_file()
                    used[f"{where} {alias.name}"] = name if is_module else package
    outside = {where: name for where, name in used.items() if name not in FACE}
    assert used and outside == {}
    # every name of the face is used: one no longer imported leaves the list
    assert set(used.values()) == FACE
    # the package itself is named too: bundle.py reads its sources to ship them
    assert "bundle.py" in "".join(used)
    # and the package's docstring says the same list, no more
    said = (hostside.__doc__ or "").partition("envsync itself may import only these")[2]
    assert said and {name for name in FACE if f"`{name}`" not in said} == set()
    named = set(re.findall(r"`([a-z_.]+)`", said))
    assert named == FACE


def test_no_module_of_the_host_side_is_over_600_lines() -> None:
    long = {p.name: n for p in MODULES if (n := len(p.read_text().splitlines())) > 600}
    assert long == {}


def test_the_agent_dispatches_every_operation_of_the_protocol() -> None:
    handled = set(ops.HANDLERS) | {protocol.PACK, protocol.UNPACK}
    assert sorted(handled) == sorted(protocol.OPS)
    assert len(set(protocol.OPS)) == len(protocol.OPS)
    assert set(protocol.OPS) >= protocol.UNLOCKED_OPS


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.relative_to(HOSTSIDE).as_posix())
def test_every_module_parses_as_python_3_8(path: Path) -> None:
    ast.parse(path.read_text(), feature_version=(3, 8))


def test_every_file_a_cache_keeps_is_read_through_its_seal() -> None:
    """Only store.read_file opens a cache's files (it checks their seal): a reader that
    opened one itself would trust what a forger wrote. The others open no cache's file."""
    not_caches = {
        "caches/folder.py _source": "the host side's own sources",
        "caches/share.py record": "a distribution's RECORD",
    }
    opened = set()
    for path in (*sorted((HOSTSIDE / "caches").glob("*.py")), HOSTSIDE / "native" / "scan.py"):
        for function in ast.walk(ast.parse(path.read_text())):
            if not isinstance(function, ast.FunctionDef):
                continue
            for node in ast.walk(function):
                if (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Name)
                    and node.func.id in ("open", "open_regular")
                ):
                    opened.add(f"{path.relative_to(HOSTSIDE)} {function.name}")
    assert opened - set(not_caches) == {"caches/store.py read_file"}, opened


def test_the_runs_key_travels_on_stdin_never_on_the_command_line() -> None:
    from envsync.runner.bundle import host_argv, host_input, host_key

    key = host_key()
    assert key is not None and len(key) == 64
    assert not any(key in arg for arg in host_argv("python3", protocol.COLLECT, ["{}"]))
    assert host_input().split(b"\n", 1)[0].endswith(b" " + key.encode())
