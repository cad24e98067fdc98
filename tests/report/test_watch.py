"""`envsync watch` on a real venv changed by real pip: only what changed is printed and
logged, the Prometheus textfile is whole, --once exits as check does, SIGTERM ends it
cleanly; and the textfile's format."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from envsync.report.watch import HostStatus, WatchRun, parse_duration, textfile
from tests.figures import held
from tests.helpers import REPO, make_venv, make_wheel, pip_install
from tests.helpers import run_cli as run


@pytest.mark.parametrize(
    ("text", "seconds"), [("30s", 30.0), ("10m", 600.0), ("1h", 3600.0), ("1.5m", 90.0)]
)
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["10", "0m", "-1m", "10 minutes", "m", "1d", ""])
def test_bad_durations(text: str) -> None:
    with pytest.raises(ValueError, match="not a duration such as 30s, 10m or 1h"):
        parse_duration(text)


# One line of the text exposition format: a sample, or a HELP/TYPE comment.
SAMPLE = re.compile(
    r'^[a-zA-Z_:][a-zA-Z0-9_:]*(\{([a-zA-Z_][a-zA-Z0-9_]*="([^"\\\n]|\\["\\n])*",?)*\})? '
    r"-?[0-9.e+]+$"
)
COMMENT = re.compile(r"^# (HELP [a-zA-Z_:][a-zA-Z0-9_:]* .+|TYPE [a-zA-Z_:][a-zA-Z0-9_:]* gauge)$")


def test_the_textfile_is_the_exposition_format() -> None:
    run_ = WatchRun(
        at="2026-12-01T10:00:00Z",
        events=(),
        statuses=(
            HostStatus(
                host='we"ird\\host\nname',
                up=True,
                against="ct129@good",
                counts={"fatal": 2},
                blocking=2,
                last_good=1796126003.5,
            ),
            HostStatus(host="down", up=False),
            HostStatus(host="new", up=True),
        ),
    )
    text = textfile(run_)
    assert text.endswith("\n")
    for line in text.splitlines():
        assert SAMPLE.match(line) or COMMENT.match(line), line
    assert 'envsync_host_up{host="we\\"ird\\\\host\\nname"} 1' in text
    assert 'envsync_host_up{host="down"} 0' in text
    assert (
        'envsync_findings{host="we\\"ird\\\\host\\nname",reference="ct129@good",severity="fatal"} 2'
        in text
    )
    assert (
        'envsync_last_good_timestamp_seconds{host="we\\"ird\\\\host\\nname"} 1796126003.500' in text
    )
    # a host compared with nothing has no findings to count
    assert (
        'envsync_findings{host="new"' not in text
        and 'envsync_blocking_findings{host="new"' not in text
    )
    names = [line.split()[2] for line in text.splitlines() if line.startswith("# TYPE")]
    assert len(names) == len(set(names))


@pytest.fixture
def watched(tmp_path: Path) -> dict[str, Path]:
    """A real venv with demo 1.0 installed by real pip, in an inventory as host `h`."""
    wheels = tmp_path / "wheels"
    for version in ("1.0", "2.0"):
        make_wheel(wheels, "demo", version, {"demo/__init__.py": f"VERSION = {version!r}\n"})
    python = make_venv(tmp_path / "venv")
    pip_install(python, wheels / "demo-1.0-py3-none-any.whl")
    inv = tmp_path / "envsync.toml"
    inv.write_text(f'[defaults]\ntarget = "h"\n[hosts.h]\npython = "{python}"\n')
    return {"inv": inv, "python": python, "wheels": wheels, "states": tmp_path / "states"}


def _watch(
    capsys: pytest.CaptureFixture[str], bed: dict[str, Path], *more: str
) -> tuple[int, str, str]:
    return run(
        capsys,
        "--inventory",
        str(bed["inv"]),
        "-q",
        "watch",
        "--once",
        "--state-dir",
        str(bed["states"]),
        *more,
    )


def test_watch_once_says_only_what_changed(
    capsys: pytest.CaptureFixture[str], watched: dict[str, Path], tmp_path: Path
) -> None:
    log, prom = tmp_path / "watch.jsonl", tmp_path / "envsync.prom"
    outputs = ("--log", str(log), "--prometheus", str(prom), "--fail-on", "unknown")
    states = str(watched["states"])
    code, _, err = run(
        capsys,
        "--inventory",
        str(watched["inv"]),
        "-q",
        "lock",
        "h",
        "--state-dir",
        states,
        "-o",
        str(tmp_path / "h.lock"),
    )
    assert code == 0, err
    # unchanged since its lock: nothing to say, a clean exit, the textfile written
    code, out, err = _watch(capsys, watched, *outputs)
    assert (code, out, err) == (0, "", "")
    assert not log.exists()
    assert 'envsync_host_up{host="h"} 1' in prom.read_text()
    assert 'envsync_blocking_findings{host="h",reference="h@good"} 0' in prom.read_text()
    # real pip changes the venv: the change, with its install time, and the new finding
    pip_install(watched["python"], watched["wheels"] / "demo-2.0-py3-none-any.whl")
    record = next(
        watched["python"].parent.parent.glob("lib/python*/site-packages/demo-2.0.dist-info/RECORD")
    )
    installed = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(record.stat().st_mtime))
    code, out, _ = _watch(capsys, watched, *outputs)
    assert code == 1
    lines = out.splitlines()
    assert re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ h: changed since its state of ", lines[0])
    assert lines[1] == f"  demo 1.0 → 2.0 (installed {installed} by pip)"
    assert re.search(r" h: new against h@good: unknown version demo \(1\.0 → 2\.0\): ", lines[2])
    assert len(lines) == 3
    events = [json.loads(line) for line in log.read_text().splitlines()]
    assert [e["event"] for e in events] == ["changed", "finding"]
    assert events[0]["changes"][0]["installed_at"] == installed
    assert events[1]["severity"] == "unknown" and events[1]["gone"] is False
    text = prom.read_text()
    assert 'envsync_findings{host="h",reference="h@good",severity="unknown"} 1' in text
    assert 'envsync_changes{host="h"} 1' in text
    # nothing new: nothing said, the gate still closed
    code, out, _ = _watch(capsys, watched, *outputs)
    assert (code, out) == (1, "")
    assert len(log.read_text().splitlines()) == 2
    assert 'envsync_changes{host="h"} 0' in prom.read_text()
    # back to 1.0: the change, and the finding gone
    pip_install(watched["python"], watched["wheels"] / "demo-1.0-py3-none-any.whl")
    code, out, _ = _watch(capsys, watched, *outputs)
    assert code == 0
    assert (
        "  demo 2.0 → 1.0 (installed " in out
        and " h: gone against h@good: unknown version demo" in out
    )
    # each change seen is in the host's history
    code, out, _ = run(
        capsys, "--inventory", str(watched["inv"]), "history", "h", "--state-dir", states
    )
    assert code == 0
    assert re.search(r"h@latest .* watch .*\n    demo 2\.0 → 1\.0", out)
    assert re.search(r"h@-1 .* watch .*\n    demo 1\.0 → 2\.0", out)
    assert re.search(r"h@-2 .* lock +good", out)
    assert not list(tmp_path.rglob("*.tmp"))


def test_a_host_that_cannot_be_watched_is_said_once(
    capsys: pytest.CaptureFixture[str], watched: dict[str, Path], tmp_path: Path
) -> None:
    inv = watched["inv"]
    inv.write_text(inv.read_text() + f'[hosts.gone]\npython = "{tmp_path}/nowhere/python"\n')
    prom = tmp_path / "envsync.prom"
    code, out, _ = _watch(capsys, watched, "h", "gone", "--prometheus", str(prom))
    assert code == 3
    assert " h: first watched; its state is recorded" in out
    assert re.search(r" gone: cannot be watched: gone: .*nowhere/python", out)
    assert 'envsync_host_up{host="gone"} 0' in prom.read_text()
    code, out, _ = _watch(capsys, watched, "h", "gone")
    assert (code, out) == (3, "")
    inv.write_text(inv.read_text().replace(f"{tmp_path}/nowhere/python", str(watched["python"])))
    code, out, _ = _watch(capsys, watched, "h", "gone")
    # another interpreter is another identity: a past of its own, watched for the first time
    assert code == 0 and " gone: first watched" in out


def test_watch_needs_a_schedule_and_hosts(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    with pytest.raises(SystemExit) as e:
        run(capsys, "watch", "h")
    assert e.value.code == 2
    with pytest.raises(SystemExit):
        run(capsys, "watch", "--every", "10", "h")
    assert "not a duration such as 30s" in capsys.readouterr().err
    code, _, err = run(capsys, "watch", "--once", "--state-dir", str(tmp_path))
    assert code == 2 and "watch: name the HOSTs to watch" in err


def _spawn(bed: dict[str, Path], *argv: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen(
        [sys.executable, "-m", "envsync", "--inventory", str(bed["inv"]), "watch", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def test_sigterm_between_runs_ends_the_watch_cleanly(
    watched: dict[str, Path], tmp_path: Path
) -> None:
    prom = tmp_path / "envsync.prom"
    proc = _spawn(
        watched,
        "h",
        "--every",
        "1h",
        "--state-dir",
        str(watched["states"]),
        "--prometheus",
        str(prom),
    )
    try:
        deadline = time.monotonic() + 60
        while not prom.exists() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        assert prom.exists(), proc.stderr.read() if proc.stderr else ""
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert " h: first watched" in out
    assert not list(tmp_path.rglob("*.tmp"))


def test_sigterm_during_a_run_exits_143_and_leaves_no_partial_file(
    watched: dict[str, Path], tmp_path: Path
) -> None:
    # An interpreter that hangs: the run is in its collection when the signal comes.
    slow = tmp_path / "slow" / "python"
    slow.parent.mkdir()
    slow.write_text("#!/bin/sh\nsleep 60\n")
    slow.chmod(0o755)
    inv = watched["inv"]
    inv.write_text(inv.read_text() + f'[hosts.slow]\npython = "{slow}"\n')
    prom = tmp_path / "envsync.prom"
    proc = _spawn(
        watched,
        "h",
        "slow",
        "--every",
        "1h",
        "--state-dir",
        str(watched["states"]),
        "--prometheus",
        str(prom),
    )
    try:
        deadline = time.monotonic() + 60
        # h is collected first (its state recorded), then the run waits on `slow`
        while (
            not list(watched["states"].glob("h~*/*-watch-*.json")) and time.monotonic() < deadline
        ):
            time.sleep(0.05)
        time.sleep(0.5)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 143, err
    assert "envsync: terminated" in err
    assert not prom.exists()  # the run did not end: no textfile, not half of one
    assert not list(tmp_path.rglob("*.tmp"))
    for state in watched["states"].rglob("*.json"):
        json.loads(state.read_text())  # every file there is whole


@pytest.mark.parametrize("kind", ["link", "fifo", "folder"])
def test_the_log_is_appended_to_only_as_a_regular_file(tmp_path: Path, kind: str) -> None:
    """`watch --log` (envsync is often root) never follows a link to append to what it
    names, and never waits on a FIFO: one line, the target untouched."""
    from envsync.errors import OutputError
    from envsync.report.watch import append_lines

    victim = tmp_path / "victim"
    victim.write_text("untouched\n")
    log = tmp_path / "watch.jsonl"
    if kind == "link":
        log.symlink_to(victim)
    elif kind == "fifo":
        os.mkfifo(log)
        reader = os.open(log, os.O_RDONLY | os.O_NONBLOCK)  # a reader: open would not fail
    else:
        log.mkdir()
    try:
        with pytest.raises(OutputError, match=r"watch\.jsonl: cannot write: ") as e:
            append_lines(str(log), ['{"event": "changed"}'])
    finally:
        if kind == "fifo":
            os.close(reader)
    assert "\n" not in str(e.value)
    assert victim.read_text() == "untouched\n"
    held("11 logs appended to as regular files only")


def test_watch_log_through_a_link_is_refused(
    capsys: pytest.CaptureFixture[str], watched: dict[str, Path], tmp_path: Path
) -> None:
    victim = tmp_path / "victim"
    victim.write_text("untouched\n")
    log = tmp_path / "watch.jsonl"
    log.symlink_to(victim)
    code, _, err = _watch(capsys, watched, "h", "--log", str(log))
    assert code != 0 and "a symbolic link, not a file (not followed)" in err, err
    assert victim.read_text() == "untouched\n"
    held("11 logs appended to as regular files only")
