"""A real OpenSSH sshd on loopback for envsync's tests: keys made in a temporary folder.

As a module: `SSHD(folder).start()` (the pytest fixture in conftest uses it);
`JumpBed(folder).start()` for a bastion and a target that only the bastion can reach. As a
script, for `.ci/run` or by hand:

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
import threading
import time
from collections.abc import Sequence
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

    def host_lines(self, known_hosts: Path) -> str:
        """An inventory host's lines for this sshd; its key is written to `known_hosts`."""
        known_hosts.write_text(self.host_key_line())
        return (
            f'ssh = "{self.target}"\nidentity = "{self.client_key}"\n'
            f'known_hosts = "{known_hosts}"\n'
        )

    @property
    def log(self) -> Path:
        return self.folder / f"{self.name}.log"

    def start(self, port: int | None = None, *, netns: Sequence[str] = ()) -> SSHD:
        """Listen on 127.0.0.1:port; `netns`: a prefix that runs sshd in another network
        namespace (then its loopback is not this one's)."""
        config = self.write_config(port)
        self.proc = subprocess.Popen(
            [*netns, SSHD_BIN, "-D", "-e", "-f", str(config)],
            stdout=subprocess.DEVNULL,
            stderr=open(self.log, "ab"),  # noqa: SIM115
            start_new_session=True,
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"sshd exited {self.proc.returncode}: {self.log.read_text()}")
            if netns:
                if f"Server listening on 127.0.0.1 port {self.port}" in self.log.read_text():
                    return self
                time.sleep(0.05)
                continue
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return self
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"sshd did not listen on {self.port} within 10s")

    def write_config(self, port: int | None = None) -> Path:
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
        return config

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None


class JumpBed:
    """A bastion and a target sshd; only the bastion can reach the target.

    The target listens on 127.0.0.1 of a network namespace of its own (made by bubblewrap,
    loopback only). The bastion is an OpenSSH sshd in inetd mode (`sshd -i`), started in
    that namespace for each connection to its port on this machine's 127.0.0.1: its
    forwarded channels connect from inside, so the target answers it, and nothing else.
    """

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self.bastion = SSHD(folder, name="bastion")
        self.target = SSHD(folder, name="target")
        self.netns: subprocess.Popen[bytes] | None = None
        self.netns_pid = 0
        self.listener: socket.socket | None = None
        self.sessions: list[subprocess.Popen[bytes]] = []

    def enter(self) -> list[str]:
        """The prefix that runs a program in the private network namespace."""
        nsenter = shutil.which("nsenter") or "/usr/bin/nsenter"
        return [nsenter, "--target", str(self.netns_pid), "--net", "--"]

    def start(self) -> JumpBed:
        from tests.container import sandbox

        self.netns, self.netns_pid = sandbox(["--bind", "/", "/", "--dev", "/dev", "--unshare-net"])
        self.target.start(netns=self.enter())
        config = self.bastion.write_config()
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.bastion.port))
        listener.listen(16)
        self.listener = listener
        argv = [*self.enter(), SSHD_BIN, "-i", "-e", "-f", str(config)]
        threading.Thread(target=self._serve, args=(listener, argv), daemon=True).start()
        return self

    def _serve(self, listener: socket.socket, argv: list[str]) -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return  # closed by stop()
            with conn, open(self.bastion.log, "ab") as log:
                self.sessions.append(
                    subprocess.Popen(argv, stdin=conn.fileno(), stdout=conn.fileno(), stderr=log)
                )

    def stop(self) -> None:
        if self.listener is not None:
            self.listener.close()
            self.listener = None
        for session in self.sessions:
            if session.poll() is None:
                session.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                session.wait(timeout=5)
        self.target.stop()
        if self.netns is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.netns_pid, signal.SIGKILL)
            self.netns.wait(timeout=10)
            self.netns = None


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
