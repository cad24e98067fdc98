"""Nothing cached runs unchecked: the host's copy of the bundle is private whatever the
umask, checked against its digest before each import, refused when it is another's or
others may write to it, rewritten (one note) when it is damaged, and what killed runs left
in the cache folder is swept. Real interpreters, the command envsync sends to a host."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from envsync import bundle as shipping
from envsync.hostside import protocol
from envsync.hostside.boot import PACKAGE
from tests.figures import held

ITEM = "6/15 host bundle cache checked before it runs"


def boot(cwd: Path, *, umask: int = 0o022) -> subprocess.CompletedProcess[bytes]:
    argv = shipping.host_argv(sys.executable, protocol.COLLECT, ["{}"])
    return subprocess.run(
        argv, input=shipping.host_input(), capture_output=True, cwd=cwd, timeout=120, umask=umask
    )


def answered(out: subprocess.CompletedProcess[bytes]) -> bool:
    first = out.stdout.partition(b"\n")[0]
    return out.returncode == 0 and json.loads(first)["source"] == "probe"


def base() -> Path:
    return Path.home() / ".cache" / "envsync"


def copy() -> Path:
    return base() / f"host-{shipping.bundle().digest}"


def notes(out: subprocess.CompletedProcess[bytes]) -> list[str]:
    return [line for line in out.stderr.decode().splitlines() if line.startswith("envsync: ")]


def plant(tmp_path: Path) -> Path:
    """Code in the copy's __init__ that leaves a mark when it runs."""
    mark = tmp_path / "planted-code-ran"
    init = copy() / PACKAGE / "__init__.py"
    init.write_text(init.read_text() + f"\nopen({str(mark)!r}, 'w').close()\n")
    return mark


def test_the_copy_is_private_whatever_the_umask(tmp_path: Path) -> None:
    out = boot(tmp_path, umask=0)
    assert answered(out), out.stderr
    for path in [base(), *copy().rglob("*"), copy()]:
        mode = stat.S_IMODE(path.lstat().st_mode)
        assert not mode & 0o077, f"{path}: {oct(mode)}"
    held(ITEM)


def test_planted_code_in_the_copy_never_runs_and_the_copy_is_rewritten(tmp_path: Path) -> None:
    assert answered(boot(tmp_path))
    mark = plant(tmp_path)
    out = boot(tmp_path)
    assert answered(out), out.stderr
    assert not mark.exists()
    (line,) = notes(out)
    assert (
        line
        == f"envsync: {copy()} is not the bundle its name says (damaged, or changed): rewritten"
    )
    again = boot(tmp_path)
    assert answered(again) and notes(again) == [] and not mark.exists()
    held(ITEM)


@pytest.mark.parametrize("damage", ["deleted", "extra", "link"])
def test_a_damaged_copy_is_rewritten_with_one_note(tmp_path: Path, damage: str) -> None:
    """A module deleted (every later command failed, exit 3, forever), a module added, a
    module that is a link: each is rewritten from the bundle on stdin, with one note."""
    assert answered(boot(tmp_path))
    package = copy() / PACKAGE
    module = package / "protocol.py"
    if damage == "deleted":
        module.unlink()
    elif damage == "extra":
        (package / "extra.py").write_text("X = 1\n")
    else:
        text = module.read_text()
        module.unlink()
        (tmp_path / "elsewhere.py").write_text(text)
        module.symlink_to(tmp_path / "elsewhere.py")
    out = boot(tmp_path)
    assert answered(out), out.stderr
    assert len(notes(out)) == 1 and "rewritten" in notes(out)[0]
    assert module.is_file() and not module.is_symlink()
    assert not (package / "extra.py").exists()
    assert notes(boot(tmp_path)) == []
    held(ITEM)


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a folder to another user needs root")
@pytest.mark.parametrize("whose", ["copy", "base"])
def test_a_folder_of_another_user_is_never_run_from(tmp_path: Path, whose: str) -> None:
    assert answered(boot(tmp_path))
    mark = plant(tmp_path)
    os.chown(copy() if whose == "copy" else base(), 65534, 65534)
    out = boot(tmp_path)
    assert answered(out), out.stderr  # from memory
    assert not mark.exists()
    assert len(notes(out)) == 1
    held(ITEM)


@pytest.mark.parametrize("where", ["copy", "package", "base"])
def test_a_folder_others_may_write_to_is_never_run_from(tmp_path: Path, where: str) -> None:
    assert answered(boot(tmp_path))
    mark = plant(tmp_path)
    folder = {"copy": copy(), "package": copy() / PACKAGE, "base": base()}[where]
    folder.chmod(0o777)
    out = boot(tmp_path)
    assert answered(out), out.stderr
    assert not mark.exists()
    assert len(notes(out)) == 1
    held(ITEM)


def test_what_killed_runs_left_is_swept(tmp_path: Path) -> None:
    base().mkdir(parents=True, mode=0o700)
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    part = base() / f"host-{shipping.bundle().digest}.{dead}.part"
    (part / PACKAGE).mkdir(parents=True)
    damaged = base() / f"host-0123456789abcdef.{dead}.damaged"
    damaged.mkdir()
    old_tmp = base() / f"verdict-x.json.envsync-{dead}.tmp"
    old_tmp.write_text("{")
    os.utime(old_tmp, (1, 1))
    out = boot(tmp_path)
    assert answered(out), out.stderr
    assert not part.exists() and not damaged.exists() and not old_tmp.exists()
    held("17 temporary files removed and swept")


def test_sweep_temps_removes_what_dead_or_old_writes_left(tmp_path: Path) -> None:
    """hostside.shared.sweep_temps, for every cache folder: a temporary file of a process
    that is gone, or older than an hour, is removed; a live write's and other files stay."""
    from envsync.hostside.shared import sweep_temps

    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    gone = tmp_path / f"graph-1.json.envsync-{dead}.tmp"
    old = tmp_path / "files.json.envsync-tmp"  # an older envsync's name
    live = tmp_path / f"facts.json.envsync-{os.getpid()}.tmp"
    kept = tmp_path / "facts.json"
    for path in (gone, old, live, kept):
        path.write_text("{")
    os.utime(old, (1, 1))
    assert sweep_temps(str(tmp_path)) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([live.name, kept.name])
    assert sweep_temps(str(tmp_path / "absent")) == 0
    held("17 temporary files removed and swept")
