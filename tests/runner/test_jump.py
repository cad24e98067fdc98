"""SSH through a jump host, on two real sshd: the target is reachable only through the bastion.

The test bed (tests/sshd.py JumpBed) puts the target's sshd in a network namespace of its
own; only the bastion's sshd runs in it too. Both keys are verified under one policy.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.container import VENV, Container
from tests.helpers import comparable, make_venv, make_wheel, pip_install
from tests.helpers import run_cli as run
from tests.sshd import JumpBed

WATCH = ["svc"]


@pytest.fixture(scope="module")
def venv_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("jump-venv")
    python = make_venv(root / "venv")
    pip_install(python, make_wheel(root / "w", "svc", "2.0", {"svc/__init__.py": "V = 2\n"}))
    return root / "venv"


def known(tmp_path: Path, *lines: str) -> Path:
    path = tmp_path / "known_hosts"
    path.write_text("".join(lines))
    return path


def host(
    name: str, bed: JumpBed, python: str, known_hosts: Path, *, extra: str = "", jump: bool = True
) -> str:
    text = (
        f'[hosts.{name}]\nssh = "{bed.target.target}"\npython = "{python}"\n'
        f'identity = "{bed.target.client_key}"\nknown_hosts = "{known_hosts}"\n'
        f'watch = {json.dumps(WATCH)}\nenv = ["ENVSYNC_TEST_NONE"]\n{extra}'
    )
    return text + (f'jump = "{bed.bastion.target}"\n' if jump else "")


def test_the_target_is_reachable_only_through_the_bastion(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, jump_bed: JumpBed, venv_root: Path
) -> None:
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", jump_bed.target.port), timeout=5)
    kh = known(tmp_path, jump_bed.bastion.host_key_line(), jump_bed.target.host_key_line())
    python = str(venv_root / "bin" / "python")
    inv = tmp_path / "inv.toml"
    inv.write_text(
        host("behind", jump_bed, python, kh)
        + host("direct", jump_bed, python, kh, jump=False)
        + f'[hosts.here]\npython = "{python}"\nwatch = ["svc"]\nenv = ["ENVSYNC_TEST_NONE"]\n'
    )
    code, _, err = run(capsys, "--inventory", str(inv), "snapshot", "direct")
    assert code == 3
    assert f"direct: connection refused by 127.0.0.1:{jump_bed.target.port}" in err
    code, out, err = run(capsys, "--inventory", str(inv), "-q", "snapshot", "behind", "here")
    assert code == 0, err
    behind, here = json.loads(out)["snapshots"]
    assert comparable(behind) == comparable(here)
    code, _, err = run(capsys, "--inventory", str(inv), "diff", "here", "behind")
    assert code == 0 and "behind against here: no drift" in err
    # a target the bastion cannot reach either
    inv.write_text(inv.read_text().replace(jump_bed.target.target, "root@127.0.0.1:1"))
    code, _, err = run(capsys, "--inventory", str(inv), "snapshot", "behind")
    assert code == 3
    assert (
        f"behind: the jump host through 127.0.0.1:{jump_bed.bastion.port} could not reach "
        "127.0.0.1:1: Connect failed"
    ) in err


def test_proxyjump_from_the_ssh_config(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, jump_bed: JumpBed, venv_root: Path
) -> None:
    kh = known(tmp_path, jump_bed.bastion.host_key_line(), jump_bed.target.host_key_line())
    ssh_dir = Path.home() / ".ssh"
    ssh_dir.mkdir(mode=0o700, exist_ok=True)
    (ssh_dir / "config").write_text(
        f"Host gpu-behind\n  HostName 127.0.0.1\n  Port {jump_bed.target.port}\n"
        f"  ProxyJump root@127.0.0.1:{jump_bed.bastion.port}\n"
        f"  IdentityFile {jump_bed.target.client_key}\n  UserKnownHostsFile {kh}\n"
    )
    inv = tmp_path / "inv.toml"
    inv.write_text(
        f'[hosts.gpu]\nssh = "root@gpu-behind"\npython = "{venv_root}/bin/python"\n'
        f'watch = ["svc"]\n'
    )
    code, out, err = run(capsys, "--inventory", str(inv), "-q", "snapshot", "gpu")
    assert code == 0, err
    assert json.loads(out)["interpreter"]["executable"] == f"{venv_root}/bin/python"


def test_the_jump_hosts_key_is_verified_like_the_targets(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, jump_bed: JumpBed, venv_root: Path
) -> None:
    python = str(venv_root / "bin" / "python")
    bastion = f"127.0.0.1:{jump_bed.bastion.port}"
    # unknown jump host key, strict: refused before the target is tried
    kh = known(tmp_path, jump_bed.target.host_key_line())
    before = kh.read_bytes()
    inv = tmp_path / "inv.toml"
    inv.write_text(host("behind", jump_bed, python, kh))
    code, _, err = run(capsys, "--inventory", str(inv), "snapshot", "behind")
    assert code == 3
    assert f"behind: host key of jump host {bastion} is not known (ssh-ed25519 SHA256:" in err
    assert kh.read_bytes() == before
    # a changed jump host key is refused, whatever the policy
    other = jump_bed.target.host_key_line().split(" ", 1)[1]
    kh.write_text(f"[127.0.0.1]:{jump_bed.bastion.port} {other}" + jump_bed.target.host_key_line())
    for flag in ([], ["--accept-new-host-keys"]):
        code, _, err = run(capsys, "--inventory", str(inv), "snapshot", "behind", *flag)
        assert code == 3 and f"host key of jump host {bastion} has CHANGED" in err
    # the target's key unknown behind a known bastion: refused too, with how to add it
    kh.write_text(jump_bed.bastion.host_key_line())
    code, _, err = run(capsys, "--inventory", str(inv), "snapshot", "behind")
    assert code == 3
    assert f"host key of 127.0.0.1:{jump_bed.target.port} is not known" in err
    assert f"-J {bastion}" in err
    # accept-new records both, then strict accepts both
    kh.unlink()
    inv.write_text(host("behind", jump_bed, python, kh, extra='host_key_policy = "accept-new"\n'))
    assert run(capsys, "--inventory", str(inv), "-q", "snapshot", "behind")[0] == 0
    recorded = kh.read_text()
    assert f"[127.0.0.1]:{jump_bed.bastion.port} ssh-ed25519 " in recorded
    assert f"[127.0.0.1]:{jump_bed.target.port} ssh-ed25519 " in recorded
    inv.write_text(host("behind", jump_bed, python, kh))
    assert run(capsys, "--inventory", str(inv), "-q", "snapshot", "behind")[0] == 0


def test_diff_of_a_container_on_a_node_behind_the_bastion(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    jump_bed: JumpBed,
    venv_root: Path,
    containers: Callable[..., Container],
) -> None:
    """`envsync diff ct129 gpu-pod`: local, behind exec, through a jump host, and all three."""
    ct = containers(venv_root)
    kh = known(tmp_path, jump_bed.bastion.host_key_line(), jump_bed.target.host_key_line())
    python = str(venv_root / "bin" / "python")
    prefix = json.dumps(ct.exec_prefix)
    inv = tmp_path / "inv.toml"
    inv.write_text(
        f'[hosts.ct129]\npython = "{python}"\nwatch = ["svc"]\nenv = ["ENVSYNC_TEST_NONE"]\n'
        f'[hosts.gpu-pod]\nexec = {prefix}\npython = "{VENV}/bin/python"\nwatch = ["svc"]\n'
        'env = ["ENVSYNC_TEST_NONE"]\n'
        + host("behind", jump_bed, python, kh)
        + host("pod-behind", jump_bed, f"{VENV}/bin/python", kh, extra=f"exec = {prefix}\n")
    )
    for ref, tgt in (("ct129", "gpu-pod"), ("behind", "gpu-pod"), ("ct129", "pod-behind")):
        code, _, err = run(capsys, "--inventory", str(inv), "diff", ref, tgt)
        assert code == 0, err
        assert f"{tgt} against {ref}: no drift" in err
    code, out, err = run(capsys, "--inventory", str(inv), "-q", "snapshot", "pod-behind", "gpu-pod")
    assert code == 0, err
    remote, local = json.loads(out)["snapshots"]
    assert remote["system"]["hostname"] == "sglang-0"
    assert comparable(remote) == comparable(local)
