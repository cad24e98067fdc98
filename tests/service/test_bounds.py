"""Bounds and services, on real processes: a grandchild that keeps a command's pipes open,
an agent that fails unforeseen, a service that daemonizes, one whose generation answers 503
while it loads, and a stdout that cannot take the verdict.

- `--timeout` bounds a host command even when a `setsid` grandchild holds its stdout (a
  sitecustomize that leaves one behind), locally and over SSH;
- agent errors are one line with a tip, never a traceback's fragment;
- a service that double-forks (its first process exits 0) is tracked by the mark its
  processes inherit: smoke-tested ready, stopped whole, its port free for the next deploy;
- `/health` 200 while `/generate` answers 503: not ready yet until the deadline, not a crash.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from envsync.errors import AgentError
from tests.figures import add
from tests.helpers import make_venv, site_packages
from tests.helpers import run_cli as run
from tests.sshd import SSHD, free_port


def held(case: str) -> None:
    add("bounds and services (real processes)", case)


def sleepers(tag: str) -> list[int]:
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        with contextlib.suppress(OSError):
            if tag.encode() in cmdline.read_bytes():
                found.append(int(cmdline.parent.name))
    return found


@pytest.fixture
def holding_venv(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    """A venv whose sitecustomize leaves a `setsid` child holding the interpreter's stdout
    and stderr for 100 s (every run of its python, the probe's included)."""
    python = make_venv(tmp_path / "venv")
    tag = f"envsync-holder-{os.getpid()}-{time.monotonic_ns()}"
    (site_packages(python) / "sitecustomize.py").write_text(
        "import os, subprocess, sys\n"
        "if not os.environ.get('HOLDER_CHILD'):\n"
        "    subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(100)', "
        f"{tag!r}], start_new_session=True, env=dict(os.environ, HOLDER_CHILD='1'))\n"
        "    if os.environ.get('HOLDER_HANG'):\n"
        "        import time; time.sleep(100)\n"
    )
    yield python, tag
    for pid in sleepers(tag):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def test_timeout_bounds_a_command_whose_grandchild_keeps_its_pipes(
    capsys: pytest.CaptureFixture[str],
    holding_venv: tuple[Path, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    python, tag = holding_venv
    inv = tmp_path / "envsync.toml"
    inv.write_text(f'[hosts.h]\npython = "{python}"\n')
    started = time.monotonic()
    code, out, err = run(capsys, "--inventory", str(inv), "snapshot", "h", "--timeout", "5")
    took = time.monotonic() - started
    assert code == 0, err  # the probe finished: its output is whole
    assert json.loads(out)["host"] == "h"
    assert took < 5, took
    assert sleepers(tag)  # the grandchild still holds the pipes: it was not waited for
    held("a setsid grandchild holding the probe's pipes (local)")
    # the probe itself hangs too: the timeout ends it, whatever the grandchild holds
    monkeypatch.setenv("HOLDER_HANG", "1")
    started = time.monotonic()
    code, _, err = run(capsys, "--inventory", str(inv), "snapshot", "h", "--timeout", "5")
    took = time.monotonic() - started
    assert code == 3, err
    assert "did not finish within 5s" in err.strip().splitlines()[-1]
    assert took < 12, took
    held("--timeout 5 with a hung probe and a grandchild holding its pipes")


def test_timeout_bounds_it_over_ssh_too(
    capsys: pytest.CaptureFixture[str],
    holding_venv: tuple[Path, str],
    tmp_path: Path,
    sshd_bed: SSHD,
) -> None:
    python, _ = holding_venv
    inv = tmp_path / "envsync.toml"
    known = tmp_path / "known_hosts"
    known.write_text(sshd_bed.host_key_line())
    inv.write_text(
        f'[hosts.h]\nssh = "{sshd_bed.target}"\npython = "{python}"\n'
        f'identity = "{sshd_bed.client_key}"\nknown_hosts = "{known}"\n'
    )
    started = time.monotonic()
    code, out, err = run(capsys, "--inventory", str(inv), "snapshot", "h", "--timeout", "5")
    took = time.monotonic() - started
    assert code == 0, err
    assert json.loads(out)["host"] == "h"
    assert took < 8, took
    held("a setsid grandchild holding the probe's pipes (SSH)")


def test_agent_errors_are_one_line_with_a_tip(tmp_path: Path) -> None:
    from envsync.runner.agent import Agent
    from envsync.runner.local import LocalRunner
    from envsync.sources.inventory import HostSpec

    python = make_venv(tmp_path / "venv")
    agent = Agent(HostSpec(name="h", python=str(python)), LocalRunner("h"))
    # an operation the agent did not foresee failing: it raises in the middle of its work
    with pytest.raises(AgentError) as caught:
        agent.call({"op": "journal", "event": "x"})
    line = str(caught.value)
    assert "\n" not in line and "Traceback" not in line and 'File "' not in line, line
    assert line.startswith("h: journal: the host agent failed: KeyError: 'id'"), line
    assert "(Tip: " in line
    # an agent killed outright says so
    killer = tmp_path / "killed-python"
    killer.write_text("#!/bin/sh\nkill -9 $$\n")
    killer.chmod(0o755)
    with pytest.raises(AgentError) as caught:
        Agent(HostSpec(name="h", python=str(killer)), LocalRunner("h")).call({"op": "backups"})
    assert "the host agent failed: killed by SIGKILL" in str(caught.value)
    held("agent errors: one line with a tip")


# -- services -------------------------------------------------------------------------------

SERVER = """\
import json, os, sys, time
from http.server import BaseHTTPRequestHandler, HTTPServer

port = int(sys.argv[sys.argv.index("--port") + 1])
daemon = "--daemonize" in sys.argv
loading = float(sys.argv[sys.argv.index("--503-for") + 1]) if "--503-for" in sys.argv else 0
if daemon:
    if os.fork():
        sys.exit(0)  # the first process exits 0, as a daemon's does
    os.setsid()
    if os.fork():
        os._exit(0)
ready_at = time.monotonic() + loading


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_GET(self):
        self.send_response(200 if self.path == "/health" else 404)
        self.end_headers()

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if time.monotonic() < ready_at:
            self.send_response(503)
            self.end_headers()
            return
        body = json.dumps({"text": "hi", "meta_info": {"completion_tokens": 8}}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


print("serving on", port, "pid", os.getpid(), flush=True)
HTTPServer(("127.0.0.1", port), Handler).serve_forever()
"""


def service_inventory(tmp_path: Path, *args: str) -> tuple[Path, int]:
    python = make_venv(tmp_path / "venv")
    server = tmp_path / "server.py"
    server.write_text(SERVER)
    port = free_port()
    command = json.dumps(["{python}", str(server), "--port", "{port}", *args])
    inv = tmp_path / "envsync.toml"
    inv.write_text(
        f'[defaults]\ntarget = "h"\n[service]\ncommand = {command}\nport = {port}\n'
        f'health = "/health"\n[hosts.h]\npython = "{python}"\n'
    )
    return inv, port


def port_free(port: int) -> bool:
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def marked(inv: Path) -> list[int]:
    """The processes that carry the mark of the service envsync started from `inv`'s venv."""
    found = []
    for environ in Path("/proc").glob("[0-9]*/environ"):
        with contextlib.suppress(OSError):
            if b"ENVSYNC_SERVICE=" in environ.read_bytes() and str(inv.parent).encode() in (
                environ.read_bytes()
            ):
                found.append(int(environ.parent.name))
    return found


def test_a_daemonizing_service_is_tracked_ready_and_stopped_whole(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    inv, port = service_inventory(tmp_path, "--daemonize")
    try:
        code, out, err = run(
            capsys, "--inventory", str(inv), "-q", "deploy", "h", "--deadline", "30"
        )
        assert code == 0, out + err
        assert out.startswith("h: ready in ") and "tokens/s" in out, out
        assert marked(inv) and not port_free(port)
        code, out, err = run(
            capsys, "--inventory", str(inv), "-q", "smoke", "h", "--deadline", "10"
        )
        assert code == 0 and "ready" in out, out + err
        # a second deploy stops the daemon first: the port is free for the new one
        code, out, err = run(
            capsys, "--inventory", str(inv), "-q", "deploy", "h", "--deadline", "30"
        )
        assert code == 0, out + err
        code, _, err = run(capsys, "--inventory", str(inv), "stop", "h")
        assert code == 0 and "h: stopped process " in err, err
        assert marked(inv) == [] and port_free(port)
        code, out, _ = run(capsys, "--inventory", str(inv), "-q", "smoke", "h", "--deadline", "5")
        assert code == 5 and "not running" in out
    finally:
        for pid in marked(inv):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    held("a daemonizing service: ready, stopped whole, port freed")


def test_generation_answering_503_while_loading_is_not_ready_yet_not_a_crash(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    inv, _ = service_inventory(tmp_path, "--503-for", "4")
    try:
        code, out, err = run(
            capsys, "--inventory", str(inv), "-q", "deploy", "h", "--deadline", "60"
        )
        assert code == 0, out + err
        assert out.startswith("h: ready in ")
        took = float(out.split()[3].rstrip("s;"))
        assert took >= 3.5, out
        held("/health 200, /generate 503 for 4 s: ready once it serves")
        run(capsys, "--inventory", str(inv), "stop", "h")
        # 503 past the deadline: stalled (not ready), never CRASHED
        inv.write_text(inv.read_text().replace('"--503-for", "4"', '"--503-for", "600"'))
        code, out, err = run(
            capsys, "--inventory", str(inv), "-q", "deploy", "h", "--deadline", "3"
        )
        assert code == 5, out + err
        assert out.startswith("h: STALLED: healthy, but /generate answered 503 (not ready yet)")
        assert "CRASHED" not in out
        held("/generate 503 past the deadline: stalled, not crashed")
    finally:
        run(capsys, "--inventory", str(inv), "stop", "h")


def test_a_verdict_stdout_cannot_take_leaves_the_exit_code_as_it_is(tmp_path: Path) -> None:
    import subprocess
    import sys

    inv, _ = service_inventory(tmp_path)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENVSYNC_")}
    try:
        with open("/dev/full", "w") as full:
            done = subprocess.run(
                [sys.executable, "-m", "envsync", "--inventory", str(inv), "-q", "deploy", "h",
                 "--deadline", "30"],
                env=env, stdout=full, stderr=subprocess.PIPE, text=True,
            )  # fmt: skip
        assert done.returncode == 0, done.stderr  # ready: the work and its exit code stand
        line = done.stderr.strip().splitlines()[-1]
        assert line.startswith("envsync: stdout: cannot show the result (No space left on device)")
        assert "the command's outcome is its exit code, 0" in line
    finally:
        subprocess.run(
            [sys.executable, "-m", "envsync", "--inventory", str(inv), "-q", "stop", "h"], env=env
        )
    held("a deploy whose stdout is full: exit code stands, one line")
