"""What a command's output may cost: a host that prints without end is ended at the cap
(one line, exit 3), and only the tail of its stderr is kept."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from envsync.errors import OutputTooLarge
from envsync.exitcodes import ExitCode
from envsync.runner import STDERR_KEPT
from envsync.runner.local import LocalRunner
from tests.figures import held
from tests.helpers import make_venv, site_packages
from tests.helpers import run_cli as run
from tests.sshd import SSHD

ENDLESS = "import sys\nwhile True: sys.stdout.buffer.write(b'x' * 65536)\n"


def test_endless_stdout_is_ended_at_the_cap() -> None:
    runner = LocalRunner("h", max_stdout=4 << 20)
    started = time.monotonic()
    with pytest.raises(OutputTooLarge) as e:
        runner.run([sys.executable, "-c", ENDLESS], timeout=60)
    assert time.monotonic() - started < 30
    line = str(e.value)
    assert line.startswith("h: ") and "wrote more than 4 MB on stdout; it was ended" in line
    assert "\n" not in line and e.value.exit_code == ExitCode.COLLECT
    held("12 probe output read with a cap")


def test_only_the_tail_of_stderr_is_kept() -> None:
    code = (
        "import sys\nfor i in range(200): sys.stderr.write(str(i) * 65536)\n"
        "sys.stderr.write('\\nthe last line\\n'); sys.exit(4)\n"
    )
    result = LocalRunner("h").run([sys.executable, "-c", code], timeout=60)
    assert result.returncode == 4
    assert len(result.stderr) <= 2 * STDERR_KEPT
    assert result.stderr_tail(1) == "the last line"
    held("12 probe output read with a cap")


def test_an_interpreter_that_prints_without_end_at_startup(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A .pth line that prints forever: the probe's output is capped, one line, exit 3,
    never a MemoryError."""
    python = make_venv(tmp_path / "venv")
    (site_packages(python) / "noisy.pth").write_text(
        "import sys; [sys.stdout.buffer.write(b'x' * 65536) for _ in iter(int, 1)]\n"
    )
    inv = tmp_path / "envsync.toml"
    inv.write_text(f'[hosts.h]\npython = "{python}"\n')
    code, _, err = run(capsys, "--inventory", str(inv), "snapshot", "h", "--no-cache")
    assert code == ExitCode.COLLECT, err
    assert "h: " in err and "wrote more than 64 MB on stdout; it was ended" in err
    assert "Traceback" not in err and "MemoryError" not in err
    held("12 probe output read with a cap")


def test_endless_stdout_over_ssh_is_ended_at_the_cap(sshd_bed: SSHD, tmp_path: Path) -> None:
    from envsync.runner.ssh import SSHRunner
    from envsync.sources.inventory import HostSpec

    known = tmp_path / "known_hosts"
    known.write_text(sshd_bed.host_key_line())
    spec = HostSpec(
        name="far",
        python=sys.executable,
        ssh=sshd_bed.target,
        identity=str(sshd_bed.client_key),
        known_hosts=str(known),
    )
    runner = SSHRunner(spec, max_stdout=4 << 20)
    try:
        with pytest.raises(OutputTooLarge, match=r"far: .* wrote more than 4 MB on stdout"):
            runner.run([sys.executable, "-c", ENDLESS], timeout=60)
        # the connection serves the next command
        assert runner.run(["true"], timeout=30).returncode == 0
    finally:
        runner.close()
    held("12 probe output read with a cap")


# A command that exits at once and leaves a child writing its output for two seconds (each
# write 50 ms apart): all of it is read, although the command exited long before its end.
WRITER = (
    "import subprocess, sys\n"
    "subprocess.Popen([sys.executable, '-c', 'import sys, time\\n"
    "for i in range(40):\\n"
    '    sys.stdout.write("%02d\\\\n" % i); sys.stdout.flush(); time.sleep(0.05)\'])\n'
)


def test_output_still_coming_after_the_exit_is_read_whole() -> None:
    result = LocalRunner("h").run([sys.executable, "-c", WRITER], timeout=60)
    lines = result.stdout.decode().split()
    assert lines == [f"{i:02d}" for i in range(40)], lines
    held("13 output written after the command's exit read whole")
