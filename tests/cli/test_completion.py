"""Shell completion in real shells: bash and zsh on a pseudo-terminal, typing and pressing TAB."""

from __future__ import annotations

import os
import pty
import select
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.helpers import REPO

BIN = Path(sys.executable).parent  # the venv's bin: envsync's own console script is there
INVENTORY = REPO / "examples" / "envsync.toml"


class Terminal:
    """A shell on a pseudo-terminal: what it echoes and prints is read back."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def read(self, until: str | None = None, timeout: float = 20.0) -> str:
        """Output until `until` appears (or, without it, until the shell is quiet)."""
        out = b""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.fd], [], [], 0.3)
            if not ready:
                if until is None and out:
                    break
                continue
            try:
                chunk = os.read(self.fd, 4096)
            except OSError:
                break
            out += chunk
            if until is not None and until in out.decode(errors="replace"):
                break
        return out.decode(errors="replace")

    def type(self, keys: str) -> None:
        os.write(self.fd, keys.encode())


@contextmanager
def shell(argv: list[str], home: Path, environ: dict[str, str]) -> Iterator[Terminal]:
    env = {
        "PATH": f"{BIN}:/usr/bin:/bin",
        "HOME": str(home),
        "TERM": "dumb",
        "LANG": "C.UTF-8",
        **environ,
    }
    pid, fd = pty.fork()
    if pid == 0:  # the child: becomes the shell
        os.chdir(home)
        os.execve(argv[0], argv, env)
    try:
        yield Terminal(fd)
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        os.close(fd)


@contextmanager
def bash(home: Path, **environ: str) -> Iterator[Terminal]:
    with shell(["/bin/bash", "--norc", "--noprofile", "-i"], home, environ) as term:
        term.type('PS1="ready> "; eval "$(envsync completion bash)"; echo loaded\n')
        assert "loaded" in term.read(until="loaded\r\nready> ")
        yield term


@contextmanager
def zsh(home: Path, **environ: str) -> Iterator[Terminal]:
    path = shutil.which("zsh")
    if path is None:
        pytest.skip("zsh is not installed (.ci/run installs it)")
    with shell([path, "-f", "-i"], home, environ) as term:
        term.type(
            'PS1="ready> "; autoload -U compinit && compinit -u; '
            'eval "$(envsync completion zsh)"; echo loaded\n'
        )
        assert "loaded" in term.read(until="loaded")
        term.read()
        yield term


@pytest.fixture
def home(tmp_path: Path) -> Path:
    (tmp_path / "home").mkdir()
    return tmp_path / "home"


def test_bash_completes_a_host_name_from_the_inventory(home: Path) -> None:
    with bash(home, ENVSYNC_INVENTORY=str(INVENTORY)) as term:
        term.type("envsync diff ct1\t\t")
        assert "envsync diff ct129 " in term.read(until="ct129 ")


def test_bash_lists_every_host(home: Path) -> None:
    with bash(home, ENVSYNC_INVENTORY=str(INVENTORY)) as term:
        term.type("envsync diff ct\t\t")
        listed = term.read(until="ct202")
        assert all(name in listed for name in ("ct129", "ct200", "ct201", "ct202")), listed


@pytest.mark.parametrize(
    ("typed", "completed"),
    [("envsync rol\t", "envsync rollback "), ("envsync check --fail\t", "--fail-on ")],
)
def test_bash_completes_commands_and_options(home: Path, typed: str, completed: str) -> None:
    with bash(home, ENVSYNC_INVENTORY=str(INVENTORY)) as term:
        term.type(typed)
        assert completed in term.read(until=completed)


def test_bash_reads_the_inventory_the_line_names(home: Path) -> None:
    other = home / "fleet.toml"
    other.write_text('[hosts.gpu-a100-7]\npython = "/opt/venv/bin/python"\n')
    with bash(home) as term:  # no ENVSYNC_INVENTORY: only --inventory names the hosts
        term.type(f"envsync --inventory {other} deploy gpu-a\t")
        assert "deploy gpu-a100-7 " in term.read(until="gpu-a100-7 ")


def test_zsh_completes_a_host_name_from_the_inventory(home: Path) -> None:
    with zsh(home, ENVSYNC_INVENTORY=str(INVENTORY)) as term:
        term.type("envsync diff ct1\t")
        assert "envsync diff ct129" in term.read(until="ct129")


def test_a_run_that_is_not_completing_imports_no_completion_library() -> None:
    code = (
        "import sys\nfrom envsync.cli import main\n"
        "try:\n    main(['diff', '--help'])\nexcept SystemExit:\n    pass\n"
        "print('argcomplete' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().endswith("False")
