"""SSHRunner: commands on a remote host over one Fabric connection, host keys verified.

Fabric's own default (auto-add any host key, read no known_hosts) is never in effect: the
known keys come from the inventory's `known_hosts`, else `UserKnownHostsFile` from
~/.ssh/config, else ~/.ssh/known_hosts (plus /etc/ssh/ssh_known_hosts). An unknown key is
refused unless the policy is `accept-new` (then it is appended, as OpenSSH's
StrictHostKeyChecking=accept-new does); a changed key is always refused.

Jump hosts (the inventory's `jump`, else `ProxyJump` in ~/.ssh/config) are connected in
turn, each through the one before, each key verified under that same policy; the target is
then reached through a forwarded channel of the last one, as `ssh -J` does.
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import shlex
import socket
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import paramiko
from fabric import Config, Connection
from paramiko.hostkeys import HostKeyEntry

from envsync.errors import CommandTimeout, HostKeyError, RunnerError, SSHError
from envsync.model.inventory import HostSpec, jump_hops, parse_target
from envsync.runner.base import (
    CONNECT_TIMEOUT,
    EXIT_GRACE,
    CommandResult,
    check_stopping,
    keep_tail,
    stdout_cap,
    stopping,
    too_much,
)

# paramiko logs transport errors itself; envsync reports each one as its own line.
logging.getLogger("paramiko").addHandler(logging.NullHandler())
SYSTEM_KNOWN_HOSTS = "/etc/ssh/ssh_known_hosts"
# What paramiko raises on a damaged known_hosts line (bad base64 is a ValueError, a file
# not in UTF-8 a UnicodeDecodeError, a key it cannot parse InvalidHostKey).
_BAD_KNOWN_HOSTS = (OSError, ValueError, paramiko.SSHException, paramiko.hostkeys.InvalidHostKey)


def remote_command(argv: Sequence[str]) -> str:
    """argv as one command line for the remote shell: every word quoted, data never code."""
    return shlex.join(argv)


def fingerprint(key: paramiko.PKey) -> str:
    return str(key.fingerprint)  # "SHA256:..." like ssh-keygen -l


class _AcceptNew(paramiko.MissingHostKeyPolicy):
    """Add an unknown key and append it to the known_hosts file (never a changed one)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.lock = threading.Lock()

    def missing_host_key(
        self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey
    ) -> None:
        client.get_host_keys().add(hostname, key.get_name(), key)
        line = HostKeyEntry([hostname], key).to_line()
        with self.lock:
            self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            with os.fdopen(fd, "a") as f:
                f.write(line)


class _Refuse(paramiko.MissingHostKeyPolicy):
    def missing_host_key(
        self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey
    ) -> None:
        raise _UnknownKey(hostname, key)


class _UnknownKey(paramiko.SSHException):
    def __init__(self, hostname: str, key: paramiko.PKey) -> None:
        super().__init__(hostname)
        self.hostname = hostname
        self.key = key


def _target(host: str, key: str, value: str) -> tuple[str | None, str, int | None]:
    try:
        return parse_target(value)
    except ValueError as e:
        raise RunnerError(f"{host}: {key}: {e}") from e


class SSHRunner:
    """One host, one SSH connection (opened on first use, closed by close())."""

    def __init__(
        self,
        spec: HostSpec,
        *,
        accept_new: bool = False,
        connect_timeout: float = CONNECT_TIMEOUT,
        max_stdout: int | None = None,  # None: the capped() block's, if any
    ) -> None:
        if spec.ssh is None:
            raise RunnerError(f"{spec.name}: not an SSH host")
        self.host = spec.name
        self.spec = spec
        self.user, self.hostname, self.port = _target(spec.name, "ssh", spec.ssh)
        self.accept_new = accept_new or spec.host_key_policy == "accept-new"
        self.connect_timeout = connect_timeout
        self.max_stdout = max_stdout
        self._conn: Connection | None = None
        self._hops: list[Connection] = []  # the jump hosts' connections, first hop first
        self._lock = threading.Lock()

    # -- connection ---------------------------------------------------------------------

    def _known_hosts(self, conn: Connection) -> Path:
        if self.spec.known_hosts:
            return Path(self.spec.known_hosts)
        configured = conn.ssh_config.get("userknownhostsfile")
        if configured:
            return Path(os.path.expanduser(str(configured).split()[0]))
        return Path(os.path.expanduser("~/.ssh/known_hosts"))

    def _where(self, conn: Connection | None = None) -> str:
        host = conn.host if conn else self.hostname
        port = conn.port if conn else (self.port or 22)
        return f"{host}:{port}"

    def connection(self) -> Connection:
        with self._lock:
            if self._conn is None:
                self._conn = self._open()
            return self._conn

    def _make(
        self,
        hostname: str,
        user: str | None,
        port: int | None,
        gateway: Connection | bool,
        target: Connection | None = None,
    ) -> Connection:
        """A connection (not yet open) whose host key is checked under the host's policy.

        A jump host is given the `target`'s known hosts file and keys as well as its own,
        as one login usually opens both.
        """
        kwargs: dict[str, object] = {
            "banner_timeout": self.connect_timeout,
            "auth_timeout": self.connect_timeout,
        }
        keys = [self.spec.identity] if self.spec.identity else []
        if target is not None:
            keys += [k for k in target.connect_kwargs.get("key_filename", []) if k not in keys]
        if keys:
            kwargs["key_filename"] = keys
        # gateway=False: no gateway from ~/.ssh/config behind envsync's back (Fabric's
        # own ProxyJump connections would accept any host key).
        conn = Connection(
            host=hostname,
            user=user,
            port=port,
            connect_timeout=int(max(1, self.connect_timeout)),
            connect_kwargs=kwargs,
            config=Config(),
            gateway=gateway,
        )
        known = self._known_hosts(target or conn)
        client = conn.client
        if os.path.exists(SYSTEM_KNOWN_HOSTS):
            with contextlib.suppress(*_BAD_KNOWN_HOSTS):
                client.load_system_host_keys(SYSTEM_KNOWN_HOSTS)
        if known.exists():
            try:
                client.get_host_keys().load(str(known))
            except _BAD_KNOWN_HOSTS as e:
                first = (str(e).strip().splitlines() or [type(e).__name__])[0]
                raise HostKeyError(
                    f"{self.host}: cannot read known hosts {known}: {first}",
                    tip="fix or remove the bad line (ssh-keygen -R HOST -f FILE)",
                ) from e
        client.set_missing_host_key_policy(_AcceptNew(known) if self.accept_new else _Refuse())
        return conn

    def _open(self) -> Connection:
        for hop in self._hops:  # of an earlier attempt that failed
            hop.close()
        self._hops.clear()
        target = self._make(self.hostname, self.user, self.port, False)
        known = self._known_hosts(target)
        if self.spec.jump is not None:
            hops, key = jump_hops(self.spec.jump), "jump"
        else:
            hops, key = jump_hops(str(target.ssh_config.get("proxyjump", "none"))), "ProxyJump"
        gateway: Connection | None = None
        for hop in hops:
            user, hostname, port = _target(self.host, key, hop)
            conn = self._make(hostname, user, port, gateway or False, target)
            self._connect(conn, "jump host ", known, via=gateway)
            self._hops.append(conn)
            gateway = conn
        if gateway is not None:
            target.gateway = gateway
            # The forwarded channel to the target is asked for within the connect timeout.
            if gateway.transport is not None:
                gateway.transport.channel_timeout = self.connect_timeout
        else:
            command = str(target.ssh_config.get("proxycommand", "none"))
            target.gateway = command if command.lower() != "none" else False
        self._connect(target, "", known, via=gateway)
        return target

    def _connect(self, conn: Connection, what: str, known: Path, via: Connection | None) -> None:
        """Open `conn`; each failure its own message (`what`: "" or "jump host ")."""
        where = what + self._where(conn)
        through = f" through {self._where(via)}" if via is not None else ""
        try:
            conn.open()
        except _UnknownKey as e:
            scan = (
                f"ssh -o UserKnownHostsFile={known} -J {self._where(via)} -p {conn.port} "
                f"{conn.host} true"
                if via is not None
                else f"ssh-keyscan -p {conn.port} {conn.host} >> {known}"
            )
            raise HostKeyError(
                f"{self.host}: host key of {where} is not known ({e.key.get_name()} "
                f"{fingerprint(e.key)}); refusing to connect",
                tip=f"check the fingerprint, then add the key to {known} ({scan}), or set "
                'host_key_policy = "accept-new" (or pass --accept-new-host-keys)',
            ) from e
        except paramiko.BadHostKeyException as e:
            raise HostKeyError(
                f"{self.host}: host key of {where} has CHANGED (known "
                f"{fingerprint(e.expected_key)}, offered {fingerprint(e.key)}); "
                "refusing to connect",
                tip="if the host was reinstalled, remove the old key with "
                f"ssh-keygen -R '[{conn.host}]:{conn.port}' -f {known} and verify the new one",
            ) from e
        except paramiko.AuthenticationException as e:
            raise SSHError(
                f"{self.host}: authentication failed for {conn.user}@{where}",
                tip="check the inventory's identity, your ssh-agent, "
                "and the host's authorized_keys",
            ) from e
        except paramiko.ChannelException as e:
            raise SSHError(
                f"{self.host}: the jump host{through} could not reach {where}: {e.text or e}",
                tip="is sshd running there, and may the jump host forward to it "
                "(AllowTcpForwarding)?",
            ) from e
        except paramiko.ssh_exception.NoValidConnectionsError as e:
            raise SSHError(
                f"{self.host}: connection refused by {where}", tip="is sshd running there?"
            ) from e
        except socket.gaierror as e:
            raise SSHError(f"{self.host}: cannot resolve {conn.host!r}: {e.strerror}") from e
        except TimeoutError as e:
            raise SSHError(
                f"{self.host}: connecting to {where}{through} timed out after "
                f"{self.connect_timeout:g}s"
            ) from e
        except paramiko.SSHException as e:
            if "banner" in str(e) or "No existing session" in str(e):
                raise SSHError(
                    f"{self.host}: {where} did not answer as an SSH server within "
                    f"{self.connect_timeout:g}s ({e})"
                ) from e
            raise SSHError(f"{self.host}: SSH failed with {where}{through}: {e}") from e
        except OSError as e:
            raise SSHError(f"{self.host}: cannot connect to {where}: {e.strerror or e}") from e

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
            for hop in reversed(self._hops):
                hop.close()
            self._hops.clear()

    # -- commands -----------------------------------------------------------------------

    def run(
        self, argv: Sequence[str], *, input: bytes | None = None, timeout: float
    ) -> CommandResult:
        """Run argv (quoted for the remote shell: data is never code) and collect it all."""
        argv = tuple(argv)
        check_stopping(self.host)
        command = remote_command(argv)
        conn = self.connection()
        started = time.perf_counter()
        try:
            transport = conn.client.get_transport()
            if transport is None or not transport.is_active():
                raise SSHError(f"{self.host}: the SSH connection to {self._where(conn)} was lost")
            channel = transport.open_session(timeout=self.connect_timeout)
            channel.exec_command(command)
            if input:
                channel.sendall(input)
            channel.shutdown_write()
            out, err = bytearray(), bytearray()
            cap = stdout_cap(self.max_stdout)
            deadline = started + timeout
            exited: float | None = None
            read_at = 0.0  # the last bytes' time: the grace runs from it, or from the exit
            while True:
                while channel.recv_ready():
                    read_at = time.perf_counter()
                    out += channel.recv(1 << 16)
                    if cap is not None and len(out) > cap:
                        channel.close()
                        raise too_much(self.host, argv[0], cap)
                while channel.recv_stderr_ready():
                    read_at = time.perf_counter()
                    err += channel.recv_stderr(1 << 16)
                    keep_tail(err)
                # Done at end of file, not at exit status: sshd may report the exit
                # before the last output, which waits for window space, has arrived.
                if (channel.eof_received or channel.closed) and not (
                    channel.recv_ready() or channel.recv_stderr_ready()
                ):
                    break
                # ... but a grandchild that keeps the command's pipes open (a `setsid`
                # child) holds the end of file back for as long as it lives: once the
                # command has exited, what is left gets a grace, not the whole timeout. The
                # grace runs from the last bytes too: output still arriving (a slow link, a
                # loaded machine) is read whole.
                if exited is None and channel.exit_status_ready():
                    exited = time.perf_counter()
                if exited is not None and time.perf_counter() - max(exited, read_at) > EXIT_GRACE:
                    break
                left = deadline - time.perf_counter()
                if stopping():
                    channel.close()
                    check_stopping(self.host)
                if left <= 0:
                    channel.close()
                    raise CommandTimeout(
                        f"{self.host}: {argv[0]} did not finish within {timeout:g}s",
                        stderr=bytes(err),
                    )
                if channel.closed and not channel.exit_status_ready():
                    raise SSHError(
                        f"{self.host}: the SSH connection to {self._where(conn)} was lost"
                    )
                select.select([channel], [], [], min(left, 0.5 if exited is None else 0.05))
            code = channel.recv_exit_status()
            channel.close()
        except (paramiko.SSHException, EOFError, OSError) as e:
            raise SSHError(
                f"{self.host}: the SSH connection to {self._where(conn)} failed: {e}"
            ) from e
        return CommandResult(
            argv=argv,
            returncode=code,
            stdout=bytes(out),
            stderr=bytes(err),
            duration_s=time.perf_counter() - started,
        )
