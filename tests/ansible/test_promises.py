"""Under --engine ansible envsync keeps its promises: host keys are checked for each
connection plugin (paramiko and ssh) whatever ansible.cfg or the environment say, and no
inventory value is ever rendered as a template (a `{{ lookup('pipe', CMD) }}` would run CMD
on this machine). Real ansible-core, real sshd on loopback."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.figures import held
from tests.helpers import run_cli as run
from tests.sshd import SSHD, available

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not (Path(sys.executable).parent / "ansible-playbook").exists(),
        reason="ansible-core is not installed (pip install -e '.[dev]')",
    ),
]


def lookup(mark: Path) -> str:
    return "{{ lookup('pipe', 'touch " + str(mark) + "') }}"


# Each value of envsync.toml that reaches Ansible, holding a template.
FIELDS = {
    "python": lambda t: f'python = "{t}"\n',
    "ssh host": lambda t: f'python = "/usr/bin/python3"\nssh = "root@{t}"\n',
    "ssh user": lambda t: f'python = "/usr/bin/python3"\nssh = "{t}@127.0.0.1"\n',
    "identity": lambda t: f'python = "/usr/bin/python3"\nssh = "127.0.0.1"\nidentity = "{t}"\n',
    "known_hosts": lambda t: (
        f'python = "/usr/bin/python3"\nssh = "127.0.0.1"\nknown_hosts = "{t}"\n'
    ),
    "jump": lambda t: f'python = "/usr/bin/python3"\nssh = "127.0.0.1"\njump = "{t}"\n',
}


@pytest.mark.parametrize("field", sorted(FIELDS))
def test_no_value_of_envsync_toml_is_rendered_by_ansible(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, field: str
) -> None:
    mark = tmp_path / "ran"
    inv = tmp_path / "envsync.toml"
    inv.write_text("[hosts.h]\n" + FIELDS[field](lookup(mark)))
    code, _, err = run(
        capsys, "--inventory", str(inv), "-q", "snapshot", "h", "--engine", "ansible"
    )
    assert not mark.exists(), f"{field}: the template ran"
    assert code in (2, 3) and "Traceback" not in err, err
    held("9 inventory values never rendered by Ansible")


@pytest.mark.parametrize("variable", ["envsync_python", "ansible_python_interpreter"])
def test_no_value_of_an_ansible_inventory_is_rendered_twice(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, variable: str
) -> None:
    """The interpreter envsync reads from an Ansible inventory is handed back to Ansible as
    data: never rendered (Ansible itself renders only what its own inventory uses)."""
    mark = tmp_path / "ran"
    ini = tmp_path / "hosts.ini"
    ini.write_text(f'h ansible_connection=local {variable}="{lookup(mark)}"\n')
    code, _, err = run(
        capsys, "--inventory", str(ini), "-q", "snapshot", "h", "--engine", "ansible"
    )
    assert not mark.exists(), err
    assert code in (2, 3) and "Traceback" not in err, err
    held("9 inventory values never rendered by Ansible")


@pytest.fixture
def server() -> Iterator[SSHD]:
    why = available()
    if why:
        pytest.skip(why)
    import tempfile

    with tempfile.TemporaryDirectory(prefix="envsync-sshd-") as root:
        sshd = SSHD(Path(root), name="sshd").start()
        yield sshd
        sshd.stop()


# What turns host-key checking off, each way Ansible reads its settings.
LAX_CFG = """\
[defaults]
host_key_checking = False
[paramiko_connection]
host_key_auto_add = True
host_key_checking = False
record_host_keys = True
[ssh_connection]
ssh_args = -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null
"""
LAX_ENV = {
    "ANSIBLE_HOST_KEY_CHECKING": "False",
    "ANSIBLE_SSH_HOST_KEY_CHECKING": "False",
    "ANSIBLE_PARAMIKO_HOST_KEY_CHECKING": "False",
    "ANSIBLE_PARAMIKO_HOST_KEY_AUTO_ADD": "True",
    "ANSIBLE_SSH_ARGS": "-o StrictHostKeyChecking=no",
}


@pytest.mark.parametrize("plugin", ["paramiko", "ssh"])
@pytest.mark.parametrize("lax", ["ansible.cfg", "environment"])
def test_an_unknown_host_key_is_refused_for_every_connection_plugin(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    server: SSHD,
    plugin: str,
    lax: str,
) -> None:
    """ansible_connection paramiko or ssh, with host_key_auto_add = True and host-key
    checking off in an ansible.cfg of the current folder, or in the environment: the
    unknown key is refused, and no known_hosts file is written."""
    monkeypatch.chdir(tmp_path)
    if lax == "ansible.cfg":
        (tmp_path / "ansible.cfg").write_text(LAX_CFG)
    else:
        for name, value in LAX_ENV.items():
            monkeypatch.setenv(name, value)
    ini = tmp_path / "hosts.ini"
    ini.write_text(
        f"n1 ansible_connection={plugin} ansible_host=127.0.0.1 ansible_port={server.port} "
        f"ansible_user=root ansible_ssh_private_key_file={server.client_key} "
        f"envsync_python={sys.executable}\n"
    )
    code, _, err = run(
        capsys, "--inventory", str(ini), "-q", "snapshot", "n1", "--engine", "ansible"
    )
    assert code == 3, err
    assert "n1: Ansible could not reach it" in err, err
    assert not (Path.home() / ".ssh" / "known_hosts").exists()
    held("8 host keys checked for every connection plugin")
