"""Every log the host side appends to (an apply's journal and its installer's trace, a
service's output) is opened as envsync opens its own logs: never through a link in its last
part (the agent often runs as root: a link there could name any file), never a FIFO (it
would block)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from envsync.hostside.agent import backups, installer
from envsync.hostside.agent.paths import open_log
from tests.figures import held

ITEM = "11 logs appended to as regular files only"


@pytest.mark.parametrize("kind", ["link", "fifo", "folder"])
@pytest.mark.parametrize(
    "writer",
    ["journal", "trace list", "service output"],
)
def test_a_log_that_is_no_regular_file_is_refused(tmp_path: Path, kind: str, writer: str) -> None:
    victim = tmp_path / "victim"
    victim.write_text("untouched\n")
    log = tmp_path / "backup" / {"journal": "journal.jsonl"}.get(writer, "trace.jsonl")
    log.parent.mkdir()
    if kind == "link":
        log.symlink_to(victim)
    elif kind == "fifo":
        os.mkfifo(log)
    else:
        log.mkdir()
    with pytest.raises(OSError):
        if writer == "journal":
            backups.journal(str(log.parent), "step 1 started")
        elif writer == "trace list":
            installer.append(str(log), ["/x"])
        else:
            os.close(open_log(str(log), truncate=True))
    assert victim.read_text() == "untouched\n"
    held(ITEM)


def test_a_regular_log_is_appended_to_or_rewritten(tmp_path: Path) -> None:
    log = tmp_path / "journal.jsonl"
    backups.journal(str(tmp_path), "step 1 started")
    backups.journal(str(tmp_path), "step 2 started")
    assert [ln.count("step") for ln in log.read_text().splitlines()] == [1, 1]
    with os.fdopen(open_log(str(log), truncate=True), "wb") as f:
        f.write(b"new\n")
    assert log.read_bytes() == b"new\n" and not log.stat().st_mode & 0o077


def test_the_installers_trace_refuses_a_link(tmp_path: Path) -> None:
    """The trace is opened inside pip's own process (installer.TRACER), before pip runs."""
    import subprocess
    import sys

    victim = tmp_path / "victim"
    victim.write_text("untouched\n")
    trace = tmp_path / "trace"
    trace.symlink_to(victim)
    out = subprocess.run(
        [sys.executable, "-c", installer.TRACER],
        env={**os.environ, "ENVSYNC_TRACE": str(trace)},
        capture_output=True,
        text=True,
    )
    assert out.returncode != 0 and victim.read_text() == "untouched\n", out
    held(ITEM)
