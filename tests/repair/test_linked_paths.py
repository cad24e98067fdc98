"""No write leaves the environment, and no rollback reports a restore that did not happen.

Real venvs, real pip, real wheels. A package folder of the target that is a link to another
environment's (as Spack views and shared builds make them), a target whose site-packages is
such a link, and a RECORD line naming a path outside: the apply is refused before anything
changes, in one line naming the link and where it points (exit 4), both environments byte
for byte as they were; pip ran through the first two before, and the other environment
kept the new files. A rollback checks what it put back: a backup of an apply that wrote
through such a link (an envsync before this check made them), a package folder that became
a link after the apply, and a file that does not end as the record says are each reported,
never "restored".
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.figures import round_four
from tests.helpers import make_venv, make_wheel, pip_install, site_packages, state_dir
from tests.repair.conftest import env_listing
from tests.repair.restore_bed import add_record_lines, assert_same, cli, inventory, last_line

pytestmark = pytest.mark.slow

PKG1 = {"pkg/__init__.py": "V = 1\n", "pkg/mod.py": "X = 1\n"}
PKG2 = {"pkg/__init__.py": "V = 2\n", "pkg/mod.py": "X = 2\n", "pkg/new.py": ""}
APPLY = ("-q", "repair", "REF", "tgt", "--prefer", "fix", "--apply", "--no-deploy")
REFUSED = "2 writes that leave the environment refused"
CHECKED = "2 rollbacks checked, never a false restore"


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("linked-wheels")
    return {
        "index": root / "index",
        "pkg1": make_wheel(root / "index", "pkg", "1.0", PKG1),
        "pkg2": make_wheel(root / "index", "pkg", "2.0", PKG2),
    }


def venv(root: Path, wheels: dict[str, Path], *, with_pip: bool = True) -> Path:
    python = make_venv(root, with_pip=with_pip)
    pip_install(python, wheels["pkg1"])
    return python


def link(place: Path, to: Path) -> None:
    """`place` (a folder) replaced by a link to `to`."""
    shutil.rmtree(place)
    place.symlink_to(to, target_is_directory=True)


def apply(inv: Path, tmp_path: Path, *argv: str) -> tuple[int, str]:
    ref = tmp_path / "ref.txt"
    ref.write_text("pkg==2.0\n")
    return cli(inv, *(str(ref) if a == "REF" else a for a in (argv or APPLY)))


def assert_refused(code: int, err: str, *named: str) -> None:
    """Exit 4, one line (progress aside) naming each of `named`, nothing changed."""
    assert code == 4, err
    line = last_line(err)
    assert all(n in line for n in named), line
    assert "outside this environment" in line and "nothing was changed" in line, line
    assert [ln for ln in err.splitlines() if ln.startswith("envsync:")] == [line], err


def test_a_write_through_a_link_out_of_the_environment_is_refused_before_anything_changes(
    wheels: dict[str, Path], tmp_path: Path
) -> None:
    held = 0
    # 1. a package folder linked to another environment's (a Spack view's)
    other = venv(tmp_path / "other", wheels)
    tgt = venv(tmp_path / "tgt", wheels)
    theirs = site_packages(other) / "pkg"
    link(site_packages(tgt) / "pkg", theirs)
    inv = inventory(tmp_path / "inv.toml", tgt, wheels["index"])
    before = env_listing(tgt), env_listing(other)
    code, err = apply(inv, tmp_path)
    assert_refused(code, err, f"{site_packages(tgt) / 'pkg'}, a link to {theirs}")
    assert (env_listing(tgt), env_listing(other)) == before  # pip wrote V = 2 there before
    assert not list((state_dir(tgt) / "backups").glob("*"))
    held += 1

    # 2. the same folder, a copy of the reference's file through it (sync-file)
    ref = venv(tmp_path / "ref", wheels)
    (site_packages(ref) / "pkg" / "mod.py").write_text("X = 'patched'\n")
    (tmp_path / "inv2.toml").write_text(
        f'[defaults]\nreference = "ref"\ntarget = "tgt"\nwatch = ["pkg"]\n'
        f'[hosts.ref]\npython = "{ref}"\n[hosts.tgt]\npython = "{tgt}"\n'
    )
    code, err = cli(tmp_path / "inv2.toml", "-q", "repair", "--prefer", "fix", "--apply")
    assert_refused(code, err, f"{site_packages(tgt) / 'pkg'}, a link to {theirs}")
    assert (env_listing(tgt), env_listing(other)) == before
    held += 1

    # 3. a target whose site-packages is the other environment's
    shared = make_venv(tmp_path / "shared", with_pip=True)
    pip_install(shared, wheels["pkg1"])
    tgt3 = make_venv(tmp_path / "tgt3")
    link(site_packages(tgt3), site_packages(shared))
    inv3 = inventory(tmp_path / "inv3.toml", tgt3, wheels["index"])
    before3 = env_listing(tgt3), env_listing(shared)
    code, err = apply(inv3, tmp_path)
    assert_refused(code, err, f"{site_packages(tgt3)}, a link to {site_packages(shared)}")
    assert (env_listing(tgt3), env_listing(shared)) == before3
    held += 1

    # 4. a RECORD line that names a file outside (pip removes it outside a venv)
    tgt4 = venv(tmp_path / "tgt4", wheels)
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    add_record_lines(tgt4, "pkg-1.0.dist-info", "../../../../victim.txt")
    inv4 = inventory(tmp_path / "inv4.toml", tgt4, wheels["index"])
    before4 = env_listing(tgt4)
    code, err = apply(inv4, tmp_path)
    assert_refused(code, err, "'../../../../victim.txt' is " + str(victim))
    assert env_listing(tgt4) == before4 and victim.read_text() == "precious\n"
    held += 1
    round_four(REFUSED, held)


def applied(python: Path, index: Path, tmp_path: Path) -> tuple[Path, Path]:
    """pkg==2.0 applied to the venv of `python` (no link anywhere): its inventory, and
    the backup the apply made."""
    inv = inventory(tmp_path / f"{python.parent.parent.name}.toml", python, index)
    code, err = apply(inv, tmp_path)
    assert code == 0, err
    (backup,) = (state_dir(python) / "backups").glob("*")
    return inv, backup


def test_a_rollback_checks_what_it_put_back_and_never_reports_a_restore_that_did_not_happen(
    wheels: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    held = 0
    # 1. a backup of an apply that wrote through a linked package folder, as an envsync
    # without the check made it: the apply's files went to the other environment, and
    # the record holds none of them (it took them for paths outside the environment)
    other = venv(tmp_path / "other", wheels)
    tgt = venv(tmp_path / "tgt", wheels)
    inv, backup = applied(tgt, wheels["index"], tmp_path)
    theirs = site_packages(other) / "pkg"
    shutil.rmtree(theirs)
    shutil.move(site_packages(tgt) / "pkg", theirs)  # the new files, in the other env
    (site_packages(tgt) / "pkg").symlink_to(theirs, target_is_directory=True)
    manifest = json.loads((backup / "manifest.json").read_text())

    def kept(key: str) -> bool:
        return "/pkg/" not in key and not key.endswith("/pkg")

    for record in ("before", "after"):
        manifest[record] = {k: v for k, v in manifest[record].items() if kept(k)}
    for dist in manifest["dists"]:
        dist["paths"] = [k for k in dist["paths"] if kept(k)]
    (backup / "manifest.json").write_text(json.dumps(manifest))
    code, err = cli(inv, "rollback", "tgt")
    assert code == 4, err  # it said "restored ... path(s) put back", exit 0
    line = last_line(err)
    assert "is not restored" in line and "no backup holds them" in line, line
    assert f"{site_packages(tgt) / 'pkg'}, a link to {theirs}" in line, line
    assert "restored" not in err.replace("not restored", ""), err
    held += 1

    # 2. a package folder that became a link after the apply (a view made again): the
    # record's paths now lead out, and the rollback refuses them, naming the link
    tgt2 = venv(tmp_path / "tgt2", wheels)
    inv2, _ = applied(tgt2, wheels["index"], tmp_path)
    link(site_packages(tgt2) / "pkg", theirs)
    before = env_listing(tgt2), env_listing(other)
    code, err = cli(inv2, "rollback", "tgt")
    assert code == 4, err
    line = last_line(err)
    assert f"{site_packages(tgt2) / 'pkg'}, a link to {theirs}" in line, line
    assert "nothing was changed" in line, line
    assert (env_listing(tgt2), env_listing(other)) == before
    held += 1

    # 3. a file that does not end as the record says (written under the restore: here by
    # an audit hook of the target's own interpreter, as the restore's rename runs)
    tgt3 = venv(tmp_path / "tgt3", wheels)
    (site_packages(tgt3) / "tamper.pth").write_text(
        "import os, sys; os.environ.get('TAMPER_RESTORE') and sys.addaudithook("
        "lambda e, a: e == 'os.rename' and str(a[1]).endswith('/pkg/mod.py') "
        "and open(a[0], 'w').write('X = 3\\n'))\n"
    )
    pristine = env_listing(tgt3)
    inv3, _ = applied(tgt3, wheels["index"], tmp_path)
    monkeypatch.setenv("TAMPER_RESTORE", "1")
    code, err = cli(inv3, "rollback", "tgt")
    assert code == 4, err  # it said "restored", with X = 3 in pkg/mod.py
    line = last_line(err)
    assert "is not restored: 1 path(s) are not as the backup recorded them" in line, line
    assert "pkg/mod.py" in line and "--force" in line, line
    monkeypatch.delenv("TAMPER_RESTORE")
    code, err = cli(inv3, "rollback", "tgt", "--force")  # what the line says, done
    assert code == 0, err
    assert_same(tgt3, pristine)
    held += 1
    round_four(CHECKED, held)
