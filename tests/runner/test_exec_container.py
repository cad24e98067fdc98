"""Hosts behind an exec prefix, on real isolation: a container made of Linux namespaces.

The container (tests/container.py) sees a venv from outside at /opt/venv, its own /tmp and
PIDs; `nsenter --target PID ...` enters it as `docker exec -i` does. A snapshot through the
prefix must equal the one envsync takes when it runs inside itself, and each way the
prefix can fail must be reported as such, exit 3.
"""

from __future__ import annotations

import fcntl
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from envsync.collect.importcheck import check_imports
from envsync.runner import make_runner
from envsync.sources.inventory import load_inventory
from tests.container import VENV, Container
from tests.helpers import REPO, comparable, make_venv, make_wheel, pip_install
from tests.helpers import run_cli as run
from tests.sshd import SSHD

WATCH = ["svc"]
INSIDE = f"{VENV}/bin/python"
Start = Callable[..., Container]


@pytest.fixture(scope="module")
def venv_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("exec-venv")
    python = make_venv(root / "venv")
    wheel = make_wheel(
        root / "w",
        "svc",
        "1.0",
        {
            "svc/__init__.py": "V = 1\n",
            "svc/main.py": "import json\n",
            "svc/broken.py": "raise ImportError('only a test')\n",
        },
    )
    pip_install(python, wheel)
    return root / "venv"


def host_table(name: str, prefix: list[str], *, python: str = INSIDE, extra: str = "") -> str:
    return (
        f"[hosts.{name}]\nexec = {json.dumps(prefix)}\npython = {json.dumps(python)}\n"
        f'watch = {json.dumps(WATCH)}\nenv = ["ENVSYNC_TEST_NONE"]\n{extra}'
    )


def write_inventory(path: Path, *tables: str) -> Path:
    path.write_text("\n".join(tables))
    return path


def test_a_snapshot_through_exec_equals_the_one_taken_inside(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, containers: Start, venv_root: Path
) -> None:
    share = tmp_path / "share"
    share.mkdir()
    write_inventory(
        share / "inside.toml",
        f'[hosts.inside]\npython = "{INSIDE}"\nwatch = {json.dumps(WATCH)}\n'
        'env = ["ENVSYNC_TEST_NONE"]\n',
    )
    # envsync itself runs inside too: its checkout and interpreter, bound where they are.
    ct = containers(
        venv_root,
        mounts={"/opt/share": share, str(REPO): REPO, sys.prefix: Path(sys.prefix)},
    )
    inv = write_inventory(
        tmp_path / "inv.toml",
        '[service]\ncommand = ["{python}", "-m", "svc.main"]\n',
        host_table("pod", ct.exec_prefix),
        f'[hosts.here]\npython = "{venv_root}/bin/python"\nwatch = {json.dumps(WATCH)}\n'
        'env = ["ENVSYNC_TEST_NONE"]\n',
    )
    code, out, err = run(capsys, "--inventory", str(inv), "-q", "snapshot", "pod", "--no-cache")
    assert code == 0, err
    through = json.loads(out)
    inside = subprocess.run(
        [
            *ct.exec_prefix,
            sys.executable,
            "-m",
            "envsync",
            "--inventory",
            "/opt/share/inside.toml",
            "-q",
            "snapshot",
            "inside",
            "--no-cache",
        ],
        capture_output=True,
        text=True,
        cwd="/",
        check=True,
    )
    seen = json.loads(inside.stdout)
    assert through["interpreter"]["executable"] == INSIDE and through["system"]["hostname"] == (
        "sglang-0"
    )
    assert [(d["name"], d["version"]) for d in through["distributions"] if d.get("files")] == [
        ("svc", "1.0")
    ]
    assert comparable(through) == comparable(seen)
    # the same venv seen from outside is the same environment at another path
    code, out, err = run(capsys, "--inventory", str(inv), "diff", "here", "pod", "--probe")
    assert code == 0, out + err
    assert "pod against here: no drift" in err
    # the import check runs inside: a failing module is told at its path there
    spec = load_inventory(str(inv)).host("pod")
    ok, failed = check_imports(spec, make_runner(spec), ["svc.main", "svc.broken"], timeout=60)
    assert ok.ok and not failed.ok and failed.message == "only a test"
    assert failed.file is not None and failed.file.startswith(f"{VENV}/lib/")


def test_exec_on_an_ssh_host_runs_the_prefix_there_quoted(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    containers: Start,
    venv_root: Path,
    sshd_bed: SSHD,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    ct = containers(venv_root)
    known = tmp_path / "known_hosts"
    known.write_text(sshd_bed.host_key_line())
    evil = ["svc", "x'; touch PWNED; echo '", "$(touch PWNED2)"]
    ssh = (
        f'ssh = "{sshd_bed.target}"\nidentity = "{sshd_bed.client_key}"\nknown_hosts = "{known}"\n'
    )
    inv = write_inventory(
        tmp_path / "inv.toml",
        '[service]\ncommand = ["{python}", "-m", "svc.main"]\n',
        host_table("pod", ct.exec_prefix),
        host_table("remote-pod", ct.exec_prefix, extra=ssh),
    )
    inv.write_text(inv.read_text().replace(json.dumps(WATCH), json.dumps(evil)))
    code, out, err = run(
        capsys, "--inventory", str(inv), "-q", "snapshot", "remote-pod", "pod", "--no-cache"
    )
    assert code == 0, err
    remote, local = json.loads(out)["snapshots"]
    assert remote["interpreter"]["executable"] == INSIDE
    assert comparable(remote) == comparable(local)
    for where in (tmp_path, Path.home(), Path("/root"), Path("/")):
        assert not list(where.glob("PWNED*")), where


def failing(capsys: pytest.CaptureFixture[str], inv: Path, *args: str) -> tuple[str, float]:
    import time

    started = time.monotonic()
    code, out, err = run(capsys, "--inventory", str(inv), "snapshot", "pod", *args)
    took = time.monotonic() - started
    assert (code, out) == (3, ""), err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("envsync: pod: "), err
    assert "Traceback" not in err
    return lines[0], took


def test_each_failure_of_the_prefix_exits_3_with_its_own_message(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, containers: Start, venv_root: Path
) -> None:
    ct = containers(venv_root)
    prefix = ct.exec_prefix
    inv = tmp_path / "inv.toml"

    write_inventory(inv, host_table("pod", ["envsync-no-such-runtime", "exec", "-i", "c1"]))
    line, _ = failing(capsys, inv)
    assert line == (
        "envsync: pod: `envsync-no-such-runtime`, the program of hosts.pod.exec, is not installed "
        "on this machine (Tip: install envsync-no-such-runtime there, or give its full path in "
        "exec)"
    )

    write_inventory(inv, host_table("pod", prefix, python="/opt/venv/bin/python9"))
    line, _ = failing(capsys, inv)
    assert "pod: python '/opt/venv/bin/python9' cannot be run inside `" in line
    assert "failed to execute /opt/venv/bin/python9: No such file or directory" in line

    # the user envsync runs as may not enter it (like a user outside the docker group)
    denied = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *prefix]
    write_inventory(inv, host_table("pod", denied))
    line, _ = failing(capsys, inv)
    assert line.startswith("envsync: pod: permission denied running `setpriv --reuid=65534")
    assert f"nsenter: cannot open /proc/{ct.pid}/ns/" in line and "Permission denied" in line

    # a prefix that waits (for a lock here; for an allocation or an API server elsewhere)
    lock = tmp_path / "lock"
    with lock.open("w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        write_inventory(inv, host_table("pod", ["flock", str(lock), *prefix]))
        line, took = failing(capsys, inv, "--timeout", "2")
    assert line.startswith(f"envsync: pod: `flock {lock} /usr/bin/nsenter") or line.startswith(
        f"envsync: pod: `flock {lock} "
    )
    assert "did not reach the interpreter inside within 2s" in line and "raise --timeout" in line
    assert took < 10

    # the container stops: what `docker exec` into a stopped container meets
    write_inventory(inv, host_table("pod", prefix))
    assert run(capsys, "--inventory", str(inv), "-q", "snapshot", "pod")[0] == 0
    ct.stop()
    line, _ = failing(capsys, inv)
    assert line.startswith(
        f"envsync: pod: the container, pod or node of `{' '.join(prefix)}` is not running or "
        f"does not exist: nsenter: cannot open /proc/{ct.pid}/ns/"
    )
    assert line.endswith("(Tip: start it, or fix hosts.pod.exec)")


def test_a_missing_prefix_program_on_the_ssh_host(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, sshd_bed: SSHD
) -> None:
    known = tmp_path / "known_hosts"
    known.write_text(sshd_bed.host_key_line())
    inv = write_inventory(
        tmp_path / "inv.toml",
        host_table(
            "pod",
            ["envsync-no-such-runtime", "exec", "-i", "c1"],
            extra=f'ssh = "{sshd_bed.target}"\nidentity = "{sshd_bed.client_key}"\n'
            f'known_hosts = "{known}"\n',
        ),
    )
    line, _ = failing(capsys, inv)
    assert line.startswith(
        "envsync: pod: `envsync-no-such-runtime`, the program of hosts.pod.exec, is not installed "
        f"on {sshd_bed.target}: "
    )
    assert "envsync-no-such-runtime: command not found" in line or "not found" in line
