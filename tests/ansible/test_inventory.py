"""Ansible inventories read through real ansible-core (`ansible-inventory --list`): INI,
YAML with group_vars, a dynamic inventory script; their variables as envsync's fields."""

from __future__ import annotations

import json
import stat
import sys
from pathlib import Path

import pytest

from envsync.ansible import is_ansible_inventory, read_inventory
from envsync.ansible.inventory import ssh_options
from envsync.errors import InventoryError
from envsync.runner import Runners
from envsync.sources.inventory import load_inventory
from envsync.sources.session import Session
from tests.helpers import REPO
from tests.helpers import run_cli as run

pytestmark = pytest.mark.skipif(
    not (Path(sys.executable).parent / "ansible-inventory").exists(),
    reason="ansible-core is not installed (pip install -e '.[dev]')",
)

INI = """\
[gpu_nodes]
gpu[001:004] ansible_host=10.1.0.7 ansible_port=2222 ansible_user=svc
ct200 ansible_host=ct200.lan ansible_user=root ansible_ssh_private_key_file=keys/id_ct200 \
ansible_ssh_common_args='-o ProxyJump=admin@bastion:2200 -o UserKnownHostsFile=/etc/envsync/known \
-o StrictHostKeyChecking=accept-new'

[reference]
ct129 ansible_connection=local envsync_python=/opt/ref/bin/python

[win]
w1 ansible_connection=winrm

[sglang_a:children]
gpu_nodes

[sglang_a:vars]
envsync_server=true

[all:vars]
envsync_python=/opt/venv/bin/python
envsync_reference=ct129
envsync_watch=["sglang", "xgrammar"]
"""


def test_an_ini_inventory_maps_to_envsyncs_hosts(tmp_path: Path) -> None:
    path = tmp_path / "hosts.ini"
    path.write_text(INI)
    inv = load_inventory(str(path), {})
    assert inv.ansible == str(path) and inv.reference == "ct129"
    gpu = inv.hosts["gpu003"]
    assert (gpu.ssh, gpu.python, gpu.jump, gpu.known_hosts) == (
        "svc@10.1.0.7:2222",
        "/opt/venv/bin/python",
        None,
        None,
    )
    assert gpu.watch == ("sglang", "xgrammar")
    ct200 = inv.hosts["ct200"]
    assert ct200.ssh == "root@ct200.lan"
    assert ct200.jump == "admin@bastion:2200"
    assert ct200.known_hosts == "/etc/envsync/known"
    assert ct200.host_key_policy == "accept-new"
    assert ct200.identity == str((tmp_path / "keys" / "id_ct200").absolute())
    assert inv.hosts["ct129"].ssh is None and inv.hosts["ct129"].python == "/opt/ref/bin/python"
    # a connection envsync's runners do not speak: only --engine ansible reaches it
    assert inv.hosts["w1"].connection == "winrm"
    assert inv.groups["gpu_nodes"].hosts == ("gpu001", "gpu002", "gpu003", "gpu004", "ct200")
    assert [g.name for g in inv.servers()] == ["sglang_a"]
    session = Session(inventory=inv, runners=Runners())
    chosen = session.select(["gpu_nodes:!ct200"])
    assert [s.label for s in chosen] == ["gpu001", "gpu002", "gpu003", "gpu004"]
    assert [s.label for s in session.select(["gpu[002-003]"])] == ["gpu002", "gpu003"]


def test_a_yaml_inventory_with_group_vars_and_a_service(tmp_path: Path) -> None:
    (tmp_path / "group_vars").mkdir()
    (tmp_path / "group_vars" / "all.yml").write_text(
        "envsync_python: /srv/venv/bin/python\n"
        "envsync_target: n2\n"
        "envsync_service:\n  command: ['{python}', '-m', 'svc.main', '--port', '{port}']\n"
        "  port: 8000\n"
    )
    (tmp_path / "group_vars" / "pair.yml").write_text("envsync_server: yes\n")
    (tmp_path / "inventory.yml").write_text(
        "all:\n  children:\n    pair:\n      hosts:\n"
        "        n1: {ansible_host: 127.0.0.1}\n"
        "        n2: {ansible_host: 127.0.0.2, envsync_service: {port: 8001}, "
        "envsync_exec: [docker, exec, '-i', sglang]}\n"
    )
    inv = load_inventory(str(tmp_path / "inventory.yml"), {})
    assert inv.target == "n2"
    assert inv.service is not None and inv.service.port == 8000
    n1, n2 = inv.hosts["n1"], inv.hosts["n2"]
    assert n1.service is not None and n1.service.port == 8000
    assert n2.service is not None and n2.service.port == 8001
    assert n2.service.command == ("{python}", "-m", "svc.main", "--port", "{port}")
    assert n2.exec == ("docker", "exec", "-i", "sglang") and n2.ssh == "127.0.0.2"
    assert inv.groups["pair"].server


def test_a_dynamic_inventory_script(tmp_path: Path) -> None:
    script = tmp_path / "inventory"  # no suffix: executable, so an Ansible inventory
    data = {
        "gpu": {"hosts": ["node1", "node2"], "vars": {"envsync_server": True}},
        "_meta": {
            "hostvars": {
                "node1": {"ansible_host": "10.0.0.1", "envsync_python": "/v/bin/python"},
                "node2": {"ansible_host": "10.0.0.2", "envsync_python": "/v/bin/python"},
            }
        },
    }
    script.write_text(
        f"#!{sys.executable}\nimport json, sys\n"
        f"print(json.dumps({data!r} if '--list' in sys.argv else {{}}))\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    assert is_ansible_inventory(script)
    inv = read_inventory(script)
    assert {h: s.ssh for h, s in inv.hosts.items() if h != "local"} == {
        "node1": "10.0.0.1",
        "node2": "10.0.0.2",
    }
    assert inv.groups["gpu"].server


def test_what_is_taken_for_an_ansible_inventory(tmp_path: Path) -> None:
    toml, ini, folder = tmp_path / "e.toml", tmp_path / "hosts", tmp_path / "inv"
    toml.write_text('[hosts.a]\npython = "p"\n')
    ini.write_text("[web]\nhost1\n")  # no suffix, not TOML: Ansible's INI
    folder.mkdir()
    assert not is_ansible_inventory(toml)
    assert is_ansible_inventory(ini) and is_ansible_inventory(folder)
    (tmp_path / "envsync").write_text('[hosts.a]\npython = "p"\n')  # TOML without a suffix
    assert not is_ansible_inventory(tmp_path / "envsync")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[g]\nh1 ansible_host=x\n", r"host 'h1' has neither envsync_python nor ansible_python"),
        ("all:\n  hosts: [oops\n", r"ansible-inventory cannot read it"),
        (
            "[g]\nh1 envsync_python=/p envsync_watch='[1]'\n",
            r"envsync_watch must be a list of strings",
        ),
    ],
)
def test_bad_ansible_inventories_are_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, text: str, message: str
) -> None:
    path = tmp_path / ("inv.yml" if text.startswith("all:") else "inv.ini")
    path.write_text(text)
    with pytest.raises(InventoryError, match=message):
        read_inventory(path)
    code, _, err = run(capsys, "--inventory", str(path), "snapshot", "h1")
    assert code == 2 and len(err.strip().splitlines()) == 1


def test_without_ansible_core_the_tip_says_how(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "hosts.ini"
    path.write_text("[g]\nh1 envsync_python=/p\n")
    monkeypatch.setattr("envsync.ansible.inventory.sys.executable", str(tmp_path / "python"))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(InventoryError, match=r"pip install 'envsync\[ansible\]'"):
        read_inventory(path)


def test_ssh_options_as_openssh_reads_them() -> None:
    assert ssh_options(
        "-o ProxyJump=a@b:22 -oUserKnownHostsFile=/k -o 'StrictHostKeyChecking no'",
        "-J ignored -i key",
    ) == {
        "proxyjump": "a@b:22",
        "userknownhostsfile": "/k",
        "stricthostkeychecking": "no",
        "identityfile": "key",
    }


@pytest.mark.slow
def test_the_examples_hosts_from_an_ansible_inventory(
    capsys: pytest.CaptureFixture[str], example_hosts: Path, tmp_path: Path
) -> None:
    """examples/inventory.yml names the example's hosts as envsync.toml does: the same
    diff, and a group of them is a fleet."""
    texts = {}
    for name in ("envsync.toml", "inventory.yml"):
        text = (REPO / "examples" / name).read_text().replace(".hosts/", f"{example_hosts}/")
        (tmp_path / name).write_text(text)
        (tmp_path / "demo_server.py").write_text((REPO / "examples" / "demo_server.py").read_text())
        code, out, err = run(
            capsys, "--inventory", str(tmp_path / name), "-q", "diff", "ct129", "ct200",
            "--format", "json",
        )  # fmt: skip
        assert code == 1, err
        texts[name] = json.loads(out)
    assert texts["inventory.yml"] == texts["envsync.toml"]
    assert {f["subject"] for f in texts["inventory.yml"]["findings"]} >= {"xgrammar", "soundfile"}
