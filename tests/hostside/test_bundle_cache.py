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

from envsync.hostside import protocol
from envsync.hostside.boot import PACKAGE
from envsync.runner import bundle as shipping
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


def planted_bytecode(tmp_path: Path, mark: Path) -> Path:
    """A bytecode file by time for the copy's __init__, of other code, stamped with the
    source's own time and size: Python runs it in place of the source."""
    import importlib.util
    import marshal

    init = copy() / PACKAGE / "__init__.py"
    st = init.stat()
    code = compile(f"open({str(mark)!r}, 'w').close()\n", str(init), "exec")
    head = importlib.util.MAGIC_NUMBER + (0).to_bytes(4, "little")
    head += (int(st.st_mtime) & 0xFFFFFFFF).to_bytes(4, "little")
    head += (st.st_size & 0xFFFFFFFF).to_bytes(4, "little")
    pyc = Path(importlib.util.cache_from_source(str(init)))
    pyc.write_bytes(head + marshal.dumps(code))
    return pyc


@pytest.mark.parametrize("umask", [0o022, 0o000], ids=["umask 022", "umask 000"])
def test_planted_bytecode_never_runs_and_the_copy_is_rewritten(tmp_path: Path, umask: int) -> None:
    """A `.pyc` in `__pycache__` whose stamp matches its source's is imported in place of
    the source: it is refused, whatever the umask it was planted under."""
    assert answered(boot(tmp_path, umask=umask))
    mark = tmp_path / "planted-code-ran"
    old = os.umask(umask)
    try:
        pyc = planted_bytecode(tmp_path, mark)
    finally:
        os.umask(old)
    out = boot(tmp_path, umask=umask)
    assert answered(out), out.stderr
    assert not mark.exists()
    assert len(notes(out)) == 1 and "rewritten" in notes(out)[0], notes(out)
    assert pyc.read_bytes()[4:8] == (0b11).to_bytes(4, "little")  # compiled again, by hash
    again = boot(tmp_path, umask=umask)
    assert answered(again) and notes(again) == [] and not mark.exists()
    held(ITEM)


@pytest.mark.parametrize("umask", [0o022, 0o000], ids=["umask 022", "umask 000"])
@pytest.mark.parametrize("planted", ["so", "py beside the package", "pyc of no source", "data"])
def test_any_file_the_bundle_does_not_hold_is_refused(
    tmp_path: Path, umask: int, planted: str
) -> None:
    """An extension module beside a module (Python imports it in place of the source), a
    module beside the package (sys.path names the copy while it is imported), bytecode of
    no source, any other file: the copy is rewritten, with one note, and runs."""
    import importlib.machinery

    assert answered(boot(tmp_path, umask=umask))
    package = copy() / PACKAGE
    path = {
        "so": package / ("__init__" + importlib.machinery.EXTENSION_SUFFIXES[0]),
        "py beside the package": copy() / "extra.py",
        "pyc of no source": package / "__pycache__" / f"evil.{sys.implementation.cache_tag}.pyc",
        "data": package / "agent" / "notes.txt",
    }[planted]
    old = os.umask(umask)
    try:
        path.write_bytes(b"\x7fELF not a library")
    finally:
        os.umask(old)
    out = boot(tmp_path, umask=umask)
    assert answered(out), out.stderr  # a planted __init__.so would fail the import
    assert not path.exists()
    assert len(notes(out)) == 1 and "rewritten" in notes(out)[0], notes(out)
    assert notes(boot(tmp_path, umask=umask)) == []
    held(ITEM)


def test_bytecode_being_written_by_another_run_is_not_a_damaged_copy(tmp_path: Path) -> None:
    """Another first run compiles the copy while this one starts: py_compile's temporary
    file in `__pycache__` (never imported) is no reason to move the copy away, which broke
    the other run's imports (`No module named 'envsync_host.agent'`)."""
    assert answered(boot(tmp_path))
    tag = sys.implementation.cache_tag
    temporary = copy() / PACKAGE / "agent" / "__pycache__" / f"__init__.{tag}.pyc.140234511"
    temporary.write_bytes(b"half a bytecode file")
    temporary.chmod(0o600)
    out = boot(tmp_path)
    assert answered(out), out.stderr
    assert notes(out) == [] and temporary.exists()


def test_a_file_others_may_write_is_refused(tmp_path: Path) -> None:
    assert answered(boot(tmp_path))
    module = copy() / PACKAGE / "protocol.py"
    module.chmod(0o666)
    out = boot(tmp_path)
    assert answered(out), out.stderr
    assert len(notes(out)) == 1 and "rewritten" in notes(out)[0]
    assert not stat.S_IMODE(module.stat().st_mode) & 0o077
    held(ITEM)
