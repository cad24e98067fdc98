"""Commands say what they did (issue 34, points 4 and 5): a file not found is named by its
absolute path and, when relative, the folder it was relative to; `watch --once` says
"no change" in one line (`-q` silences it); `check` says what it compared; `repair`
without `--apply` ends with the command that applies its plan."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from envsync.cli.output import apply_line
from envsync.repair.run import RepairOptions
from tests.helpers import run_cli as run
from tests.repair.conftest import bed, target  # noqa: F401  (the repair bed: real wheels)
from tests.report.test_watch import watched  # noqa: F401  (the fixture: a real venv as host `h`)

SNAPSHOT = Path(__file__).resolve().parent.parent / "data" / "snapshots" / "ct129.json"


def _drifted(folder: Path) -> Path:
    data = json.loads(SNAPSHOT.read_text())
    data["host"] = "ct200"
    for dist in data["distributions"]:
        if dist["name"] == "xgrammar":
            dist["version"] = "0.1.10"
    path = folder / "ct200.json"
    path.write_text(json.dumps(data))
    return path


# --- point 4: the path as resolved


def test_a_relative_inventory_from_another_folder_names_the_folder(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    monkeypatch.setenv("ENVSYNC_INVENTORY", "examples/envsync.toml")
    code, out, err = run(capsys, "diff")
    assert (code, out) == (2, "")
    assert err.startswith(
        f"envsync: {elsewhere}/examples/envsync.toml: inventory file not found "
        f"(ENVSYNC_INVENTORY=examples/envsync.toml, relative to {elsewhere})"
    ), err
    assert len(err.splitlines()) == 1
    monkeypatch.delenv("ENVSYNC_INVENTORY")
    code, _, err = run(capsys, "--inventory", "inv.toml", "diff")
    assert code == 2
    assert f"{elsewhere}/inv.toml: inventory file not found (--inventory=inv.toml" in err


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["diff", "sub/ref.json", "SNAP"], "{cwd}/sub/ref.json: snapshot file not found"),
        (["diff", "SNAP", "old.lock"], "{cwd}/old.lock: lock file not found"),
        (["diff", "SNAP", "reqs.txt"], "{cwd}/reqs.txt: requirements file not found"),
        (["check", "--lock", "env.lock", "SNAP"], "{cwd}/env.lock: lock file not found"),
        (["repair", "--plan", "plan.json", "--apply"], "{cwd}/plan.json: plan not found"),
    ],
)
def test_every_not_found_names_the_absolute_path_and_its_folder(
    argv: list[str],
    said: str,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    argv = [str(SNAPSHOT) if a == "SNAP" else a for a in argv]
    code, _, err = run(capsys, "-q", *argv)
    assert code == 2
    assert said.format(cwd=tmp_path) in err and f"relative to {tmp_path})" in err, err


def test_an_absolute_path_is_said_as_it_is(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, _, err = run(capsys, "-q", "diff", str(SNAPSHOT), str(tmp_path / "gone.json"))
    assert code == 2
    assert f"{tmp_path}/gone.json: snapshot file not found" in err and "relative" not in err


# --- point 5: commands say what they did


def test_check_says_what_it_compared(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    lock = tmp_path / "env.lock"
    assert run(capsys, "-q", "lock", str(SNAPSHOT), "-o", str(lock))[0] == 0
    code, _, err = run(capsys, "check", "--lock", str(lock), str(SNAPSHOT))
    assert code == 0
    assert (
        f"check: compared ct129 with {lock} (ct129); no finding at or above fatal: passing" in err
    )
    code, _, err = run(
        capsys, "check", "--lock", str(lock), str(_drifted(tmp_path)), "--fail-on", "risky"
    )
    assert code == 1
    assert err.splitlines()[-1] == (
        f"check: compared ct200 with {lock} (ct129); 1 finding(s) at or above risky: failing"
    )
    # -q: the data only
    code, _, err = run(capsys, "-q", "check", "--lock", str(lock), str(SNAPSHOT))
    assert (code, err) == (0, "")


def test_watch_once_says_no_change_in_one_line(
    capsys: pytest.CaptureFixture[str],
    watched: dict[str, Path],  # noqa: F811
    tmp_path: Path,
) -> None:
    base = ["--inventory", str(watched["inv"])]
    states = ["--state-dir", str(watched["states"])]
    lock = tmp_path / "h.lock"
    assert run(capsys, *base, "-q", "lock", "h", *states, "-o", str(lock))[0] == 0
    code, out, err = run(capsys, *base, "watch", "--once", *states)
    assert code == 0 and out == ""
    (line,) = err.splitlines()
    assert line.endswith(" no change on h since the last run (none at or above fatal)"), line
    # -q: silent, as before
    assert run(capsys, *base, "-q", "watch", "--once", *states) == (0, "", "")


def test_the_apply_line_is_the_command_that_applies_the_plan() -> None:
    plain = RepairOptions()
    assert apply_line(plain, "ct129", "ct200") == "to apply it: envsync repair ct129 ct200 --apply"
    chosen = RepairOptions(prefer="workaround", only="benign")  # type: ignore[arg-type]  # not a choice of --only: apply_line repeats what it is given
    assert apply_line(chosen, "ct129", "my host") == (
        "to apply it: envsync repair ct129 'my host' --prefer workaround --only benign --apply"
    )
    fleet = RepairOptions(batch=("1,50%",), max_fail="10%")
    assert apply_line(fleet, "ct129", "gpu[01-08]") == (
        "to apply it: envsync repair ct129 'gpu[01-08]' --batch 1,50% --max-fail 10% --apply"
    )
    saved = RepairOptions(save=Path("/tmp/the plan.json"))
    assert apply_line(saved, "ct129", "ct200") == (
        "to apply it: envsync repair --plan '/tmp/the plan.json' --apply"
    )


@pytest.mark.slow
def test_repair_without_apply_ends_with_the_command_that_applies_it(
    capsys: pytest.CaptureFixture[str],
    bed: dict[str, Path],  # noqa: F811
    target: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    from tests.repair.conftest import inventory

    inv = inventory(bed, target, tmp_path / "inv.toml")
    code, out, _ = run(capsys, "--inventory", str(inv), "-q", "repair", "--prefer", "fix")
    assert code == 1
    assert out.splitlines()[-1] == (  # the command as given, every option kept
        f"to apply it: envsync --inventory {inv} -q repair --prefer fix --apply"
    )
    # a saved plan: applied as it was saved, with the options that apply it (--no-deploy)
    saved = tmp_path / "plan.json"
    argv = ("--inventory", str(inv), "repair", "ref", "tgt", "-o", str(saved), "--no-deploy")
    code, out, _ = run(capsys, *argv)
    assert code == 1
    assert out.strip().splitlines()[-1] == (
        f"to apply it: envsync --inventory {inv} repair --no-deploy --plan {saved} --apply"
    )


def test_watch_says_a_files_hashes_as_the_table_does() -> None:
    from envsync.report.watch import FindingSeen, WatchRun, event_lines

    seen = FindingSeen(
        host="h",
        against="h@good",
        gone=False,
        severity="risky",
        kind="file",
        subject="app/x.py",
        reference="a" * 64,
        target="b" * 64,
        reason="r",
    )
    (line,) = event_lines(WatchRun(at="2026-12-01T10:00:00Z", events=(seen,), statuses=()))
    assert "(aaaaaaaaaa… → bbbbbbbbbb…)" in line and "a" * 11 not in line
