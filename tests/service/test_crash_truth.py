"""A crash envsync watched is ground truth: the finding it matches becomes fatal on that
host, the command envsync prints fixes it (run here as printed), and the service is ready.

rich 15.0.0 defines split_graphemes (rich/cells.py:161); 13.7.1 does not. The service
picks its subcommand through a table (`COMMANDS[sys.argv[1]]()`), which no static reading
follows: the import inside `serve()` reads as lazy (degraded) until the crash proves it
runs at startup.
"""

from __future__ import annotations

import json
import shlex
import socket
import stat
from pathlib import Path

import pytest

from tests.classify.test_sglang_wheels import fetch
from tests.helpers import make_venv, pip_install
from tests.helpers import run_cli as run
from tests.sshd import free_port

pytestmark = pytest.mark.slow

SERVER = """\
import json, sys
from http.server import BaseHTTPRequestHandler, HTTPServer


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def _send(self, body):
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        self._send({"ok": True})

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self._send({"text": "hi", "meta_info": {"completion_tokens": 8}})


def serve():
    from rich.cells import split_graphemes  # noqa: F401  (startup, through the table)

    port = int(sys.argv[sys.argv.index("--port") + 1])
    HTTPServer(("127.0.0.1", port), Handler).serve_forever()


COMMANDS = {"serve": serve}
COMMANDS[sys.argv[1]]()
"""


@pytest.fixture()
def bed(tmp_path: Path, wheel_cache: Path) -> dict[str, Path]:
    new, old = fetch(wheel_cache, "rich==15.0.0"), fetch(wheel_cache, "rich==13.7.1")
    index = tmp_path / "index"
    index.mkdir()
    (index / new.name).write_bytes(new.read_bytes())
    ref, tgt = make_venv(tmp_path / "ref"), make_venv(tmp_path / "tgt", with_pip=True)
    pip_install(ref, new)
    pip_install(tgt, old)
    (tmp_path / "server.py").write_text(SERVER)
    command = ["{python}", str(tmp_path / "server.py"), "serve", "--port", "{port}"]
    inv = tmp_path / "envsync.toml"
    inv.write_text(
        f'[defaults]\nreference = "ref"\ntarget = "tgt"\n'
        f"[service]\ncommand = {json.dumps(command)}\nport = {free_port()}\n"
        f'[hosts.ref]\npython = "{ref}"\n'
        f'[hosts.tgt]\npython = "{tgt}"\nservice = {{ port = {free_port()} }}\n'
        f'pip_options = ["--no-index", "--find-links", "{index}"]\n'
    )
    return {"inv": inv, "tgt": tgt, "root": tmp_path}


def rich_of(capsys: pytest.CaptureFixture[str], inv: Path) -> dict:
    _, out, _ = run(capsys, "--inventory", str(inv), "-q", "diff", "--format", "json")
    return next((f for f in json.loads(out)["findings"] if f["subject"] == "rich"), {})


def test_crash_then_the_printed_command_then_ready(
    capsys: pytest.CaptureFixture[str], bed: dict[str, Path]
) -> None:
    inv = str(bed["inv"])
    before = rich_of(capsys, bed["inv"])
    assert before["severity"] == "degraded"  # statically: only inside a function
    try:
        code, out, err = run(capsys, "--inventory", inv, "-q", "deploy", "tgt", "--deadline", "60")
        assert code == 5, out + err
        first = out.splitlines()[0]
        assert first.startswith("tgt: CRASHED ")
        assert "ImportError: cannot import name 'split_graphemes' from 'rich.cells'" in first
        assert "cause (fatal finding of envsync diff ref tgt):" in out
        # the crash is kept on the host: diff, check and repair see it as ground truth
        after = rich_of(capsys, bed["inv"])
        assert (after["severity"], after["decided_by"]) == ("fatal", "crash")
        evidence = after["evidence"][0]
        assert evidence["source"] == "crash"
        assert "split_graphemes" in evidence["detail"]
        assert evidence["statement"].startswith('File "') and "server.py" in evidence["statement"]
        # the next command, run as printed
        nexts = [ln.split("next: ", 1)[1] for ln in out.splitlines() if "next: " in ln]
        assert nexts and nexts[0] == "envsync repair ref tgt --prefer fix --apply"
        argv = shlex.split(nexts[0])[1:]
        code, out, err = run(capsys, "--inventory", inv, "-q", *argv, "--deadline", "60")
        assert code == 0, out + err
        assert "tgt: ready in " in out
        assert rich_of(capsys, bed["inv"]) == {}  # pinned: no difference left
        code, out, _ = run(capsys, "--inventory", inv, "snapshot", "tgt")
        assert json.loads(out)["crash"] is None  # ready again: the crash is forgotten
    finally:
        run(capsys, "--inventory", inv, "-q", "stop", "tgt")


def test_a_crash_no_difference_explains_says_so(
    capsys: pytest.CaptureFixture[str], bed: dict[str, Path]
) -> None:
    # the reference itself crashes the same way once it has the old rich: not drift
    inv = bed["inv"]
    ref_python = bed["root"] / "ref" / "bin" / "python"
    text = inv.read_text().replace(f'python = "{ref_python}"', f'python = "{bed["tgt"]}"')
    same = bed["root"] / "same.toml"
    same.write_text(text)
    code, out, err = run(
        capsys, "--inventory", str(same), "-q", "deploy", "tgt", "--deadline", "60"
    )
    assert code == 5, out + err
    assert "  not drift: rich 13.7.1 on both hosts: no difference from ref explains it" in out
    assert 'last frame: File "' in out and "from rich.cells import split_graphemes" in out


def test_smoke_of_a_service_that_is_not_running(
    capsys: pytest.CaptureFixture[str], bed: dict[str, Path]
) -> None:
    code, out, err = run(capsys, "--inventory", str(bed["inv"]), "-q", "smoke", "ref")
    assert code == 5
    assert out == "ref: not running (`envsync deploy ref` starts it)\n"
    assert "CRASHED" not in out + err


def test_a_deploy_that_cannot_start_is_one_clean_line(
    capsys: pytest.CaptureFixture[str], bed: dict[str, Path]
) -> None:
    inv = bed["inv"]
    script = bed["root"] / "serve.sh"
    script.write_text("#!/bin/sh\nexec sleep 30\n")
    script.chmod(script.stat().st_mode & ~(stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH))
    noexec = bed["root"] / "noexec.toml"
    noexec.write_text(
        inv.read_text().replace(
            inv.read_text().split("command = ", 1)[1].split("\n", 1)[0], json.dumps([str(script)])
        )
    )
    code, out, err = run(capsys, "--inventory", str(noexec), "-q", "deploy", "ref")
    assert (code, out) == (5, "")
    assert err == f"envsync: ref: start: cannot start {script}: Permission denied\n"
    # the port is held by another process
    port = int(inv.read_text().split("port = ", 1)[1].split("\n", 1)[0])
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", port))
        holder.listen()
        code, out, err = run(capsys, "--inventory", str(inv), "-q", "deploy", "ref")
    assert (code, out) == (5, "")
    assert err == (
        f"envsync: ref: start: port {port} is already in use on this host (another service?)\n"
    )
