"""repair and rollback with real pip installs into real venvs, locally and over SSH.

The reference venv has xgrammar 0.1.32 and soundfile (real wheels); each test gets a fresh
target venv, with pip, holding xgrammar 0.1.10 and a local build `localpkg 1.0+cu130`. Both
run a small service, `svc`, whose startup imports soundfile and StructuralTag. Pins come
from the real wheels through `pip_options` (--no-index --find-links), as an index would.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from envsync.collect import ProbeOptions, collect
from envsync.inventory import HostSpec
from envsync.runner.local import LocalRunner
from tests.classify.test_sglang_wheels import fetch
from tests.container import Container
from tests.helpers import make_venv, make_wheel, pip_install, run_cli, site_packages
from tests.sshd import SSHD

pytestmark = pytest.mark.slow

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
        known = path.parent / "known_hosts"
        known.write_text(ssh.host_key_line())
        text += f'ssh = "{ssh.target}"\nidentity = "{ssh.client_key}"\nknown_hosts = "{known}"\n'
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
    root = python.parent.parent
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            digest.update(str(path).encode() + hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    if "--apply" in argv and "--no-deploy" not in argv:
        argv = (*argv, "--no-deploy")  # these tests are about apply; deploy has its own
    return run_cli(capsys, *argv)


def versions(python: Path) -> dict[str, str]:
    return dict(state(python)[0])


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
    assert plan["schema_version"] == 1 and len(plan["target_fingerprint"]) == 64
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
    assert left == {
        ("localpkg", "extra", "benign"),
        ("pip", "extra", "benign"),
        ("setuptools", "extra", "benign"),
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


def test_a_killed_apply_is_undone_by_rollback(
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
    backups = Path.home() / ".envsync" / "backups"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        journals = list(backups.glob("*/*/journal.jsonl"))
        if journals and "step 1 done" in journals[0].read_text():
            break
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert journals and "applied" not in journals[0].read_text()
    _wait_for_pip(target)
    assert state(target) != before  # the kill left it half-done
    code = subprocess.run(
        [sys.executable, "-m", "envsync", "--inventory", str(inv), "rollback", "tgt"],
        env=env,
        capture_output=True,
        text=True,
    )
    assert code.returncode == 0, code.stderr
    assert state(target) == before


def _wait_for_pip(target: Path) -> None:
    """A step's pip, started in its own session, finishes after its parent is killed."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        busy = False
        for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
            try:
                text = cmdline.read_bytes()
            except OSError:
                continue
            if str(target).encode() in text and b"pip" in text:
                busy = True
        if not busy:
            return
        time.sleep(0.05)


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
    assert {f["severity"] for f in json.loads(out)["findings"]} == {"benign"}
    assert run(capsys, "--inventory", str(inv), "-q", "rollback", "tgt")[0] == 0
    assert state(target) == before


def test_rollback_without_a_backup(
    capsys: pytest.CaptureFixture[str], bed: dict[str, Path], target: Path, tmp_path: Path
) -> None:
    inv = inventory(bed, target, tmp_path / "inv.toml")
    code, _, err = run(capsys, "--inventory", str(inv), "rollback", "tgt")
    assert code == 4
    assert err.strip() == "envsync: tgt: no envsync backup on this host"


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
    assert {f["severity"] for f in json.loads(out)["findings"]} == {"benign"}
    code, out, _ = run(capsys, "--inventory", str(inv), "-q", "lock", "tgt")
    assert code == 0
    assert 'name = "xgrammar"\nversion = "0.1.32"' in out  # what to bake into the image
    assert 'location = "/opt/venv/lib/' in out
    assert run(capsys, "--inventory", str(inv), "-q", "rollback", "tgt")[0] == 0
    assert state(target) == before
