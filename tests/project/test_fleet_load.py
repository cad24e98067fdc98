"""Load: a fleet of 50 hosts in one `snapshot` and one `check`, one hanging, one refusing.

45 local hosts (eight real venvs, each named by several hosts), 3 hosts over real OpenSSH,
one SSH host that accepts the connection and never answers (a hung machine), and one whose
port refuses. envsync runs as its own process: the time is bounded by --timeout and
--connect-timeout, every other host is reported, and its peak memory is measured.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.figures import put
from tests.helpers import make_venv, make_wheel, pip_install
from tests.sshd import SSHD, free_port

pytestmark = pytest.mark.slow
LOCAL, SSH = 45, 3
FLEET = LOCAL + SSH + 2


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port that accepts connections and never says a word (a hung host's sshd)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    thread.join()
    for conn in held:
        conn.close()
    server.close()


_PEAKS: dict[int, int] = {}


def watch_peak(pid_holder: list[int], stop: threading.Event) -> None:
    """VmHWM of the envsync process, read until it exits."""
    while not stop.is_set():
        for pid in list(pid_holder):
            try:
                for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                    if line.startswith("VmHWM:"):
                        _PEAKS[pid] = max(_PEAKS.get(pid, 0), int(line.split()[1]))
            except OSError:
                pass
        time.sleep(0.05)


def run_measured(argv: list[str], home: Path) -> tuple[int, str, str, float, float]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENVSYNC_")}
    env["HOME"] = str(home)
    pids: list[int] = []
    stop = threading.Event()
    watcher = threading.Thread(target=watch_peak, args=(pids, stop), daemon=True)
    watcher.start()
    started = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-m", "envsync", *argv],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    pids.append(proc.pid)
    out, err = proc.communicate(timeout=600)
    seconds = time.monotonic() - started
    stop.set()
    watcher.join()
    return proc.returncode, out, err, seconds, _PEAKS.get(proc.pid, 0) / 1024


def test_a_fleet_of_50_with_one_hanging_and_one_refusing(
    tmp_path: Path, sshd_bed: SSHD, silent_port: int
) -> None:
    wheels = tmp_path / "wheels"
    pkgs = [
        make_wheel(wheels, "pkg", f"1.{i}", {"pkg/__init__.py": f"V = {i}\n"}) for i in range(2)
    ]
    venvs = []
    for i in range(8):
        python = make_venv(tmp_path / f"venv{i}")
        pip_install(python, pkgs[i % 2])
        venvs.append(python)
    names = [f"h{i:02d}" for i in range(LOCAL)]
    text = '[defaults]\nwatch = ["pkg"]\n'
    for i, name in enumerate(names):
        text += f'[hosts.{name}]\npython = "{venvs[i % len(venvs)]}"\n'
    ssh_hosts = [f"s{i}" for i in range(SSH)] + ["hung", "refusing"]
    targets = [sshd_bed.target] * SSH + [
        f"root@127.0.0.1:{silent_port}",
        f"root@127.0.0.1:{free_port()}",
    ]
    for name, target in zip(ssh_hosts, targets, strict=True):
        lines = sshd_bed.host_lines(tmp_path / "known_hosts")
        text += f'[hosts.{name}]\npython = "{venvs[0]}"\n' + lines.replace(
            f'"{sshd_bed.target}"', f'"{target}"'
        )
    inv = tmp_path / "fleet.toml"
    inv.write_text(text)
    everyone = names + ssh_hosts
    assert len(everyone) == FLEET
    home = tmp_path / "home"
    home.mkdir()
    bounds = ["--timeout", "20", "--connect-timeout", "5", "--jobs", "16"]

    code, _, err, seconds, peak = run_measured(
        [
            "--inventory",
            str(inv),
            "-q",
            "snapshot",
            *everyone,
            "-o",
            str(tmp_path / "fleet.json"),
            *bounds,
        ],
        home,
    )
    assert code == 3, err
    doc = json.loads((tmp_path / "fleet.json").read_text())
    assert [s["host"] for s in doc["snapshots"]] == names + ssh_hosts[:SSH]
    failed = {e["host"]: e["error"] for e in doc["errors"]}
    assert set(failed) == {"hung", "refusing"}
    assert "connection refused" in failed["refusing"]
    assert "did not answer as an SSH server within 5s" in failed["hung"], failed["hung"]
    assert len(err.strip().splitlines()) == 2  # one line per failed host, nothing else
    assert seconds < 90, seconds
    put("fleet", "hosts in one command", FLEET)
    put("fleet", "snapshot: seconds", round(seconds, 1))
    put("fleet", "snapshot: peak RSS of envsync (MB)", round(peak, 1))

    lock = tmp_path / "ref.lock"
    code, _, err, _, _ = run_measured(
        ["--inventory", str(inv), "-q", "lock", "h00", "-o", str(lock)], home
    )
    assert code == 0, err
    code, out, err, seconds, peak = run_measured(
        [
            "--inventory",
            str(inv),
            "-q",
            "check",
            "--lock",
            str(lock),
            *everyone,
            "--format",
            "json",
            *bounds,
        ],
        home,
    )
    assert code == 3, err
    reported = [r["target"] for r in json.loads(out)["reports"]]
    assert sorted(reported) == sorted(names + ssh_hosts[:SSH])
    assert len(err.strip().splitlines()) == 2
    assert seconds < 120, seconds
    put("fleet", "check: seconds", round(seconds, 1))
    put("fleet", "check: peak RSS of envsync (MB)", round(peak, 1))
