"""Kills mid-change and changes made meanwhile, each on real parts (real venvs, wheels, pip,
processes, signals), each ending with the whole environment as it was, or refused:

1. the agent running pip SIGKILLed while pip replaces files: pip dies with it, and the
   rollback waits until no installer of the apply is alive;
2. a package installed by hand while an apply runs: the apply's own rollback (and a later
   `rollback`) keeps it, and names it;
3. pip SIGKILLed (as the OOM killer would) after it wrote files inside an existing folder:
   they go, although no RECORD names them yet;
4. an apply over an unfinished apply (envsync and the lock's holder killed together): the
   next apply rolls the unfinished one back first, says so, and changes nothing else;
5. a RECORD line naming another distribution's folder: pip is never run over it (both
   named); a RECORD line naming the package's own folder: backed up whole.
"""

from __future__ import annotations

import contextlib
import http.server
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import make_venv, pip_install, site_packages
from tests.repair.conftest import env_listing, envsync
from tests.repair.kill_bed import (
    APPLY,
    agent,
    cli,
    counted,
    in_pkg,
    inventory,
    kill,
    ktgt,
    kwheels,
    local_index,
    pip,
    processes,
    quiet,
    requirements,
    rolled_back_to,
    wait_for,
)
from tests.repair.restore_bed import add_record_lines, assert_same, last_line

__all__ = ["ktgt", "kwheels"]  # fixtures

pytestmark = pytest.mark.slow
SECTION = "repair breaks replayed (byte-identical or refused)"
SP = f"lib/python{sys.version_info[0]}.{sys.version_info[1]}/site-packages"
SIX = [
    f"__pycache__/six.cpython-{sys.version_info[0]}{sys.version_info[1]}.pyc",
    "six-1.16.0.dist-info",
    "six.py",
]


def test_the_agent_killed_while_pip_replaces_files_takes_pip_down_first(
    kwheels: dict[str, Path], ktgt: Path, tmp_path: Path
) -> None:
    inv = inventory(tmp_path / "inv.toml", ktgt, local_index(kwheels))
    ref = requirements(tmp_path / "ref.txt", "pkg==2.0")
    before = env_listing(ktgt)
    proc = envsync(inv, *APPLY[:1], str(ref), "tgt", *APPLY[1:])
    wait_for(in_pkg(ktgt, "pkg/m050.py"), "pip writing pkg 2.0")
    installer = pip(ktgt)
    kill(agent(ktgt, "run"))
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 4, err
    line = last_line(err)
    assert "everything done before it was rolled back" in line, line
    assert installer is None or installer not in processes(ktgt)
    quiet(ktgt)
    assert_same(ktgt, before)  # what envsync said: rolled back, and pip wrote nothing after
    err = rolled_back_to(ktgt, inv, before)
    assert "nothing to roll back" in err, err
    counted(SECTION, "agent SIGKILLed while pip replaces files: pip ended first")


@contextlib.contextmanager
def gated_index(folder: Path, gate: str) -> Iterator[tuple[int, threading.Event, threading.Event]]:
    """A real simple index of the wheels in `folder` (PEP 503 pages made here) whose page of
    project `gate` waits until released: (port, asked, release)."""
    simple = folder.parent / "simple-pages"
    for wheel in folder.glob("*.whl"):
        project = wheel.name.split("-")[0].replace("_", "-").lower()
        page = simple / "simple" / project
        page.mkdir(parents=True, exist_ok=True)
        (page / wheel.name).write_bytes(wheel.read_bytes())
        (page / "index.html").write_text(f'<a href="{wheel.name}">{wheel.name}</a>\n')
    asked, release = threading.Event(), threading.Event()

    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, directory=str(simple), **kwargs)

        def do_GET(self) -> None:
            if self.path.rstrip("/").endswith(f"/simple/{gate}"):
                asked.set()
                release.wait(120)
            super().do_GET()

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1], asked, release
    finally:
        release.set()
        server.shutdown()
        server.server_close()


def without_six(listing: dict[str, str]) -> dict[str, str]:
    """A venv's listing but the hand-installed six (pip's own vendored six stays)."""
    return {
        k: v
        for k, v in listing.items()
        if not re.search(r"site-packages/(__pycache__/)?six[.-]", k)
    }


def hand_install(target: Path, wheel: Path) -> None:
    """`pip install six` by hand, with the target's own pip."""
    subprocess.run(
        [str(target), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)],
        check=True,
        capture_output=True,
    )


def test_a_package_installed_by_hand_during_an_apply_is_kept_by_its_rollback(
    kwheels: dict[str, Path], ktgt: Path, tmp_path: Path
) -> None:
    sp = site_packages(ktgt)
    before = env_listing(ktgt)
    # newpkg comes, then zzz 9.9 is asked for (none: the step fails); meanwhile, six by hand
    with gated_index(kwheels["index"], "zzz") as (port, asked, release):
        index = ["--index-url", f"http://127.0.0.1:{port}/simple", "--retries", "0"]
        inv = inventory(tmp_path / "inv.toml", ktgt, index)
        ref = requirements(tmp_path / "ref.txt", "newpkg==1.0", "zzz==9.9")
        proc = envsync(inv, *APPLY[:1], str(ref), "tgt", *APPLY[1:])
        assert asked.wait(180), "the apply never asked for zzz"
        hand_install(ktgt, kwheels["six"])
        release.set()
        _, err = proc.communicate(timeout=300)
    assert proc.returncode == 4, err
    line = last_line(err)
    assert "pin zzz==9.9" in line and "everything done before it was rolled back" in line, line
    kept = line.split("kept what this apply did not write: ", 1)[1]
    assert kept == ", ".join(f"{SP}/{n}" for n in SIX), line  # six's, and nothing else
    assert (sp / "six.py").is_file() and (sp / "six-1.16.0.dist-info").is_dir()
    now = env_listing(ktgt)
    assert without_six(now) == before
    counted(SECTION, "a hand install during an apply: kept by its rollback, and named")


def test_a_hand_install_during_an_applied_apply_is_kept_by_rollback(
    kwheels: dict[str, Path], ktgt: Path, tmp_path: Path
) -> None:
    sp = site_packages(ktgt)
    before = env_listing(ktgt)
    with gated_index(kwheels["index"], "newpkg") as (port, asked, release):
        index = ["--index-url", f"http://127.0.0.1:{port}/simple", "--retries", "0"]
        inv = inventory(tmp_path / "inv.toml", ktgt, index)
        ref = requirements(tmp_path / "ref.txt", "newpkg==1.0")
        proc = envsync(inv, *APPLY[:1], str(ref), "tgt", *APPLY[1:])
        assert asked.wait(180), "the apply never asked for newpkg"
        hand_install(ktgt, kwheels["six"])
        release.set()
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        code, err = cli(inv, "rollback", "tgt")
    assert code == 0, err
    assert "kept what appeared during the apply that it did not write: " in err, err
    assert "six.py" in err, err
    assert (sp / "six.py").is_file() and not (sp / "newpkg").exists()
    now = env_listing(ktgt)
    assert without_six(now) == before
    counted(SECTION, "a hand install during an apply, then rollback: kept, and named")


def test_pip_killed_after_writing_inside_an_existing_folder_leaves_nothing(
    kwheels: dict[str, Path], ktgt: Path, tmp_path: Path
) -> None:
    inv = inventory(tmp_path / "inv.toml", ktgt, local_index(kwheels))
    ref = requirements(tmp_path / "ref.txt", "pkg==2.0")
    before = env_listing(ktgt)
    proc = envsync(inv, *APPLY[:1], str(ref), "tgt", *APPLY[1:])
    wait_for(in_pkg(ktgt, "pkg/m100.py"), "pip writing inside pkg/")
    kill(pip(ktgt))  # as the OOM killer would
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 4, err
    assert "everything done before it was rolled back" in last_line(err), err
    quiet(ktgt)
    assert_same(ktgt, before)  # pkg/m000.py ... pkg/m100.py: no RECORD named them
    counted(SECTION, "pip SIGKILLed after writing inside an existing folder")


def test_an_apply_over_an_unfinished_apply_rolls_that_back_first_and_says_so(
    kwheels: dict[str, Path], ktgt: Path, tmp_path: Path
) -> None:
    inv = inventory(tmp_path / "inv.toml", ktgt, local_index(kwheels))
    ref = requirements(tmp_path / "ref.txt", "newpkg==1.0", "pkg==2.0")
    before = env_listing(ktgt)
    proc = envsync(inv, *APPLY[:1], str(ref), "tgt", *APPLY[1:])
    wait_for(in_pkg(ktgt, "pkg/m100.py"), "pip writing inside pkg/")
    # a crash: envsync, the lock's holder and the agents, all at once
    doomed = [proc.pid, *processes(ktgt)]
    for pid in doomed:
        kill(pid)
    proc.communicate(timeout=60)
    quiet(ktgt)
    code, err = cli(inv, *APPLY[:1], str(ref), "tgt", *APPLY[1:])
    assert code == 4, err
    line = last_line(err)
    assert "an earlier apply had not finished" in line and "nothing else was changed" in line
    assert "took over a stale lock" in err, err
    quiet(ktgt)
    assert_same(ktgt, before)  # the real before, not the half-changed state
    code, err = cli(inv, *APPLY[:1], str(ref), "tgt", *APPLY[1:])
    assert code == 0, err
    rolled_back_to(ktgt, inv, before)
    counted(SECTION, "an apply over an unfinished apply: that one rolled back first")


def test_rollback_after_a_crash_restores_the_real_before(
    kwheels: dict[str, Path], ktgt: Path, tmp_path: Path
) -> None:
    inv = inventory(tmp_path / "inv.toml", ktgt, local_index(kwheels))
    ref = requirements(tmp_path / "ref.txt", "newpkg==1.0", "pkg==2.0")
    before = env_listing(ktgt)
    proc = envsync(inv, *APPLY[:1], str(ref), "tgt", *APPLY[1:])
    wait_for(in_pkg(ktgt, "pkg/m100.py"), "pip writing inside pkg/")
    for pid in [proc.pid, *processes(ktgt)]:
        kill(pid)
    proc.communicate(timeout=60)
    quiet(ktgt)
    rolled_back_to(ktgt, inv, before)
    counted(SECTION, "rollback after envsync and the lock's holder were killed together")


def test_a_record_naming_another_distributions_folder_is_refused_naming_both(
    kwheels: dict[str, Path], ktgt: Path, tmp_path: Path
) -> None:
    pip_install(ktgt, kwheels["host"])
    add_record_lines(ktgt, "pkg-1.0.dist-info", "host/layers/")
    inv = inventory(tmp_path / "inv.toml", ktgt, local_index(kwheels))
    ref = requirements(tmp_path / "ref.txt", "pkg==2.0")
    before = env_listing(ktgt)
    code, err = cli(inv, *APPLY[:1], str(ref), "tgt", *APPLY[1:])
    assert code == 4, err
    line = last_line(err)
    assert "refusing to run pip: pkg-1.0.dist-info/RECORD names 'host/layers/'" in line, line
    assert "holds 100 files of host" in line, line  # 50 modules and their bytecode
    assert_same(ktgt, before)  # host's 50 files are all there
    counted(SECTION, "a RECORD line naming another distribution's folder: refused")


def test_a_record_naming_its_own_folder_is_backed_up_whole(
    kwheels: dict[str, Path], ktgt: Path, tmp_path: Path
) -> None:
    add_record_lines(ktgt, "pkg-1.0.dist-info", "pkg/d/")
    (site_packages(ktgt) / "pkg" / "d" / "notes.txt").write_text("in no RECORD\n")
    inv = inventory(tmp_path / "inv.toml", ktgt, local_index(kwheels))
    ref = requirements(tmp_path / "ref.txt", "pkg==2.0")
    before = env_listing(ktgt)
    code, err = cli(inv, *APPLY[:1], str(ref), "tgt", *APPLY[1:])
    assert code == 0, err
    assert not (site_packages(ktgt) / "pkg" / "d").exists()  # pip removed the folder whole
    rolled_back_to(ktgt, inv, before)  # notes.txt too
    counted(SECTION, "a RECORD line naming its own folder: pip's whole set backed up")


def test_an_immutable_file_pip_would_remove_refuses_before_anything_changes(
    kwheels: dict[str, Path], ktgt: Path, tmp_path: Path
) -> None:
    frozen = site_packages(ktgt) / "pkg" / "d" / "f010.txt"
    if subprocess.run(["chattr", "+i", str(frozen)], capture_output=True).returncode != 0:
        pytest.skip("chattr +i: this file system (or user) has no immutable flag")
    try:
        inv = inventory(tmp_path / "inv.toml", ktgt, local_index(kwheels))
        ref = requirements(tmp_path / "ref.txt", "newpkg==1.0", "pkg==2.0")
        before = env_listing(ktgt)
        code, err = cli(inv, *APPLY[:1], str(ref), "tgt", *APPLY[1:])
        assert code == 4, err
        line = last_line(err)
        assert f"{frozen} is immutable" in line and "nothing was changed" in line, line
        assert_same(ktgt, before)
    finally:
        subprocess.run(["chattr", "-i", str(frozen)], check=False)
    counted(SECTION, "an immutable file pip would remove: refused before any change")


def test_the_installer_runs_in_its_own_session_tied_to_the_agent(tmp_path: Path) -> None:
    """The agent's `run`: its command in a session of its own, which dies with the agent."""
    from envsync.runner.agent import Agent
    from envsync.runner.local import LocalRunner
    from envsync.sources.inventory import HostSpec

    python = make_venv(tmp_path / "venv")
    agent_ = Agent(HostSpec(name="t", python=str(python)), LocalRunner("t"))
    agent_.backup("b1", dists=[], files=[])
    code = "import os; print(os.getpid(), os.getsid(0), os.getpgid(0), os.getppid())"
    ran = agent_.run([sys.executable, "-c", code], ident="b1")
    pid, sid, pgid, _ = map(int, ran.stdout.split())
    assert sid == pid == pgid
    # an installer still running when its agent is SIGKILLed dies with it
    marker = tmp_path / "alive"
    sleeper = f"import time, pathlib; pathlib.Path({str(marker)!r}).write_text('x'); time.sleep(60)"
    runner = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from envsync.runner.agent import Agent; from envsync.sources.inventory import HostSpec; "
            "from envsync.runner.local import LocalRunner; import sys; "
            f"Agent(HostSpec(name='t', python={str(python)!r}), LocalRunner('t'))"
            f".run([{str(python)!r}, '-c', {sleeper!r}], ident='b1')",
        ]
    )
    wait_for(marker.exists, "the installer start")
    kill(agent(python, "run"))
    quiet(python, timeout=30)  # the sleeper is gone too
    runner.wait(timeout=60)
