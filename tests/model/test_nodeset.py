"""Node sets (ClusterShell's NodeSet) wherever hosts are named: groups, sets, globs, folding."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

from envsync.errors import InputError, InventoryError
from envsync.model.nodeset import expand, fold, is_pattern, select, size
from envsync.runner import Runners
from envsync.sources.inventory import parse_inventory
from envsync.sources.session import Session
from tests.figures import held
from tests.helpers import run_cli as run

HOSTS = [f"gpu{i:03d}" for i in range(1, 9)] + ["ct129", "ct200"]
GROUPS = {"gpu_nodes": HOSTS[:8], "server_a": HOSTS[:2]}


@pytest.mark.parametrize(
    ("word", "expected"),
    [
        ("ct200", ["ct200"]),
        ("gpu_nodes", HOSTS[:8]),
        ("@gpu_nodes!gpu005", [h for h in HOSTS[:8] if h != "gpu005"]),
        ("gpu_nodes:!gpu005", [h for h in HOSTS[:8] if h != "gpu005"]),  # Ansible's spelling
        ("server_a:&gpu_nodes", ["gpu001", "gpu002"]),
        ("gpu[001-003,008],ct200", ["ct200", "gpu001", "gpu002", "gpu003", "gpu008"]),
        ("gpu00[1-2]", ["gpu001", "gpu002"]),
        ("gpu00*", HOSTS[:8]),
        # not sets: a file, a host's past, a path
        ("ct200@good", ["ct200@good"]),
        ("reports/ct129.lock", ["reports/ct129.lock"]),
        ("x.json", ["x.json"]),
    ],
)
def test_a_host_argument_names_hosts_groups_and_sets(word: str, expected: list[str]) -> None:
    assert list(select(word, HOSTS, GROUPS)) == expected


@pytest.mark.parametrize(
    ("word", "message"),
    [
        ("gpu[001-012]", r"names 4 host\(s\) the inventory does not have: gpu\[009-012\]"),
        ("@nope", r"no group 'nope'"),
        ("gpu[1-", r"not a host list"),
        ("zz*", r"matches no host"),
    ],
)
def test_bad_sets_are_one_clear_line(word: str, message: str) -> None:
    with pytest.raises(InputError, match=message):
        select(word, HOSTS, GROUPS)


def test_fold_and_expand_are_clustershells() -> None:
    assert fold(["gpu003", "gpu001", "gpu002", "gpu088", "gpu089", "ct129"]) == (
        "ct129,gpu[001-003,088-089]"
    )
    assert expand("gpu[001-128,130]")[-2:] == ["gpu128", "gpu130"]
    assert len(expand("gpu[001-128,130]")) == 129
    assert is_pattern("gpu[1-2]") and not is_pattern("ct200") and not is_pattern("a/b[1].json")


def _toml_inventory(tmp_path: Path, groups: str) -> Path:
    text = "".join(f'[hosts.{h}]\npython = "/usr/bin/python3"\n' for h in HOSTS)
    path = tmp_path / "envsync.toml"
    path.write_text(text + groups)
    return path


def test_toml_groups_take_names_and_node_sets(tmp_path: Path) -> None:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib

    path = _toml_inventory(
        tmp_path,
        '[groups.gpu_nodes]\nhosts = "gpu[001-008]"\n'
        '[groups.server_a]\nhosts = ["gpu[001-002]"]\nserver = true\n',
    )
    inv = parse_inventory(tomllib.loads(path.read_text()), path)
    assert inv.groups["gpu_nodes"].hosts == tuple(HOSTS[:8])
    assert [g.name for g in inv.servers()] == ["server_a"]
    chosen = Session(inventory=inv, runners=Runners()).select(["gpu_nodes:!gpu001", "ct200"])
    assert [s.label for s in chosen] == [*HOSTS[1:8], "ct200"]


@pytest.mark.parametrize(
    ("groups", "message"),
    [
        ('[groups.g]\nhosts = "gpu[001-010]"\n', r"groups.g names host\(s\) that are not in"),
        ('[groups.g]\nhosts = "gpu[1-"\n', r"groups.g.hosts: 'gpu\[1-': not a node set"),
        ('[groups.ct200]\nhosts = ["gpu001"]\n', r"groups.ct200: a host has that name too"),
        ("[groups.g]\nserver = 1\n", r"groups.g.server: expected true or false"),
    ],
)
def test_bad_groups_name_the_key(tmp_path: Path, groups: str, message: str) -> None:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib

    path = _toml_inventory(tmp_path, groups)
    with pytest.raises(InventoryError, match=message):
        parse_inventory(tomllib.loads(path.read_text()), path)


def test_diff_of_a_group_is_a_fleet_in_classes(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """`envsync diff REF GROUP`: the group's hosts (here snapshot files standing in for
    hosts would not do: a group names inventory hosts), collected and folded."""
    import sys

    text = '[groups.pair]\nhosts = "n[1-2]"\n'
    for name in ("n1", "n2", "ref"):
        text += f'[hosts.{name}]\npython = "{sys.executable}"\n'
    inv = tmp_path / "envsync.toml"
    inv.write_text('[defaults]\nwatch = []\nenv = ["ENVSYNC_TEST_NONE"]\n' + text)
    code, out, err = run(capsys, "--inventory", str(inv), "diff", "ref", "pair", "--format", "json")
    assert code == 0, err
    data = json.loads(out)
    assert [(c["hosts"], c["count"], c["headline"]) for c in data["classes"]] == [
        ("n[1-2]", 2, "as the reference")
    ]
    assert "n[1-2] (2): as the reference against ref" in err


@pytest.mark.parametrize(
    "text", ["gpu[001-128,130]", "gpu[1-9/2],ct200", "r[1-3]n[01-04]", "a[1-2]!a1", "x"]
)
def test_a_sets_size_is_read_from_its_text(text: str) -> None:
    assert size(text) >= len(expand(text))
    if "!" not in text:
        assert size(text) == len(expand(text))


@pytest.mark.parametrize(
    "word", ["gpu[1-100000000]", "r[1-10000]n[1-10000]", "gpu[1-100000000]!gpu[1-99999990]"]
)
def test_a_huge_set_is_refused_before_it_is_expanded(word: str) -> None:
    started = time.monotonic()
    for call in (lambda: select(word, HOSTS, GROUPS), lambda: expand(word)):
        with pytest.raises(
            InputError, match=r"names up to [\d,]+ hosts, more than envsync expands"
        ):
            call()
    assert time.monotonic() - started < 2
    held("13 node sets sized before expansion")


def test_a_huge_group_in_the_inventory_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib

    path = _toml_inventory(tmp_path, '[groups.g]\nhosts = "gpu[1-100000000]"\n')
    with pytest.raises(InventoryError, match=r"groups\.g\.hosts: 'gpu\[1-100000000\]' names up to"):
        parse_inventory(tomllib.loads(path.read_text()), path)
    held("13 node sets sized before expansion")
    inv = _toml_inventory(tmp_path, "")
    started = time.monotonic()
    code, _, err = run(capsys, "--inventory", str(inv), "diff", "ct129", "gpu[1-100000000]")
    assert code == 2 and time.monotonic() - started < 5
    assert err.count("\n") == 1 and "more than envsync expands (100,000)" in err
    held("13 node sets sized before expansion")
