"""Collection over real OpenSSH (an sshd on loopback): host keys, errors, fleets, quoting."""

from __future__ import annotations

import json
import socket
import stat
import threading
from pathlib import Path

import pytest

from tests.helpers import comparable, make_venv, make_wheel, pip_install
from tests.helpers import run_cli as run
from tests.sshd import SSHD, keygen

HOSTILE = "we ird 'q\" ;$(touch PWNED) `touch PWNED2`"


@pytest.fixture(scope="module")
def venvs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("ssh-venvs")
    w = root / "wheels"
    out = {}
    for name, version, folder in (("a", "1.0", root / "a"), ("b", "2.0", root / HOSTILE / "b")):
        python = make_venv(folder / "venv")
        pip_install(
            python,
            make_wheel(
                w / name,
                "svc",
                version,
                {"svc/__init__.py": f"V = {version!r}\n", "svc/main.py": "import json\n"},
            ),
        )
        out[name] = python
    return out


def inventory(
    path: Path,
    sshd: SSHD,
    venvs: dict[str, Path],
    *,
    known_hosts: Path,
    identity: Path | None = None,
    policy: str = "strict",
    extra: str = "",
) -> Path:
    identity = identity or sshd.client_key
    text = '[defaults]\nreference = "a-ssh"\ntarget = "b-ssh"\nwatch = ["svc"]\nenv = ["ENVSYNC_TEST_NONE"]\n'
    text += '[service]\ncommand = ["{python}", "-m", "svc.main"]\n'
    for name, python in venvs.items():
        text += f"[hosts.{name}-local]\npython = {json.dumps(str(python))}\n"
        text += (
            f"[hosts.{name}-ssh]\nssh = {json.dumps(sshd.target)}\npython = {json.dumps(str(python))}\n"
            f"identity = {json.dumps(str(identity))}\nknown_hosts = {json.dumps(str(known_hosts))}\n"
            f"host_key_policy = {json.dumps(policy)}\n"
        )
    path.write_text(text + extra)
    return path


def known(tmp_path: Path, sshd: SSHD) -> Path:
    path = tmp_path / "known_hosts"
    path.write_text(sshd.host_key_line())
    return path


def test_ssh_snapshot_equals_the_local_one(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, sshd_bed: SSHD, venvs: dict[str, Path]
) -> None:
    inv = inventory(tmp_path / "inv.toml", sshd_bed, venvs, known_hosts=known(tmp_path, sshd_bed))
    for name in ("a", "b"):
        code, out, _ = run(
            capsys, "--inventory", str(inv), "-q", "snapshot", f"{name}-ssh", f"{name}-local"
        )
        assert code == 0
        remote, local = json.loads(out)["snapshots"]
        assert remote["host"] == f"{name}-ssh"
        assert comparable(remote) == comparable(local)
        assert remote["interpreter"]["executable"] == str(venvs[name])


def test_hostile_paths_and_names_are_never_run_by_a_shell(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    sshd_bed: SSHD,
    venvs: dict[str, Path],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    home = Path.home()
    monkeypatch.chdir(tmp_path)
    evil_watch = ["svc", "x'; touch PWNED3; echo '", "$(touch PWNED4)"]
    inv = inventory(tmp_path / "inv.toml", sshd_bed, venvs, known_hosts=known(tmp_path, sshd_bed))
    inv.write_text(inv.read_text().replace('watch = ["svc"]', f"watch = {json.dumps(evil_watch)}"))
    code, out, _ = run(capsys, "--inventory", str(inv), "-q", "snapshot", "b-ssh")
    assert code == 0
    snap = json.loads(out)
    assert HOSTILE in snap["interpreter"]["executable"]
    assert snap["watch"] == sorted({"svc", "x'; touch pwned3; echo '", "$(touch pwned4)"})
    for where in (tmp_path, home, Path("/root"), venvs["b"].parent.parent, Path("/")):
        assert not list(where.glob("PWNED*")), where


def test_unknown_host_key_is_refused_and_known_hosts_untouched(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, sshd_bed: SSHD, venvs: dict[str, Path]
) -> None:
    kh = tmp_path / "known_hosts"
    kh.write_text(
        "[127.0.0.1]:1 ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIEx3bW1vYWJjZGVmZ2hpamtsbW5vcHFyc3R1dnd4eXow\n"
    )
    before = kh.read_bytes()
    inv = inventory(tmp_path / "inv.toml", sshd_bed, venvs, known_hosts=kh)
    code, out, err = run(capsys, "--inventory", str(inv), "snapshot", "a-ssh")
    assert (code, out) == (3, "")
    assert f"a-ssh: host key of 127.0.0.1:{sshd_bed.port} is not known (ssh-ed25519 SHA256:" in err
    assert "accept-new" in err and "ssh-keyscan" in err
    assert kh.read_bytes() == before
    missing = tmp_path / "absent_known_hosts"
    inv = inventory(tmp_path / "inv2.toml", sshd_bed, venvs, known_hosts=missing)
    assert run(capsys, "--inventory", str(inv), "snapshot", "a-ssh")[0] == 3
    assert not missing.exists()


@pytest.mark.parametrize("how", ["policy", "flag"])
def test_accept_new_records_the_key_then_strict_accepts_it(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    sshd_bed: SSHD,
    venvs: dict[str, Path],
    how: str,
) -> None:
    kh = tmp_path / "ssh" / "known_hosts"
    inv = inventory(
        tmp_path / "inv.toml",
        sshd_bed,
        venvs,
        known_hosts=kh,
        policy="accept-new" if how == "policy" else "strict",
    )
    flag = ["--accept-new-host-keys"] if how == "flag" else []
    code, _, err = run(capsys, "--inventory", str(inv), "-q", "snapshot", "a-ssh", *flag)
    assert code == 0, err
    line = kh.read_text()
    kind, key = Path(f"{sshd_bed.host_key}.pub").read_text().split()[:2]
    assert line == f"[127.0.0.1]:{sshd_bed.port} {kind} {key}\n"
    assert stat.S_IMODE(kh.stat().st_mode) == 0o600
    strict = inventory(tmp_path / "strict.toml", sshd_bed, venvs, known_hosts=kh)
    assert run(capsys, "--inventory", str(strict), "-q", "snapshot", "a-ssh")[0] == 0
    assert kh.read_text() == line  # nothing appended twice


def test_changed_host_key_is_always_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, sshd_bed: SSHD, venvs: dict[str, Path]
) -> None:
    other = keygen(tmp_path / "other_host_key")
    kind, key = Path(f"{other}.pub").read_text().split()[:2]
    kh = tmp_path / "known_hosts"
    kh.write_text(f"[127.0.0.1]:{sshd_bed.port} {kind} {key}\n")
    before = kh.read_bytes()
    for policy, flag in (("strict", []), ("accept-new", ["--accept-new-host-keys"])):
        inv = inventory(tmp_path / "inv.toml", sshd_bed, venvs, known_hosts=kh, policy=policy)
        code, out, err = run(capsys, "--inventory", str(inv), "snapshot", "a-ssh", *flag)
        assert (code, out) == (3, "")
        assert "has CHANGED" in err and "ssh-keygen -R" in err
    assert kh.read_bytes() == before


def test_wrong_client_key_is_an_authentication_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, sshd_bed: SSHD, venvs: dict[str, Path]
) -> None:
    stranger = keygen(tmp_path / "id_stranger")
    inv = inventory(
        tmp_path / "inv.toml",
        sshd_bed,
        venvs,
        known_hosts=known(tmp_path, sshd_bed),
        identity=stranger,
    )
    code, _, err = run(capsys, "--inventory", str(inv), "snapshot", "a-ssh")
    assert code == 3
    assert f"a-ssh: authentication failed for root@127.0.0.1:{sshd_bed.port}" in err


def _silent_listener() -> tuple[socket.socket, int]:
    """A TCP port that accepts connections and never says a word (no SSH banner)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    held: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                held.append(server.accept()[0])
            except OSError:
                return

    threading.Thread(target=accept, daemon=True).start()
    return server, server.getsockname()[1]


def test_remote_errors_each_have_their_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, sshd_bed: SSHD, venvs: dict[str, Path]
) -> None:
    kh = known(tmp_path, sshd_bed)
    crash = tmp_path / "crash.sh"
    crash.write_text(
        "#!/bin/sh\necho 'Traceback (most recent call last):' >&2\necho 'MemoryError: boom' >&2\nexit 1\n"
    )
    crash.chmod(0o755)
    silent, silent_port = _silent_listener()
    extra = f"""
[hosts.nopython]
ssh = "{sshd_bed.target}"
python = "/nonexistent/bin/python"
identity = "{sshd_bed.client_key}"
known_hosts = "{kh}"
[hosts.crash]
ssh = "{sshd_bed.target}"
python = "{crash}"
identity = "{sshd_bed.client_key}"
known_hosts = "{kh}"
[hosts.notpython]
ssh = "{sshd_bed.target}"
python = "/bin/echo"
identity = "{sshd_bed.client_key}"
known_hosts = "{kh}"
[hosts.silent]
ssh = "root@127.0.0.1:{silent_port}"
python = "python3"
known_hosts = "{kh}"
[hosts.nowhere]
ssh = "root@no-such-host.invalid"
python = "python3"
known_hosts = "{kh}"
"""
    inv = inventory(tmp_path / "inv.toml", sshd_bed, venvs, known_hosts=kh, extra=extra)
    expected = {
        "nopython": "nopython: python '/nonexistent/bin/python' not found",
        "crash": "crash: probe failed with exit code 1: Traceback (most recent call last): | MemoryError: boom",
        "notpython": "notpython: probe output is not JSON",
        "silent": f"silent: 127.0.0.1:{silent_port} did not answer as an SSH server within 2s",
        "nowhere": "nowhere: cannot resolve 'no-such-host.invalid'",
    }
    try:
        for host, message in expected.items():
            code, out, err = run(
                capsys, "--inventory", str(inv), "snapshot", host, "--connect-timeout", "2"
            )
            assert (code, out) == (3, ""), (host, err)
            lines = err.strip().splitlines()
            assert len(lines) == 1 and lines[0].startswith("envsync: ") and message in lines[0], (
                host,
                err,
            )
        # diff collects the reference and the target at once: the same line for the target
        code, out, err = run(capsys, "--inventory", str(inv), "diff", "a-local", "nopython")
        last = err.strip().splitlines()[-1]
        assert code == 3 and "Socket is closed" not in err, err
        assert last.startswith("envsync: ") and expected["nopython"] in last, err
    finally:
        silent.close()


def test_connection_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, venvs: dict[str, Path], sshd_bed: SSHD
) -> None:
    gone = SSHD(tmp_path / "gone").start()
    gone.stop()
    inv = inventory(tmp_path / "inv.toml", gone, venvs, known_hosts=tmp_path / "kh")
    code, _, err = run(capsys, "--inventory", str(inv), "snapshot", "a-ssh")
    assert code == 3
    assert f"a-ssh: connection refused by 127.0.0.1:{gone.port}" in err


def test_fleet_goes_on_when_one_host_is_down(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, sshd_bed: SSHD, venvs: dict[str, Path]
) -> None:
    second = SSHD(tmp_path / "second").start()
    kh = tmp_path / "known_hosts"
    kh.write_text(sshd_bed.host_key_line() + second.host_key_line())
    extra = (
        f'[hosts.c-ssh]\nssh = "{second.target}"\npython = "{venvs["a"]}"\n'
        f'identity = "{second.client_key}"\nknown_hosts = "{kh}"\n'
    )
    inv = inventory(tmp_path / "inv.toml", sshd_bed, venvs, known_hosts=kh, extra=extra)
    code, out, _ = run(capsys, "--inventory", str(inv), "-q", "snapshot", "a-ssh", "c-ssh", "b-ssh")
    assert code == 0
    assert [s["host"] for s in json.loads(out)["snapshots"]] == ["a-ssh", "c-ssh", "b-ssh"]
    second.stop()  # c's sshd goes away between two collections
    output = tmp_path / "fleet.json"
    code, _, err = run(
        capsys,
        "--inventory",
        str(inv),
        "-q",
        "snapshot",
        "a-ssh",
        "c-ssh",
        "b-ssh",
        "-o",
        str(output),
        "--jobs",
        "2",
    )
    assert code == 3
    assert err.strip().splitlines() == [
        f"envsync: c-ssh: connection refused by 127.0.0.1:{second.port} (Tip: is sshd running there?)"
    ]
    doc = json.loads(output.read_text())
    assert [s["host"] for s in doc["snapshots"]] == ["a-ssh", "b-ssh"]
    assert doc["errors"] == [
        {
            "host": "c-ssh",
            "error": f"c-ssh: connection refused by 127.0.0.1:{second.port} (Tip: is sshd running there?)",
        }
    ]


def test_one_connection_per_host_per_command(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, venvs: dict[str, Path]
) -> None:
    own = SSHD(tmp_path / "own").start()
    try:
        inv = inventory(tmp_path / "inv.toml", own, venvs, known_hosts=known(tmp_path, own))
        log = own.folder / f"{own.name}.log"
        before = log.read_text().count("Accepted publickey")
        # two remote commands on the target (probe, then the import probe), one on the reference
        code, out, err = run(
            capsys,
            "--inventory",
            str(inv),
            "-q",
            "diff",
            "a-ssh",
            "b-ssh",
            "--probe",
            "--format",
            "json",
        )
        assert code == 1, err
        assert [f["subject"] for f in json.loads(out)["findings"]] == ["svc"]
        assert log.read_text().count("Accepted publickey") - before == 2
    finally:
        own.stop()


def test_ssh_config_aliases_users_ports_and_identity_are_honored(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, sshd_bed: SSHD, venvs: dict[str, Path]
) -> None:
    ssh_dir = Path.home() / ".ssh"
    ssh_dir.mkdir(mode=0o700, exist_ok=True)
    kh = known(tmp_path, sshd_bed)
    (ssh_dir / "config").write_text(
        f"Host gpu-ref\n  HostName 127.0.0.1\n  Port {sshd_bed.port}\n  User root\n"
        f"  IdentityFile {sshd_bed.client_key}\n  UserKnownHostsFile {kh}\n"
    )
    inv = tmp_path / "inv.toml"
    inv.write_text(f'[hosts.ref]\nssh = "gpu-ref"\npython = "{venvs["a"]}"\n')
    code, out, err = run(capsys, "--inventory", str(inv), "-q", "snapshot", "ref")
    assert code == 0, err
    assert json.loads(out)["interpreter"]["executable"] == str(venvs["a"])
    # the alias's known-hosts file is the one checked: empty it and the key is unknown
    kh.write_text("")
    code, _, err = run(capsys, "--inventory", str(inv), "snapshot", "ref")
    assert code == 3 and "is not known" in err


def test_large_outputs_arrive_whole_on_parallel_channels(sshd_bed: SSHD, tmp_path: Path) -> None:
    """Regression: reading until the exit status lost output still waiting for window space."""
    from envsync.runner.ssh import SSHRunner
    from envsync.sources.inventory import HostSpec

    spec = HostSpec(
        name="big",
        python="python3",
        ssh=sshd_bed.target,
        identity=str(sshd_bed.client_key),
        known_hosts=str(known(tmp_path, sshd_bed)),
    )
    runner = SSHRunner(spec)
    sizes: list[int] = []

    def pull() -> None:
        for _ in range(3):
            result = runner.run(["head", "-c", "3000000", "/dev/urandom"], timeout=60)
            sizes.append(len(result.stdout))

    threads = [threading.Thread(target=pull) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    runner.close()
    assert sizes == [3_000_000] * 12
