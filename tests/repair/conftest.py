"""The repair test bed: a reference venv and a fresh target venv per test, real wheels.

The reference venv has xgrammar 0.1.32 and soundfile (real wheels); each test gets a fresh
target venv, with pip, holding xgrammar 0.1.10 and a local build `localpkg 1.0+cu130`. Both
run a small service, `svc`, whose startup imports soundfile and StructuralTag. Pins come
from the real wheels through `pip_options` (--no-index --find-links), as an index would.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from envsync.collect import ProbeOptions, collect
from envsync.runner.local import LocalRunner
from envsync.sources.inventory import HostSpec
from tests.classify.test_sglang_wheels import fetch
from tests.helpers import VENVS, make_venv, make_wheel, pip_install, run_cli, site_packages
from tests.sshd import SSHD

SVC = {
    "svc/__init__.py": "",
    "svc/main.py": "import soundfile\nimport svc.server\n",
    "svc/server.py": "X = 1\n",
    "svc/grammar.py": "from xgrammar import StructuralTag\n",
}
RULES = """\
[pack]
name = "svc"
entrypoints = ["svc.main"]

[[flags]]
flag = "--grammar"
default = "xgrammar"
reason = "svc builds its grammar backend at startup"
prefer = ["none"]

[flags.values.xgrammar]
modules = ["svc.grammar"]

[flags.values.none]
modules = []
gives_up = "constrained output"
used_when = ["--tools"]
"""
WATCH = ["svc", "xgrammar", "soundfile", "localpkg"]


@pytest.fixture(scope="module")
def bed(tmp_path_factory: pytest.TempPathFactory, wheel_cache: Path) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("repair")
    wheels = root / "wheels"
    svc = make_wheel(wheels, "svc", "1.0", SVC)
    local = make_wheel(
        wheels, "localpkg", "1.0+cu130", {"localpkg/__init__.py": "BUILD = 'cu130'\n"}
    )
    ref = make_venv(root / "ref")
    pip_install(
        ref, svc, fetch(wheel_cache, "xgrammar==0.1.32"), fetch(wheel_cache, "soundfile==0.13.1")
    )
    sp = site_packages(ref)
    (sp / "svc" / "server.py").write_text("X = 2  # local patch on the reference\n")
    (root / "rules.toml").write_text(RULES)
    return {
        "root": root,
        "ref": ref,
        "svc": svc,
        "local": local,
        "old": fetch(wheel_cache, "xgrammar==0.1.10"),
        "wheels": wheel_cache,
    }


@pytest.fixture
def target(bed: dict[str, Path], tmp_path: Path) -> Path:
    python = make_venv(tmp_path / "target venv", with_pip=True)
    pip_install(python, bed["svc"], bed["old"], bed["local"])
    return python


def inventory(
    bed: dict[str, Path], target: Path, path: Path, *, ssh: SSHD | None = None, command: str = ""
) -> Path:
    cmd = json.dumps(["{python}", "-m", "svc.main", *command.split()])
    text = (
        f'[defaults]\nreference = "ref"\ntarget = "tgt"\nwatch = {json.dumps(WATCH)}\n'
        f'rules = ["{bed["root"] / "rules.toml"}"]\n[service]\ncommand = {cmd}\n'
        f'[hosts.ref]\npython = "{bed["ref"]}"\n'
        f'[hosts.tgt]\npython = "{target}"\n'
        f'pip_options = ["--no-index", "--find-links", "{bed["wheels"]}"]\n'
    )
    if ssh is not None:
        text += ssh.host_lines(path.parent / "known_hosts")
    path.write_text(text)
    return path


def state(python: Path) -> tuple[list[tuple[str, str]], dict[str, dict[str, str]]]:
    """The package set and every watched file's hash, read afresh (no cache)."""
    snap = collect(
        HostSpec(name="t", python=str(python), watch=tuple(WATCH)),
        LocalRunner("t"),
        ProbeOptions(cache_dir=""),
    )
    packages = [(d.name, d.version) for d in snap.distributions]
    files = {d.name: dict(d.files) for d in snap.distributions if d.files is not None}
    return packages, files


def tree_hash(python: Path) -> str:
    """Every file of the venv (but envsync's own state folder, .envsync) and its content."""
    root = python.parent.parent
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        if ".envsync" in path.relative_to(root).parts[:1]:
            continue
        if path.is_file() and "__pycache__" not in path.parts:
            digest.update(str(path).encode() + hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    if "--apply" in argv and "--no-deploy" not in argv:
        argv = (*argv, "--no-deploy")  # these tests are about apply; deploy has its own
    return run_cli(capsys, *argv)


def versions(python: Path) -> dict[str, str]:
    return dict(state(python)[0])


def lock_files() -> list[Path]:
    """The lock.json of every venv this session made whose lock is held or was left by a
    holder that died (a released lock leaves none)."""
    return [p for p in (root / ".envsync" / "lock.json" for root in VENVS) if p.is_file()]


def wait_unlocked(timeout: float = 120) -> None:
    """Until no envsync holds the lock of an environment this session made."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not lock_files():
            return
        time.sleep(0.05)
    raise AssertionError("the target's lock was never released")


def envsync(inv: Path, *argv: str, home: Path | None = None) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENVSYNC_")}
    if home is not None:
        env["HOME"] = str(home)
    return subprocess.Popen(
        [sys.executable, "-m", "envsync", "--inventory", str(inv), *argv],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_held(timeout: float = 60) -> dict[str, Any]:
    """Until a command holds a target's lock with its holder attached; the lock's data."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for path in lock_files():
            try:
                data = json.loads(path.read_text())
            except ValueError:
                continue
            if data.get("who"):
                return dict(data)
        time.sleep(0.02)
    raise AssertionError("no command took the lock")


def backups_of(python: Path | None = None) -> list[Path]:
    """The backup folders of one venv (of every venv this session made, without one)."""
    roots = [python.parent.parent] if python is not None else VENVS
    return sorted(p for root in roots for p in (root / ".envsync" / "backups").glob("*"))


def wait_journal(event: str, python: Path, timeout: float = 60) -> Path:
    """Until the apply's journal in `python`'s environment records `event`; the journal.
    (Of that venv only: an earlier test's journal says "step 1 started" too.)"""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for backup in backups_of(python):
            journal = backup / "journal.jsonl"
            if journal.is_file() and event in journal.read_text():
                return journal
        time.sleep(0.01)
    raise AssertionError(f"the journal never said {event!r}")


def env_hash(python: Path) -> str:
    """The whole environment of `python`, hashed: every path under the venv (but envsync's
    own state folder) with its type, mode, and content or link target."""
    import stat as stat_

    root = python.parent.parent
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if rel.parts[0] == ".envsync":
            continue
        st = path.lstat()
        kind = stat_.S_IFMT(st.st_mode)
        digest.update(f"{rel}\0{kind:o}\0{stat_.S_IMODE(st.st_mode):o}\0".encode())
        if stat_.S_ISLNK(st.st_mode):
            digest.update(os.readlink(path).encode())
        elif stat_.S_ISREG(st.st_mode):
            digest.update(file_digest(path))
        digest.update(b"\n")
    return digest.hexdigest()


def file_digest(path: Path) -> bytes:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.digest()


def env_listing(python: Path) -> dict[str, str]:
    """Like env_hash, path by path (what differs, when two hashes differ)."""
    import stat as stat_

    root = python.parent.parent
    out = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if rel.parts[0] == ".envsync":
            continue
        st = path.lstat()
        if stat_.S_ISLNK(st.st_mode):
            out[str(rel)] = "-> " + os.readlink(path)
        elif stat_.S_ISREG(st.st_mode):
            out[str(rel)] = f"{stat_.S_IMODE(st.st_mode):o} " + file_digest(path).hex()[:12]
        else:
            out[str(rel)] = f"{stat_.S_IFMT(st.st_mode):o} {stat_.S_IMODE(st.st_mode):o}"
    return out


APPLY = ("-q", "repair", "--prefer", "fix", "--apply", "--no-deploy")
