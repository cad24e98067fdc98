"""repair and rollback with real pip installs into real venvs, locally and over SSH.

The test bed (tests/repair/conftest.py): a reference venv and a fresh target venv per test.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.container import Container
from tests.helpers import site_packages, state_dir
from tests.repair.conftest import inventory, run, state, tree_hash, versions, wait_unlocked
from tests.sshd import SSHD

pytestmark = pytest.mark.slow


def test_a_plan_without_apply_changes_nothing(
    capsys: pytest.CaptureFixture[str], bed: dict[str, Path], target: Path, tmp_path: Path
) -> None:
    inv = inventory(bed, target, tmp_path / "inv.toml")
    before = tree_hash(target)
    code, out, _ = run(
        capsys,
        "--inventory",
        str(inv),
        "-q",
        "repair",
        "--prefer",
        "fix",
        "-o",
        str(tmp_path / "plan.json"),
    )
    assert code == 1
    assert "1. pin: pin soundfile==0.13.1" in out and "pin xgrammar==0.1.32" in out
    assert "sync-file: copy 1 file(s) of svc" in out
    plan = json.loads((tmp_path / "plan.json").read_text())
    assert plan["schema_version"] == 3 and len(plan["target_fingerprint"]) == 64
    assert [s["kind"] for s in plan["steps"]] == ["pin", "pin", "sync-file"]
    assert tree_hash(target) == before


def test_pins_with_no_deps_leave_local_builds_alone_and_fix_the_findings(
    capsys: pytest.CaptureFixture[str], bed: dict[str, Path], target: Path, tmp_path: Path
) -> None:
    inv = inventory(bed, target, tmp_path / "inv.toml")
    local_before = state(target)[1]["localpkg"]
    started = time.perf_counter()
    code, _, err = run(
        capsys, "--inventory", str(inv), "-q", "repair", "--prefer", "fix", "--apply"
    )
    assert code == 0, err
    assert time.perf_counter() - started < 120
    after = versions(target)
    assert (after["xgrammar"], after["soundfile"], after["localpkg"]) == (
        "0.1.32",
        "0.13.1",
        "1.0+cu130",
    )
    assert state(target)[1]["localpkg"] == local_before
    assert state(target)[1]["svc"] == state(bed["ref"])[1]["svc"]  # the patched file came over
    # nothing the plan addressed is left: only what the target has and the reference lacks
    code, out, _ = run(capsys, "--inventory", str(inv), "-q", "diff", "--format", "json")
    left = {(f["subject"], f["kind"], f["severity"]) for f in json.loads(out)["findings"]}
    # setuptools is read where every start runs it: its distutils-precedence.pth imports
    # _distutils_hack at each interpreter start (on the target only), so not benign
    (pth,) = site_packages(target).glob("distutils-precedence.pth")
    assert "__import__('_distutils_hack')" in pth.read_text()
    assert left == {
        ("localpkg", "extra", "benign"),
        ("pip", "extra", "benign"),
        ("setuptools", "extra", "risky"),
    }
    # and applying again changes nothing
    before = tree_hash(target)
    assert (
        run(
            capsys,
            "--inventory",
            str(inv),
            "-q",
            "repair",
            "--prefer",
            "fix",
            "--apply",
            "--no-deploy",
        )[0]
        == 0
    )
    assert tree_hash(target) == before


def test_a_failing_step_rolls_back_everything_before_it(
    capsys: pytest.CaptureFixture[str], bed: dict[str, Path], target: Path, tmp_path: Path
) -> None:
    inv = inventory(bed, target, tmp_path / "inv.toml")
    req = tmp_path / "reference.txt"
    req.write_text("soundfile==0.13.1\nxgrammar==9.9.9\n")  # 9.9.9 exists nowhere
    before = state(target)
    code, _, err = run(
        capsys, "--inventory", str(inv), "repair", str(req), "tgt", "--prefer", "fix", "--apply"
    )
    assert code == 4
    line = err.strip().splitlines()[-1]
    assert "step 2 (pin: pin xgrammar==9.9.9" in line and "rolled back" in line
    assert state(target) == before  # soundfile, pinned by step 1, is gone again


def test_a_killed_apply_is_undone_on_the_host_and_rollback_after_it_is_harmless(
    bed: dict[str, Path], target: Path, tmp_path: Path
) -> None:
    inv = inventory(bed, target, tmp_path / "inv.toml")
    before = state(target)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENVSYNC_")}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "envsync",
            "--inventory",
            str(inv),
            "-q",
            "repair",
            "--prefer",
            "fix",
            "--apply",
            "--no-deploy",
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    backups = state_dir(target) / "backups"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        journals = list(backups.glob("*/journal.jsonl"))
        if journals and "step 1 done" in journals[0].read_text():
            break
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert journals and "applied" not in journals[0].read_text()
    # the lock's holder on the host saw its client go: it let pip end, restored, released
    wait_unlocked()
    assert "is gone: restoring" in journals[0].read_text()
    assert state(target) == before
    code = subprocess.run(
        [sys.executable, "-m", "envsync", "--inventory", str(inv), "rollback", "tgt"],
        env=env,
        capture_output=True,
        text=True,
    )
    assert code.returncode == 0, code.stderr
    assert state(target) == before


def test_a_saved_plan_for_a_changed_target_is_refused(
    capsys: pytest.CaptureFixture[str], bed: dict[str, Path], target: Path, tmp_path: Path
) -> None:
    inv = inventory(bed, target, tmp_path / "inv.toml")
    plan = tmp_path / "plan.json"
    assert run(capsys, "--inventory", str(inv), "-q", "repair", "-o", str(plan))[0] == 1
    (site_packages(target) / "svc" / "server.py").write_text("X = 3  # changed by hand since\n")
    before = tree_hash(target)
    code, _, err = run(
        capsys, "--inventory", str(inv), "-q", "repair", "--plan", str(plan), "--apply"
    )
    assert code == 2
    assert "tgt: the target changed since the plan was made" in err
    assert tree_hash(target) == before


def test_the_flag_workaround_is_kept_for_the_host_and_rolled_back(
    capsys: pytest.CaptureFixture[str], bed: dict[str, Path], target: Path, tmp_path: Path
) -> None:
    inv = inventory(bed, target, tmp_path / "inv.toml")
    code, out, _ = run(capsys, "--inventory", str(inv), "-q", "repair")  # --prefer auto
    assert code == 1
    assert "flag: launch with --grammar none (gives up: constrained output)" in out
    # the command as the host runs it: placeholders filled, the kept flag applied once
    assert f"the service will run: {target} -m svc.main --grammar none\n" in out
    assert run(capsys, "--inventory", str(inv), "-q", "repair", "--apply", "--no-deploy")[0] == 0
    assert versions(target)["xgrammar"] == "0.1.10"  # the workaround, not the pin
    code, out, _ = run(capsys, "--inventory", str(inv), "-q", "diff", "--format", "json")
    report = json.loads(out)
    assert report["command"][-2:] == ["--grammar", "none"]
    assert [f for f in report["findings"] if f["severity"] == "fatal"] == []
    assert inv.read_text().count("--grammar") == 0  # the inventory is not rewritten
    assert run(capsys, "--inventory", str(inv), "-q", "rollback", "tgt")[0] == 0
    code, out, _ = run(capsys, "--inventory", str(inv), "-q", "diff", "--format", "json")
    assert "--grammar" not in json.loads(out)["command"]
    # with a command that uses what the flag gives up, auto pins instead
    inv = inventory(bed, target, tmp_path / "inv2.toml", command="--tools on")
    code, out, _ = run(capsys, "--inventory", str(inv), "-q", "repair")
    assert code == 1
    assert "pin xgrammar==0.1.32" in out and "--grammar none" not in out


def test_repair_and_rollback_over_ssh(
    capsys: pytest.CaptureFixture[str],
    bed: dict[str, Path],
    target: Path,
    tmp_path: Path,
    sshd_bed: SSHD,
) -> None:
    inv = inventory(bed, target, tmp_path / "inv.toml", ssh=sshd_bed)
    before = state(target)
    code, _, err = run(
        capsys, "--inventory", str(inv), "-q", "repair", "--prefer", "fix", "--apply"
    )
    assert code == 0, err
    assert versions(target)["xgrammar"] == "0.1.32"
    assert state(target)[1]["svc"] == state(bed["ref"])[1]["svc"]
    code, out, _ = run(capsys, "--inventory", str(inv), "-q", "diff", "--format", "json")
    left = {(f["subject"], f["severity"]) for f in json.loads(out)["findings"]}
    # only what the target has more: setuptools risky (its .pth runs at every start)
    assert {s for s in left if s[1] != "benign"} == {("setuptools", "risky")}
    assert run(capsys, "--inventory", str(inv), "-q", "rollback", "tgt")[0] == 0
    assert state(target) == before


def test_rollback_without_a_backup(
    capsys: pytest.CaptureFixture[str], bed: dict[str, Path], target: Path, tmp_path: Path
) -> None:
    inv = inventory(bed, target, tmp_path / "inv.toml")
    code, _, err = run(capsys, "--inventory", str(inv), "rollback", "tgt")
    assert code == 4
    assert err.strip() == "envsync: tgt: no envsync backup in this environment"


def test_without_an_index_the_pin_falls_back_to_the_reference_files(
    capsys: pytest.CaptureFixture[str], bed: dict[str, Path], target: Path, tmp_path: Path
) -> None:
    inv = inventory(bed, target, tmp_path / "inv.toml")
    inv.write_text(
        inv.read_text().replace(
            f'"--find-links", "{bed["wheels"]}"', '"--find-links", "/nonexistent"'
        )
    )
    code, out, _ = run(capsys, "--inventory", str(inv), "-q", "repair", "--prefer", "fix")
    assert code == 1 and "if the target's index cannot serve it: copy the installed files" in out
    code, _, err = run(
        capsys, "--inventory", str(inv), "-q", "repair", "--prefer", "fix", "--apply"
    )
    assert code == 0, err
    assert versions(target)["xgrammar"] == "0.1.32"
    ref_files, tgt_files = state(bed["ref"])[1]["xgrammar"], state(target)[1]["xgrammar"]
    package = {
        p: h
        for p, h in ref_files.items()
        if not p.startswith("../") and not p.endswith(("INSTALLER", "direct_url.json", "REQUESTED"))
    }
    assert {p: tgt_files.get(p) for p in package} == package
    code, out, _ = run(capsys, "--inventory", str(inv), "-q", "diff", "--format", "json")
    assert not [f for f in json.loads(out)["findings"] if f["subject"] in ("xgrammar", "soundfile")]


def test_repair_and_rollback_inside_a_container(
    capsys: pytest.CaptureFixture[str],
    bed: dict[str, Path],
    target: Path,
    tmp_path: Path,
    containers: Callable[..., Container],
) -> None:
    """The target venv is /opt/venv inside; pip, the files and the backup stay inside."""
    ct = containers(target.parent.parent, mounts={"/opt/wheels": bed["wheels"]})
    inv = inventory(bed, target, tmp_path / "inv.toml")
    inv.write_text(
        inv.read_text()
        .replace(
            f'python = "{target}"',
            f'python = "/opt/venv/bin/python"\nexec = {json.dumps(ct.exec_prefix)}',
        )
        .replace(str(bed["wheels"]), "/opt/wheels")
    )
    before = state(target)
    code, out, _ = run(capsys, "--inventory", str(inv), "-q", "repair", "--prefer", "fix")
    assert code == 1 and "pin xgrammar==0.1.32" in out
    assert "note: tgt is reached through `" in out
    assert "restarting it from its image discards them" in out and "envsync lock tgt" in out
    code, _, err = run(capsys, "--inventory", str(inv), "repair", "--prefer", "fix", "--apply")
    assert code == 0, err
    assert "tgt: tgt is reached through `" in err  # said again once applied
    assert versions(target)["xgrammar"] == "0.1.32"
    assert state(target)[1]["svc"] == state(bed["ref"])[1]["svc"]  # a file streamed in
    assert not (Path.home() / ".envsync").exists()  # the backup is inside, not here
    code, out, _ = run(capsys, "--inventory", str(inv), "-q", "diff", "--format", "json")
    left = {(f["subject"], f["severity"]) for f in json.loads(out)["findings"]}
    # only what the target has more: setuptools risky (its .pth runs at every start)
    assert {s for s in left if s[1] != "benign"} == {("setuptools", "risky")}
    code, out, _ = run(capsys, "--inventory", str(inv), "-q", "lock", "tgt")
    assert code == 0
    assert 'name = "xgrammar"\nversion = "0.1.32"' in out  # what to bake into the image
    assert 'location = "/opt/venv/lib/' in out
    assert run(capsys, "--inventory", str(inv), "-q", "rollback", "tgt")[0] == 0
    assert state(target) == before
