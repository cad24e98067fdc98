"""Rollback knows what happened since the apply: real venvs, real pip, real edits.

A later pip install and a hand edit are never undone without a word: the rollback refuses,
names them and offers --force; a backup rolled back is not restored again; the latest apply
that is not rolled back is what `rollback` undoes (apply A applied, apply B failed: A is
undone); `--list` shows the backups, `--backup ID` picks one.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.helpers import site_packages
from tests.repair.conftest import env_listing
from tests.repair.restore_bed import (
    APPLY,
    applied,
    assert_same,
    cli,
    inventory,
    last_line,
    listing,
    replayed,
    requirements,
    tgt,
    wheels,
)

__all__ = ["tgt", "wheels"]  # fixtures

pytestmark = pytest.mark.slow


def test_a_later_install_and_a_hand_edit_are_never_undone_silently(
    wheels: dict[str, Path], tgt: Path, tmp_path: Path
) -> None:
    inv = inventory(tmp_path / "inv.toml", tgt, wheels["index"])
    ref = requirements(tmp_path / "ref.txt", "pkg==2.0")
    before = env_listing(tgt)
    applied(inv, ref)
    # after the apply: a hand pip install of another version, and a hand edit
    subprocess.run(
        [str(tgt), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheels["pkg3"])],
        check=True,
    )
    edited = site_packages(tgt) / "zzz.py"
    edited.write_text("# edited by hand after the apply\n")
    later = env_listing(tgt)
    code, err = cli(inv, "rollback", "tgt")
    assert code == 4, err
    line = last_line(err)
    assert "changed since the apply of" in line and "nothing was restored" in line, line
    assert "pkg-3.0.dist-info" in line or "pkg/__init__.py" in line, line
    assert "--force` restores the backup over them" in line
    assert_same(tgt, later)  # both later changes stand
    replayed("a later pip install: rollback refused, naming it")
    # the edit of a file outside the backup's record is not the rollback's business:
    # --force puts the backup's own paths back and leaves zzz.py as it was edited
    code, err = cli(inv, "rollback", "tgt", "--force")
    assert code == 0, err
    now = env_listing(tgt)
    key = str(edited.relative_to(tgt.parent.parent))
    assert now[key] != before[key]
    assert {k: v for k, v in now.items() if k != key} == {
        k: v for k, v in before.items() if k != key
    }
    replayed("rollback --force over a later install")


def test_a_hand_edit_of_a_file_the_apply_changed_is_named(
    wheels: dict[str, Path], tgt: Path, tmp_path: Path
) -> None:
    inv = inventory(tmp_path / "inv.toml", tgt, wheels["index"])
    ref = requirements(tmp_path / "ref.txt", "pkg==2.0")
    applied(inv, ref)
    edited = site_packages(tgt) / "pkg" / "b.py"
    edited.write_text("B = 3  # a hand edit after the apply\n")
    later = env_listing(tgt)
    code, err = cli(inv, "rollback", "tgt")
    assert code == 4, err
    assert "pkg/b.py" in last_line(err) and "1 path(s) changed" in last_line(err)
    assert_same(tgt, later)
    replayed("a hand edit: rollback refused, naming it")


def test_a_backup_rolled_back_is_not_restored_again(
    wheels: dict[str, Path], tgt: Path, tmp_path: Path
) -> None:
    inv = inventory(tmp_path / "inv.toml", tgt, wheels["index"])
    ref = requirements(tmp_path / "ref.txt", "pkg==2.0")
    before = env_listing(tgt)
    applied(inv, ref)
    code, err = cli(inv, "rollback", "tgt")
    assert code == 0, err
    assert_same(tgt, before)
    # a newer change by hand; a second rollback must not restore the backup over it
    subprocess.run(
        [str(tgt), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheels["pkg2"])],
        check=True,
    )
    later = env_listing(tgt)
    code, err = cli(inv, "rollback", "tgt")
    assert code == 0, err
    assert "nothing to roll back" in last_line(err) and "rolled back already" in last_line(err)
    assert_same(tgt, later)
    replayed("a second rollback restores nothing again")


def test_apply_a_applied_then_apply_b_failed_rollback_undoes_a(
    wheels: dict[str, Path], tgt: Path, tmp_path: Path
) -> None:
    inv = inventory(tmp_path / "inv.toml", tgt, wheels["index"])
    before = env_listing(tgt)
    applied(inv, requirements(tmp_path / "a.txt", "pkg==2.0"))
    # B pins newpkg (installed), then zzz 9.9 (nowhere): B fails and rolls itself back
    b = requirements(tmp_path / "b.txt", "pkg==2.0", "newpkg==1.0", "zzz==9.9")
    code, err = cli(inv, *APPLY[:1], str(b), "tgt", *APPLY[1:])
    assert code == 4, err
    rows = listing(inv)
    assert [(mark, state) for mark, _, state in rows] == [(" ", "rolled-back"), ("*", "applied")]
    code, err = cli(inv, "rollback", "tgt")
    assert code == 0, err
    assert_same(tgt, before)  # A undone, not B's backup "restored" over A
    replayed("apply A applied, apply B failed: rollback undoes A")


def test_rollback_backup_id_restores_the_one_named(
    wheels: dict[str, Path], tgt: Path, tmp_path: Path
) -> None:
    # B moves pkg on to 3.0, so the paths A's apply left are B's to change
    index = tmp_path / "index"
    index.mkdir()
    for wheel in ("pkg2", "new", "pkg3"):
        shutil.copy(wheels[wheel], index)
    inv = inventory(tmp_path / "inv.toml", tgt, index)
    before = env_listing(tgt)
    applied(inv, requirements(tmp_path / "a.txt", "pkg==2.0"))
    middle = env_listing(tgt)
    applied(inv, requirements(tmp_path / "b.txt", "pkg==3.0", "newpkg==1.0"))
    (_, newest, _), (_, oldest, _) = listing(inv)
    # the older apply's paths were changed by the newer one: refused, then in order
    code, err = cli(inv, "rollback", "tgt", "--backup", oldest)
    assert code == 4 and "changed since the apply" in last_line(err), err
    code, err = cli(inv, "rollback", "tgt", "--backup", newest)
    assert code == 0, err
    assert_same(tgt, middle)
    code, err = cli(inv, "rollback", "tgt", "--backup", oldest)
    assert code == 0, err
    assert_same(tgt, before)
    replayed("rollback --backup ID, in order")
