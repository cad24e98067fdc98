"""Each HOST argument is resolved once per command, through one function (issue 33, item 1).

`envsync.sources.source.resolve` is the one function that reads what a HOST argument names; a
command reaches it only through `Session.resolve`, which keeps each answer for the rest
of the command and hands the stages the typed source. Checked two ways: by reading the
tree (no other module calls it, none defines another), and by counting its calls while
real commands run (diff, check, lock and a repair plan, on a live host and on files).
"""

from __future__ import annotations

import ast
import collections
import json
import sys
from pathlib import Path

import pytest

import envsync.sources.session
from envsync.sources.source import Named, resolve
from tests.helpers import REPO
from tests.helpers import run_cli as run

SNAPSHOT = Path(__file__).resolve().parent.parent / "data" / "snapshots" / "ct129.json"
CORE = REPO / "envsync"


def _modules() -> dict[str, ast.Module]:
    out = {}
    for path in sorted(CORE.rglob("*.py")):
        if "hostside" in path.relative_to(CORE).parts:
            continue  # the host side resolves nothing: it runs on the host
        out[str(path.relative_to(REPO))] = ast.parse(path.read_text(), str(path))
    return out


def test_one_function_resolves_a_host_argument_and_only_the_session_calls_it() -> None:
    importers, definers = [], []
    for name, tree in _modules().items():
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module == "envsync.sources.source":
                importers += [name for alias in node.names if alias.name == "resolve"]
            if isinstance(node, ast.ImportFrom) and node.module == "envsync.sources.snapshot":
                assert all(alias.name != "resolve" for alias in node.names), name
            if isinstance(node, ast.FunctionDef) and node.name == "resolve":
                definers.append(name)
            if isinstance(node, ast.Attribute) and node.attr == "resolve":
                value = node.value
                if isinstance(value, ast.Name) and value.id in ("sources", "snapshot"):
                    importers.append(name)  # sources.resolve(...) called by attribute
    assert importers == ["envsync/sources/session.py"]
    assert sorted(definers) == ["envsync/sources/session.py", "envsync/sources/source.py"]


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> collections.Counter[str]:
    """Every call of the one resolve function, by the name it was asked."""
    calls: collections.Counter[str] = collections.Counter()
    real = resolve  # the function envsync.sources.session imports, and the test replaces there

    def counting(name: str, inventory: object) -> Named:
        calls[name] += 1
        return real(name, inventory)  # type: ignore[arg-type]  # the Inventory passed on

    monkeypatch.setattr(envsync.sources.session, "resolve", counting)
    return calls


@pytest.fixture
def inventory(tmp_path: Path) -> Path:
    """One live host: this test's own interpreter (nothing watched, so it is quick)."""
    path = tmp_path / "envsync.toml"
    path.write_text(f"[hosts.t]\npython = {json.dumps(sys.executable)}\nwatch = []\n")
    return path


def _drifted(tmp_path: Path) -> Path:
    data = json.loads(SNAPSHOT.read_text())
    data["host"] = "ct200"
    data["distributions"] = [d for d in data["distributions"] if d["name"] != "soundfile"]
    path = tmp_path / "ct200.json"
    path.write_text(json.dumps(data))
    return path


def test_diff_of_two_files_resolves_each_once(
    capsys: pytest.CaptureFixture[str], counted: collections.Counter[str], tmp_path: Path
) -> None:
    other = _drifted(tmp_path)
    code, _, err = run(capsys, "diff", str(SNAPSHOT), str(other), "--state-dir", str(tmp_path))
    assert code == 1, err
    assert counted == {str(SNAPSHOT): 1, str(other): 1}


def test_commands_on_a_live_host_resolve_each_name_once(
    capsys: pytest.CaptureFixture[str],
    counted: collections.Counter[str],
    inventory: Path,
    tmp_path: Path,
) -> None:
    common = ["--inventory", str(inventory), "--state-dir", str(tmp_path / "states")]
    lock = tmp_path / "t.lock"
    code, _, err = run(capsys, "lock", "t", "-o", str(lock), *common)
    assert code == 0, err
    assert counted == {"t": 1}
    counted.clear()
    code, _, err = run(capsys, "check", "--lock", str(lock), "t", *common)
    assert code == 0, err
    assert counted["t"] == 1 and all(n == 1 for n in counted.values()), counted
    counted.clear()
    # the repair plan: the reference and the target go through diff, the plan and the
    # target's checks, each read once
    code, _, err = run(capsys, "repair", str(SNAPSHOT), "t", *common)
    assert code in (0, 1), err
    assert counted == {str(SNAPSHOT): 1, "t": 1}, counted
    counted.clear()
    code, _, err = run(capsys, "diff", "t@latest", "t", *common)  # a state is one source more
    assert code in (0, 1), err
    assert counted == {"t@latest": 1, "t": 1}, counted


@pytest.fixture
def fleet(tmp_path: Path) -> Path:
    """Two live hosts (this test's interpreter) and a group of both."""
    path = tmp_path / "envsync.toml"
    python = json.dumps(sys.executable)
    path.write_text(
        f"[hosts.t1]\npython = {python}\nwatch = []\n"
        f"[hosts.t2]\npython = {python}\nwatch = []\n"
        '[groups.pair]\nhosts = ["t1", "t2"]\n'
    )
    return path


def test_a_group_is_one_source_resolved_once_and_its_members_are_not_read_again(
    capsys: pytest.CaptureFixture[str],
    counted: collections.Counter[str],
    fleet: Path,
    tmp_path: Path,
) -> None:
    common = ["--inventory", str(fleet), "--state-dir", str(tmp_path / "states")]
    code, out, err = run(capsys, "diff", str(SNAPSHOT), "pair", "t1", "--format", "json", *common)
    assert code in (0, 1), err
    # the group's word read once; t1, named again beside its group, not read again
    assert counted == {str(SNAPSHOT): 1, "pair": 1}, counted
    fleet_view = json.loads(out)
    assert fleet_view["hosts"] == 2  # t1 once
    assert sorted(m for c in fleet_view["classes"] for m in c["members"]) == ["t1", "t2"]
    counted.clear()
    code, out, err = run(capsys, "diff", str(SNAPSHOT), "t[1-2]", "--format", "json", *common)
    assert code in (0, 1), err
    assert counted == {str(SNAPSHOT): 1, "t[1-2]": 1}, counted  # a node set is a group too
    counted.clear()
    code, out, err = run(capsys, "snapshot", "pair", *common)
    assert code == 0, err
    assert counted == {"pair": 1}, counted
    assert [doc["host"] for doc in json.loads(out)["snapshots"]] == ["t1", "t2"]


@pytest.mark.parametrize("argv", [["lock", "pair"], ["diff", "pair", "t1"]])
def test_a_command_of_one_host_refuses_a_group_in_one_line(
    capsys: pytest.CaptureFixture[str], fleet: Path, tmp_path: Path, argv: list[str]
) -> None:
    common = ["--inventory", str(fleet), "--state-dir", str(tmp_path / "states")]
    code, out, err = run(capsys, *argv, *common)
    assert code == 2, err
    assert "pair names 2 hosts (t1, t2); this takes one host" in err
    assert "Traceback" not in err and out == ""
