"""Plans and snapshots are untrusted data: nothing in them becomes an installer option, a
path, code, or the installer program itself.

Real saved plans and snapshots, crafted, against a real target venv: a requirement that is
an option (`--target=DIR`, which wrote outside the environment), a local path with
`--no-build-isolation` (which ran its setup.py), a reference snapshot whose distribution is
named `--target=DIR`, and a plan naming the program to run as `uv`. Each is refused with
one line and exit 2 before anything runs: no backup, no file written, the program and the
setup.py never run, the whole environment as it was.
"""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from tests.figures import add
from tests.helpers import state_dir
from tests.repair.conftest import env_hash, inventory, run

pytestmark = pytest.mark.slow


def refused(case: str) -> None:
    add("repair breaks replayed (byte-identical or refused)", case)


def saved_plan(capsys: pytest.CaptureFixture[str], inv: Path, path: Path) -> dict[str, object]:
    code, _, err = run(
        capsys, "--inventory", str(inv), "-q", "repair", "--prefer", "fix", "-o", str(path)
    )
    assert code == 1, err
    return dict(json.loads(path.read_text()))


def apply_plan(capsys: pytest.CaptureFixture[str], inv: Path, plan: Path) -> tuple[int, str]:
    code, _, err = run(capsys, "--inventory", str(inv), "repair", "--plan", str(plan), "--apply")
    return code, err


def marker_program(tmp_path: Path) -> tuple[Path, Path]:
    """A program that, if it ever runs, leaves a file behind."""
    marker = tmp_path / "it-ran"
    program = tmp_path / "any-program"
    program.write_text(f"#!/bin/sh\ntouch {marker}\n")
    program.chmod(program.stat().st_mode | stat.S_IXUSR)
    return program, marker


def one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("envsync: "), lines
    return lines[0]


def test_requirements_that_are_options_or_paths_are_refused_before_anything_runs(
    capsys: pytest.CaptureFixture[str], bed: dict[str, Path], target: Path, tmp_path: Path
) -> None:
    inv = inventory(bed, target, tmp_path / "inv.toml")
    plan = tmp_path / "plan.json"
    saved = saved_plan(capsys, inv, plan)
    outside = tmp_path / "somewhere"
    pkg = tmp_path / "evilpkg"
    pkg.mkdir()
    marker = tmp_path / "setup-ran"
    (pkg / "setup.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    before = env_hash(target)
    for reqs in (
        [f"--target={outside}", "soundfile==0.13.1"],
        ["--no-build-isolation", str(pkg)],
        [str(pkg)],
        ["soundfile==0.13.1 --target=/x"],
        ["soundfile @ file:///tmp/x.whl"],
        ["soundfile==0.13.1\n-r /etc/shadow"],
        ["soundfile>=0"],
    ):
        crafted = json.loads(json.dumps(saved))
        pin = next(s for s in crafted["steps"] if s["kind"] == "pin")
        pin["requirements"] = reqs
        plan.write_text(json.dumps(crafted))
        code, err = apply_plan(capsys, inv, plan)
        assert code == 2, err
        line = one_line(err)
        assert "refusing the plan: step 1 (pin) hands the installer" in line, line
        assert env_hash(target) == before
        assert not outside.exists() and not marker.exists()
        assert not list((state_dir(target) / "backups").glob("*"))
        refused(f"plan requirement {reqs[0][:24]!r}...")


def test_a_plan_naming_the_installer_program_is_refused_and_it_never_runs(
    capsys: pytest.CaptureFixture[str], bed: dict[str, Path], target: Path, tmp_path: Path
) -> None:
    inv = inventory(bed, target, tmp_path / "inv.toml")
    plan = tmp_path / "plan.json"
    saved = saved_plan(capsys, inv, plan)
    program, marker = marker_program(tmp_path)
    before = env_hash(target)
    for change in (
        {"uv": str(program)},
        {"installer": "uv", "uv": str(program)},
        {"installer": str(program)},
    ):
        crafted = json.loads(json.dumps(saved))
        pin = next(s for s in crafted["steps"] if s["kind"] == "pin")
        pin.update(change)
        plan.write_text(json.dumps(crafted))
        code, err = apply_plan(capsys, inv, plan)
        assert code == 2, err
        line = one_line(err)
        assert "not an envsync plan: plan.steps[0]" in line, line
        assert not marker.exists()
        assert env_hash(target) == before
    refused('a saved plan naming "uv": "/any/program"')


def test_a_reference_snapshot_whose_distribution_is_an_option_is_refused(
    capsys: pytest.CaptureFixture[str], bed: dict[str, Path], target: Path, tmp_path: Path
) -> None:
    inv = inventory(bed, target, tmp_path / "inv.toml")
    snap = tmp_path / "ref.json"
    code, _, err = run(capsys, "--inventory", str(inv), "-q", "snapshot", "ref", "-o", str(snap))
    assert code == 0, err
    data = json.loads(snap.read_text())
    outside = tmp_path / "outside"
    (dist,) = [d for d in data["distributions"] if d["name"] == "soundfile"]
    dist["display_name"] = f"--target={outside}"
    snap.write_text(json.dumps(data))
    before = env_hash(target)
    code, _, err = run(
        capsys,
        "--inventory",
        str(inv),
        "-q",
        "repair",
        str(snap),
        "tgt",
        "--prefer",
        "fix",
        "--apply",
    )
    assert code == 2, err
    line = one_line(err)
    assert f"refusing to hand an installer '--target={outside}==0.13.1'" in line, line
    assert env_hash(target) == before and not outside.exists()
    assert not list((state_dir(target) / "backups").glob("*"))
    refused("a reference snapshot naming a distribution --target=DIR")


def test_the_installer_gets_every_requirement_after_a_double_dash() -> None:
    from envsync.repair.steps.pin import PinStep, install_argv
    from tests.repair.test_plan import snap

    step = PinStep(summary="s", findings=("x",), requirements=("x==1.0",), dists=("x",))
    argv = install_argv(step, snap("tgt"), "/py", "/c.txt", ["--no-index"])
    assert argv[-2:] == ["--", "x==1.0"] and argv.index("--no-index") < argv.index("--")
    uv = install_argv(
        PinStep(
            summary="s", findings=("x",), requirements=("x==1.0",), dists=("x",), installer="uv"
        ),
        snap("tgt"),
        "/py",
        "/c.txt",
        [],
    )
    assert uv[1:3] == ["pip", "install"] and uv[-2:] == ["--", "x==1.0"]
