"""Inventory parsing: the brief's example, overrides, `local`, and precise errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from envsync.collect import ProbeOptions
from envsync.errors import InventoryError
from envsync.sources.inventory import DEFAULT_ENV, LOCAL, load_inventory

BRIEF_EXAMPLE = """
[defaults]
reference = "ct129"
target = "ct200"
watch = ["sglang"]

[service]
command = ["{python}", "-m", "sglang.launch_server", "--model-path", "/models/m",
           "--port", "{port}", "--speculative-algorithm", "DFLASH"]
port = 30001
health = "/health"
unit = "sglang-dflash.service"

[hosts.ct129]
ssh = "root@ct129"
python = "/opt/venv_sglang211/bin/python"

[hosts.ct200]
ssh = "root@ct200:22"
python = "/opt/venv_sglang211/bin/python"
service = { env = { CUDA_VISIBLE_DEVICES = "1" }, port = 30002 }

[hosts.box]
python = "venvs/box/bin/python"
identity = "keys/id_ed25519"
known_hosts = "keys/known_hosts"
host_key_policy = "accept-new"
watch = ["sglang", "xgrammar"]
env = ["CUDA_*"]
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "envsync.toml"
    path.write_text(text)
    return path


def test_the_brief_example_parses(tmp_path: Path) -> None:
    inv = load_inventory(str(write(tmp_path, BRIEF_EXAMPLE)), {})
    assert (inv.reference, inv.target) == ("ct129", "ct200")
    ct129, ct200, box = inv.host("ct129"), inv.host("ct200"), inv.host("box")
    assert ct129.ssh == "root@ct129" and not ct129.exec
    assert ct129.python == "/opt/venv_sglang211/bin/python"
    assert ct129.watch == ("sglang",) and ct129.env == DEFAULT_ENV
    assert ct129.service is not None and ct129.service.unit == "sglang-dflash.service"
    assert ct129.service.command[:3] == ("{python}", "-m", "sglang.launch_server")
    # per-host service table overrides [service] key by key
    assert ct200.service is not None
    assert (ct200.service.port, ct200.service.env) == (30002, {"CUDA_VISIBLE_DEVICES": "1"})
    assert ct200.service.command == ct129.service.command
    # local paths are relative to the inventory file
    assert box.ssh is None and not box.exec
    assert box.python == str(tmp_path / "venvs/box/bin/python")
    assert box.identity == str(tmp_path / "keys/id_ed25519")
    assert box.host_key_policy == "accept-new"
    assert (box.watch, box.env) == (("sglang", "xgrammar"), ("CUDA_*",))


def test_local_is_always_a_host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").write_text("")
    monkeypatch.setenv("VIRTUAL_ENV", str(venv))
    inv = load_inventory(str(write(tmp_path, '[defaults]\nwatch = ["sglang"]\n')), {})
    local = inv.host(LOCAL)
    assert local.python == str(venv / "bin" / "python")
    assert local.watch == ("sglang",)
    monkeypatch.delenv("VIRTUAL_ENV")
    assert load_inventory(None, {}).host(LOCAL).python.endswith("python3")


def test_local_runs_the_inventory_service_like_any_host(tmp_path: Path) -> None:
    from envsync.compare.targets import prepare
    from envsync.sources.source import HostSource, resolve, service_of

    text = '[service]\ncommand = ["{python}", "-m", "svc.main"]\nport = 8000\n'
    inv = load_inventory(str(write(tmp_path, text)), {})
    local = inv.host(LOCAL)
    assert local.service == inv.service
    source = resolve(LOCAL, inv)
    assert isinstance(source, HostSource)
    assert service_of(source, inv) == inv.service
    # diffed with the entrypoint it is deployed with
    target = prepare(source, inv, (), ProbeOptions())
    assert target.entrypoint == "svc.main"
    assert target.options.roots == ("svc.main",)


def test_inventory_location_precedence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    named = write(tmp_path, "[hosts.a]\npython = 'python3'\n")
    assert "a" in load_inventory(None, {"ENVSYNC_INVENTORY": str(named)}).hosts
    monkeypatch.chdir(tmp_path)
    assert load_inventory(None, {}).path == Path("envsync.toml")
    (tmp_path / "envsync.toml").unlink()
    assert load_inventory(None, {}).path is None  # no file and none named: only `local`


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[hosts.ct200\npython = 'x'\n", r"invalid TOML: .*line 1"),
        ("[hosts.ct200]\nssh = 'root@ct200'\n", r"hosts.ct200 has no 'python'; expected"),
        ("[hosts.ct200]\npython = 3\n", r"hosts.ct200.python: expected a string, got 3"),
        (
            "[hosts.ct200]\npython = 'p'\npyhton = 'q'\n",
            r"hosts.ct200: unknown key 'pyhton'; expected one of: python, .*installer",
        ),
        ("[defaults]\nwatch = 'sglang'\n", r"defaults.watch: expected a list, got str"),
        ("[defaults]\nwatch = [1]\n", r"defaults.watch\[0\]: expected a string, got 1"),
        (
            "[defaults]\nreference = 'ct129'\n",
            r"defaults.reference names 'ct129', which is not a host",
        ),
        ("[service]\nport = 'x'\n", r"service.port: expected an integer, got 'x'"),
        ("[service]\nport = true\n", r"service.port: expected an integer, got True"),
        ("[service]\nport = 70000\n", r"port must be between 1 and 65535"),
        ("[service]\ncomand = []\n", r"service: unknown key 'comand'; expected one of: command, "),
        ("[service]\nenv = { A = 1 }\n", r"service.env.A: expected a string, got 1"),
        (
            "[hosts.a]\npython='p'\nhost_key_policy = 'yolo'\n",
            r"host_key_policy must be one of strict, accept-new",
        ),
        (
            "[hosts.a]\npython='p'\ninstaller = 'conda'\n",
            r"hosts.a.installer must be one of pip, uv, not 'conda'",
        ),
        (
            "[hosts.a]\npython='p'\nservice = { unit = 5 }\n",
            r"hosts.a.service.unit: expected a string, got 5",
        ),
        ("[hosts.a]\npython='p'\nexec = 'docker'\n", r"hosts.a.exec: expected a list, got str"),
        ("[hosts.a]\npython='p'\nexec = []\n", r"hosts.a.exec must be a non-empty list"),
        (
            "[hosts.a]\npython='p'\nexec = ['docker', '']\n",
            r"hosts.a.exec must be a non-empty list of non-empty strings",
        ),
        (
            "[hosts.a]\npython='p'\nexec = ['srun', 3]\n",
            r"hosts.a.exec\[1\]: expected a string, got 3",
        ),
        (
            "[hosts.a]\npython='p'\nexec = ['docker', 'exec', 'c1']\n",
            r"hosts.a.exec runs `docker exec` without -i: envsync sends its probe",
        ),
        (
            "[hosts.a]\npython='p'\nexec = ['kubectl', 'exec', '-it', 'pod/p', '--']\n",
            r"hosts.a.exec asks kubectl for a terminal \(-t\)",
        ),
        (
            "[hosts.a]\npython='p'\njump = 'root@bastion'\n",
            r"hosts.a.jump needs ssh: the jump host leads to the SSH target",
        ),
        (
            "[hosts.a]\npython='p'\nssh = 'h'\njump = 'root@'\n",
            r"hosts.a.jump: 'root@': not an SSH target; expected user@host\[:port\]",
        ),
        (
            "[hosts.a]\npython='p'\nssh = 'h'\njump = 'b1, @b2'\n",
            r"hosts.a.jump: '@b2': not an SSH target",
        ),
        ("[hosts.a]\npython='p'\nssh = 'a b'\n", r"hosts.a.ssh: 'a b': not an SSH target"),
        ("[service]\nhealth_url = 'pod:30000'\n", r"service.health_url must be an http"),
        (
            "[hosts.a]\npython='p'\nservice = { health_url = 'http://h:x/health' }\n",
            r"hosts.a.service.health_url is not a URL",
        ),
        ("hosts = 3\n", r"hosts: expected a table, got int"),
        ("[hosts]\na = 3\n", r"hosts.a: expected a table, got int"),
        ("[extra]\n", r"unknown key 'extra'; expected one of: defaults, service, hosts"),
    ],
)
def test_bad_inventories_name_file_key_and_expectation(
    tmp_path: Path, text: str, message: str
) -> None:
    path = write(tmp_path, text)
    with pytest.raises(InventoryError, match=message) as info:
        load_inventory(str(path), {})
    assert str(info.value).startswith(str(path))


def test_named_inventory_must_exist(tmp_path: Path) -> None:
    with pytest.raises(InventoryError, match="inventory file not found"):
        load_inventory(str(tmp_path / "nope.toml"), {})


def test_unknown_host_lists_the_known_ones(tmp_path: Path) -> None:
    inv = load_inventory(str(write(tmp_path, "[hosts.ct129]\npython = 'p'\n")), {})
    with pytest.raises(
        InventoryError, match=r"unknown host 'ct300' in .*known hosts: ct129, local"
    ):
        inv.host("ct300")


def test_hosts_behind_a_command_and_a_jump_host(tmp_path: Path) -> None:
    text = """
[service]
command = ["{python}", "-m", "svc"]
port = 30000
[hosts.pod]
exec = ["kubectl", "exec", "-i", "-n", "inference", "pod/sglang-0", "-c", "server", "--"]
python = "bin/python3"
service = { health_url = "http://sglang.inference.svc:30000/health" }
[hosts.node]
ssh = "root@gpu7:2222"
jump = "admin@login:22,bastion"
exec = ["docker", "exec", "-i", "sglang"]
python = "/opt/venv/bin/python"
"""
    inv = load_inventory(str(write(tmp_path, text)), {})
    pod, node = inv.host("pod"), inv.host("node")
    assert pod.exec == (
        "kubectl",
        "exec",
        "-i",
        "-n",
        "inference",
        "pod/sglang-0",
        "-c",
        "server",
        "--",
    )
    assert pod.python == "bin/python3"  # inside: never made relative to the inventory
    assert pod.exec and pod.ssh is None
    assert pod.service is not None and pod.service.port == 30000
    assert pod.service.health_url == "http://sglang.inference.svc:30000/health"
    assert (node.ssh, node.jump, node.exec) == (
        "root@gpu7:2222",
        "admin@login:22,bastion",
        ("docker", "exec", "-i", "sglang"),
    )


def test_a_host_may_name_its_installer(tmp_path: Path) -> None:
    path = tmp_path / "envsync.toml"
    path.write_text(
        "[hosts.a]\npython = 'p'\ninstaller = 'uv'\n[hosts.b]\npython = 'p'\n", encoding="utf-8"
    )
    inventory = load_inventory(str(path), {})
    assert inventory.host("a").installer == "uv"
    assert inventory.host("b").installer is None


def test_an_error_naming_a_crafted_host_is_one_line(tmp_path: Path) -> None:
    # found by the hostile-input tests: a host named "\n" broke the one-line error
    path = write(tmp_path, '[hosts]\n"\\n" = false\n')
    with pytest.raises(InventoryError) as raised:
        load_inventory(str(path), {})
    assert "\n" not in str(raised.value) and "hosts.\\n: expected a table" in str(raised.value)
