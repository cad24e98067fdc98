"""A real OpenSSH sshd on loopback for envsync's tests: keys made in a temporary folder.

As a module: `SSHD(folder).start()` (the pytest fixture in conftest uses it). As a script,
for `.ci/run` or by hand:

    python tests/sshd.py start FOLDER [--count N]   # prints one `PORT` line per sshd
    python tests/sshd.py stop FOLDER
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

SSHD_BIN = shutil.which("sshd") or "/usr/sbin/sshd"
KEYGEN = shutil.which("ssh-keygen") or "/usr/bin/ssh-keygen"


def available() -> str | None:
    """Why the test bed cannot run here, or None when it can."""
    if not os.path.exists(SSHD_BIN):
        return "no sshd (apt-get install openssh-server)"
    if not os.path.exists(KEYGEN):
        return "no ssh-keygen"
    if os.geteuid() != 0:
        return "sshd's privilege separation needs root"
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def keygen(path: Path, kind: str = "ed25519") -> Path:
    if not path.exists():
        subprocess.run(
            [KEYGEN, "-q", "-t", kind, "-N", "", "-C", "envsync-test", "-f", str(path)],
            check=True,
            capture_output=True,
        )
    return path


class SSHD:
    """One sshd: its host key, an authorized client key, a port on 127.0.0.1."""

    def __init__(self, folder: Path, *, name: str = "sshd") -> None:
        self.folder = folder
        self.name = name
        folder.mkdir(parents=True, exist_ok=True)
        self.host_key = keygen(folder / f"{name}_host_ed25519_key")
        self.client_key = keygen(folder / "id_ed25519")
        self.authorized = folder / "authorized_keys"
        self.authorized.write_text(Path(f"{self.client_key}.pub").read_text())
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def target(self) -> str:
        return f"root@127.0.0.1:{self.port}"

    def host_key_line(self) -> str:
        """The known_hosts line for this sshd."""
        kind, key = Path(f"{self.host_key}.pub").read_text().split()[:2]
        return f"[127.0.0.1]:{self.port} {kind} {key}\n"

    def start(self, port: int | None = None) -> SSHD:
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # privilege separation
        self.port = port or free_port()
        config = self.folder / f"{self.name}_config"
        config.write_text(
            f"Port {self.port}\nListenAddress 127.0.0.1\nHostKey {self.host_key}\n"
            f"PidFile {self.folder / (self.name + '.pid')}\n"
            f"AuthorizedKeysFile {self.authorized}\n"
            "StrictModes no\nUsePAM no\nPasswordAuthentication no\n"
            "KbdInteractiveAuthentication no\nPubkeyAuthentication yes\n"
            "PermitRootLogin prohibit-password\nLogLevel VERBOSE\nMaxStartups 64\n"
            "MaxSessions 64\nSubsystem sftp internal-sftp\nPrintMotd no\nPrintLastLog no\nUseDNS no\n"
        )
        self.proc = subprocess.Popen(
            [SSHD_BIN, "-D", "-e", "-f", str(config)],
            stdout=subprocess.DEVNULL,
            stderr=open(self.folder / f"{self.name}.log", "ab"),  # noqa: SIM115
            start_new_session=True,
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                log = (self.folder / f"{self.name}.log").read_text()
                raise RuntimeError(f"sshd exited {self.proc.returncode}: {log.strip()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return self
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"sshd did not listen on {self.port} within 10s")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None


def main() -> int:
    parser = argparse.ArgumentParser(description="a loopback sshd for envsync's tests")
    parser.add_argument("action", choices=["start", "stop"])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--count", type=int, default=1)
    args = parser.parse_args()
    why = available()
    if why:
        print(f"sshd test bed unavailable: {why}", file=sys.stderr)
        return 1
    if args.action == "start":
        for i in range(args.count):
            sshd = SSHD(args.folder, name=f"sshd{i}").start()
            assert sshd.proc is not None
            (args.folder / f"sshd{i}.port").write_text(f"{sshd.port}\n")
            (args.folder / f"sshd{i}.procpid").write_text(f"{sshd.proc.pid}\n")
            print(sshd.port)
        return 0
    for pid_file in args.folder.glob("sshd*.procpid"):
        with contextlib.suppress(OSError, ValueError):
            os.kill(int(pid_file.read_text().strip()), signal.SIGTERM)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
