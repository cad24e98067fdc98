"""`--engine ansible` on 8 real sshd on loopback with real ansible-core: the same snapshots
as envsync's own SSH runner, host keys verified, an unreachable host reported alone."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import comparable, make_venv, make_wheel, pip_install
from tests.helpers import run_cli as run
from tests.sshd import SSHD, available

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not (Path(sys.executable).parent / "ansible-playbook").exists(),
        reason="ansible-core is not installed (pip install -e '.[dev]')",
    ),
]
COUNT = 8


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, object]]:
    """8 sshd, two venvs (svc 1.0 and 2.0), host n1..n8 each on its own sshd."""
    why = available()
    if why:
        pytest.skip(why)
    root = tmp_path_factory.mktemp("ansible-fleet")
    pythons = []
    for version in ("1.0", "2.0"):
        python = make_venv(root / f"venv-{version}")
        pip_install(
            python,
            make_wheel(
                root / "w" / version, "svc", version, {"svc/__init__.py": f"V = {version!r}\n"}
            ),
        )
        pythons.append(python)
    servers = [SSHD(root / "sshd", name=f"sshd{i}").start() for i in range(COUNT)]
    known = root / "known_hosts"
    known.write_text("".join(s.host_key_line() for s in servers))
    key = servers[0].client_key
    hosts = {f"n{i + 1}": (servers[i], pythons[i % 2 == 1 and i == 5]) for i in range(COUNT)}
    toml = '[defaults]\nwatch = ["svc"]\nenv = ["ENVSYNC_TEST_*"]\n'
    ini = "[nodes]\n"
    for name, (server, python) in hosts.items():
        toml += (
            f'[hosts.{name}]\nssh = "{server.target}"\npython = "{python}"\n'
            f'identity = "{key}"\nknown_hosts = "{known}"\n'
        )
        ini += (
            f"{name} ansible_host=127.0.0.1 ansible_port={server.port} ansible_user=root "
            f"ansible_ssh_private_key_file={key} envsync_python={python} "
            f"ansible_ssh_common_args='-o UserKnownHostsFile={known}'\n"
        )
    ini += '[all:vars]\nenvsync_watch=["svc"]\nenvsync_env=["ENVSYNC_TEST_*"]\n'
    (root / "envsync.toml").write_text(toml)
    (root / "hosts.ini").write_text(ini)
    yield {"root": root, "servers": servers, "known": known, "key": key, "pythons": pythons}
    for server in servers:
        server.stop()


def snapshots(capsys: pytest.CaptureFixture[str], inventory: Path, *args: str) -> dict[str, dict]:
    code, out, err = run(capsys, "--inventory", str(inventory), "-q", "snapshot", *args)
    assert code == 0, err
    return {s["host"]: s for s in json.loads(out)["snapshots"]}


def test_the_ansible_engine_gives_the_ssh_runners_snapshots(
    capsys: pytest.CaptureFixture[str], fleet: dict[str, object]
) -> None:
    root = fleet["root"]
    assert isinstance(root, Path)
    hosts = f"n[1-{COUNT}]"
    fabric = snapshots(capsys, root / "envsync.toml", hosts)
    through_toml = snapshots(capsys, root / "envsync.toml", hosts, "--engine", "ansible")
    through_ini = snapshots(capsys, root / "hosts.ini", "nodes", "--engine", "ansible")
    assert sorted(fabric) == [f"n{i}" for i in range(1, COUNT + 1)]
    for name, snap in fabric.items():
        mine = comparable(dict(snap))
        assert comparable(dict(through_toml[name])) == mine, name
        assert comparable(dict(through_ini[name])) == mine, name
    # the two venvs are really told apart: n6 runs svc 2.0
    versions = {
        n: next(d["version"] for d in s["distributions"] if d["name"] == "svc")
        for n, s in fabric.items()
    }
    assert versions["n6"] == "2.0" and versions["n1"] == "1.0"


def test_a_diff_through_ansible_folds_as_envsyncs_own(
    capsys: pytest.CaptureFixture[str], fleet: dict[str, object]
) -> None:
    root = fleet["root"]
    assert isinstance(root, Path)
    out = {}
    for engine in ("envsync", "ansible"):
        code, text, err = run(
            capsys, "--inventory", str(root / "hosts.ini"), "-q", "diff", "n1", "nodes:!n1",
            "--format", "json", "--engine", engine,
        )  # fmt: skip
        assert code == 1, err
        out[engine] = [(c["hosts"], c["count"], c["headline"]) for c in json.loads(text)["classes"]]
    assert out["ansible"] == out["envsync"]
    assert out["envsync"] == [("n6", 1, "svc unknown"), ("n[2-5,7-8]", 6, "as the reference")]


def test_host_keys_are_verified_whatever_the_inventory_says(
    capsys: pytest.CaptureFixture[str], fleet: dict[str, object], tmp_path: Path
) -> None:
    """An inventory that turns host-key checking off (StrictHostKeyChecking=no, a known
    hosts file of /dev/null) still has the key refused through Ansible."""
    servers = fleet["servers"]
    assert isinstance(servers, list)
    server = servers[0]
    ini = tmp_path / "hosts.ini"
    ini.write_text(
        f"n1 ansible_host=127.0.0.1 ansible_port={server.port} ansible_user=root "
        f"ansible_ssh_private_key_file={fleet['key']} envsync_python={sys.executable} "
        "ansible_host_key_checking=false "
        "ansible_ssh_common_args='-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null'\n"
    )
    code, _, err = run(
        capsys, "--inventory", str(ini), "-q", "snapshot", "n1", "--engine", "ansible"
    )
    assert code == 3
    assert "n1: Ansible could not reach it" in err and "requested strict checking" in err
    # --accept-new-host-keys, as for envsync's own runner, records an unknown key
    code, _, err = run(
        capsys, "--inventory", str(ini), "-q", "snapshot", "n1", "--engine", "ansible",
        "--accept-new-host-keys",
    )  # fmt: skip
    assert code == 0, err


def test_an_unreachable_host_is_reported_and_the_others_collected(
    capsys: pytest.CaptureFixture[str], fleet: dict[str, object], tmp_path: Path
) -> None:
    root = fleet["root"]
    assert isinstance(root, Path)
    text = (root / "envsync.toml").read_text()
    servers = fleet["servers"]
    assert isinstance(servers, list)
    dead = f"127.0.0.1:{servers[2].port}"
    inv = tmp_path / "envsync.toml"
    from tests.sshd import free_port

    inv.write_text(text.replace(dead, f"127.0.0.1:{free_port()}"))
    code, out, err = run(
        capsys, "--inventory", str(inv), "-q", "snapshot", "n[1-4]", "--engine", "ansible"
    )
    assert code == 3
    assert "n3: Ansible could not reach it" in err
    data = json.loads(out)
    assert sorted(s["host"] for s in data["snapshots"]) == ["n1", "n2", "n4"]
    assert [e["host"] for e in data["errors"]] == ["n3"]


def test_results_stream_back_as_each_host_answers(fleet: dict[str, object], tmp_path: Path) -> None:
    """A host whose interpreter takes 6 s to start does not hold back the other's snapshot."""
    import time

    from envsync.ansible.engine import AnsibleEngine
    from envsync.collect import ProbeOptions
    from envsync.sources.inventory import load_inventory

    pythons = fleet["pythons"]
    assert isinstance(pythons, list)
    slow = tmp_path / "slow-python"
    slow.write_text(f'#!/bin/sh\nsleep 6\nexec "{pythons[0]}" "$@"\n')
    slow.chmod(0o755)
    root = fleet["root"]
    assert isinstance(root, Path)
    text = (
        (root / "envsync.toml")
        .read_text()
        .replace(
            f'[hosts.n2]\nssh = "{fleet["servers"][1].target}"\npython = "{pythons[0]}"',  # type: ignore[index]  # the fleet fixture is a dict[str, object]; its servers are a list of SSHD
            f'[hosts.n2]\nssh = "{fleet["servers"][1].target}"\npython = "{slow}"',  # type: ignore[index]  # the fleet fixture is a dict[str, object]; its servers are a list of SSHD
        )
    )
    assert str(slow) in text
    (tmp_path / "envsync.toml").write_text(text)
    inventory = load_inventory(str(tmp_path / "envsync.toml"), {})
    engine = AnsibleEngine(inventory=inventory, forks=8)
    started = time.perf_counter()
    arrived = {}
    for _, result in engine.collect(
        [(0, inventory.hosts["n2"], ProbeOptions()), (1, inventory.hosts["n1"], ProbeOptions())]
    ):
        assert not isinstance(result, Exception), result
        arrived[result.host] = time.perf_counter() - started
    assert list(arrived) == ["n1", "n2"]
    assert arrived["n2"] - arrived["n1"] > 4
