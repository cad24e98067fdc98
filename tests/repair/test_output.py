"""Output never harms: real envsync processes writing to a device, a FIFO, `/dev/stdout`,
a full disk (`/dev/full`), a closed stdout and a stderr whose reader is gone.

`-o` onto a stream writes into it and never replaces it; data that stdout cannot take is one
line and exit 2; progress that stderr cannot take is dropped, and the work (an apply, a
lock written to a file) and its exit code stand.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.figures import add
from tests.repair.conftest import APPLY, env_hash, inventory, versions

SNAPSHOT = Path(__file__).resolve().parent.parent / "data" / "snapshots" / "ct129.json"
ENVSYNC = [sys.executable, "-m", "envsync"]


def held(case: str) -> None:
    add("output never harms (real streams)", case)


def environ() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("ENVSYNC_")}


def test_o_dev_stdout_writes_into_it_and_never_replaces_the_link(tmp_path: Path) -> None:
    """As root, in a mount namespace of its own (a private /dev, as bubblewrap makes it), so
    that a regression could only ever replace that /dev's link."""
    bwrap = shutil.which("bwrap")
    if bwrap is None or os.geteuid() != 0:
        pytest.skip("needs root and bubblewrap for a /dev of its own")
    out, link = tmp_path / "out.json", tmp_path / "link"
    inner = (
        f"{' '.join(ENVSYNC)} -q snapshot {SNAPSHOT} -o /dev/stdout > {out}; echo $? > {link}.rc;"
        f" readlink /dev/stdout > {link}; test -L /dev/stdout && echo link >> {link}"
    )
    done = subprocess.run(
        [bwrap, "--bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "sh", "-c", inner],
        env=environ(),
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parent.parent.parent,
    )
    assert done.returncode == 0, done.stderr
    assert Path(f"{link}.rc").read_text().strip() == "0", done.stderr
    assert link.read_text().split() == ["/proc/self/fd/1", "link"]
    assert json.loads(out.read_text())["host"] == "ct129"
    held("-o /dev/stdout (the link kept)")


def test_o_a_fifo_streams_into_it(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    done = subprocess.run(
        [*ENVSYNC, "-q", "snapshot", str(SNAPSHOT), "-o", str(fifo)],
        env=environ(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    reader.join(timeout=30)
    assert done.returncode == 0, done.stderr
    assert json.loads(got[0])["host"] == "ct129"
    assert fifo.is_fifo()
    held("-o a FIFO")


@pytest.mark.parametrize(
    ("how", "why"),
    [("full", "No space left on device"), ("closed", "it is closed")],
)
def test_data_that_stdout_cannot_take_is_one_line_and_exit_2(
    tmp_path: Path, how: str, why: str
) -> None:
    argv = [*ENVSYNC, "-q", "snapshot", str(SNAPSHOT)]
    if how == "full":
        with open("/dev/full", "w") as full:
            done = subprocess.run(argv, env=environ(), stdout=full, stderr=subprocess.PIPE)
    else:
        # the shell's `>&-`: the process starts with no fd 1 at all
        done = subprocess.run(
            ["sh", "-c", 'exec "$@" >&-', "sh", *argv], env=environ(), stderr=subprocess.PIPE
        )
    lines = done.stderr.decode().strip().splitlines()
    assert done.returncode == 2, lines
    assert len(lines) == 1 and lines[0].startswith("envsync: stdout: cannot write the output")
    assert why in lines[0] and "Traceback" not in done.stderr.decode()
    held(f"stdout {how}: one line, exit 2")


def closed_stderr(argv: list[str], **kwargs: Any) -> subprocess.Popen[bytes]:
    """envsync with stderr a pipe whose reader is gone before it writes a line."""
    read, write = os.pipe()
    os.close(read)
    try:
        return subprocess.Popen(argv, env=environ(), stderr=write, **kwargs)
    finally:
        os.close(write)


@pytest.mark.parametrize("how", ["pipe gone", "closed"])
def test_lock_o_file_with_stderr_gone_still_writes_the_file(tmp_path: Path, how: str) -> None:
    out = tmp_path / "ct129.lock"
    argv = [*ENVSYNC, "lock", str(SNAPSHOT), "-o", str(out)]
    if how == "closed":
        code = subprocess.run(["sh", "-c", 'exec "$@" 2>&-', "sh", *argv], env=environ()).returncode
    else:
        proc = closed_stderr(argv, stdout=subprocess.DEVNULL)
        code = proc.wait(timeout=120)
    assert code == 0
    assert 'name = "xgrammar"' in out.read_text()
    held(f"lock -o FILE with stderr {how}")


@pytest.mark.slow
def test_an_apply_with_stderr_gone_applies_and_says_so_by_its_exit_code(
    bed: dict[str, Path], target: Path, tmp_path: Path
) -> None:
    inv = inventory(bed, target, tmp_path / "inv.toml")
    before = env_hash(target)
    argv = [*ENVSYNC, "--inventory", str(inv), *APPLY[1:]]  # not -q: progress to show
    proc = closed_stderr(argv, stdout=subprocess.DEVNULL)
    assert proc.wait(timeout=600) == 0
    assert versions(target)["xgrammar"] == "0.1.32"  # applied, not a silent no-op
    assert env_hash(target) != before
    held("repair --apply with stderr's reader gone")
