"""One change per environment, whoever runs it: real envsync processes on one target venv
from two HOMEs, as two users, and through a container's bind mount of it.

The lock is a file inside the environment, held with flock: each second command exits 6 at
once naming the first; the backups are found by every caller of the environment, so that
one's rollback of its own apply leaves the other's pins in place.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.container import Container
from tests.figures import add
from tests.helpers import REPO, make_venv, pip_install
from tests.repair.conftest import (
    envsync,
    inventory,
    lock_files,
    versions,
    wait_held,
)

pytestmark = pytest.mark.slow
SLOW_APPLY = ("-q", "repair", "--prefer", "fix", "--apply", "--no-deploy")


def excluded(case: str) -> None:
    add("one change per environment (real lock)", case)


def refused_at_once(proc: subprocess.Popen[str], holder: int) -> str:
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 6, err
    line = err.strip().splitlines()[-1]
    assert line.startswith("envsync: tgt: locked by another envsync: pid "), line
    assert f"pid {holder} " in line or "pid ?" in line, line
    return line


def backup_ids(inv: Path, home: Path | None = None, host: str = "tgt") -> list[str]:
    proc = envsync(inv, "rollback", host, "--list", home=home)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    return [row[2:].split()[0] for row in out.strip().splitlines()[1:]]


def test_two_homes_exclude_each_other_and_find_the_same_backups(
    bed: dict[str, Path], target: Path, tmp_path: Path
) -> None:
    inv = inventory(bed, target, tmp_path / "inv.toml")
    home_a, home_b = tmp_path / "home-a", tmp_path / "home-b"
    home_a.mkdir()
    home_b.mkdir()
    a_req, b_req = tmp_path / "a.txt", tmp_path / "b.txt"
    a_req.write_text("soundfile==0.13.1\n")
    b_req.write_text("xgrammar==0.1.32\n")
    first = envsync(
        inv, "-q", "repair", str(a_req), "tgt", "--prefer", "fix", "--apply", home=home_a
    )
    holder = wait_held()
    second = envsync(
        inv, "-q", "repair", str(b_req), "tgt", "--prefer", "fix", "--apply", home=home_b
    )
    refused_at_once(second, holder["who"]["pid"])
    _, err = first.communicate(timeout=300)
    assert first.returncode == 0, err
    excluded("two HOMEs")
    # B's apply after A's; each HOME sees both backups
    b = envsync(inv, "-q", "repair", str(b_req), "tgt", "--prefer", "fix", "--apply", home=home_b)
    _, err = b.communicate(timeout=300)
    assert b.returncode == 0, err
    ids_a, ids_b = backup_ids(inv, home_a), backup_ids(inv, home_b)
    assert ids_a == ids_b and len(ids_a) == 2
    _, oldest_a = ids_a  # newest first: B, then A
    # A undoes its own apply: B's pin stays, A's is gone
    proc = envsync(inv, "-q", "rollback", "tgt", "--backup", oldest_a, home=home_a)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    assert "soundfile" not in versions(target) and versions(target)["xgrammar"] == "0.1.32"
    assert lock_files() == []
    excluded("A's rollback leaves B's pins")


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A folder that another user may enter (pytest's own is root's alone)."""
    path = Path(tempfile.mkdtemp(prefix="envsync-shared-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_two_users_exclude_each_other(
    bed: dict[str, Path], shared_dir: Path, tmp_path: Path
) -> None:
    setpriv = shutil.which("setpriv")
    if os.geteuid() != 0 or setpriv is None:
        pytest.skip("a second user needs root and setpriv")
    python = make_venv(shared_dir / "venv", with_pip=True)
    pip_install(python, bed["svc"], bed["old"], bed["local"])
    python.parent.parent.chmod(0o777)  # both users may change this environment
    inv = inventory(bed, python, shared_dir / "inv.toml")
    inv.chmod(0o644)
    home = shared_dir / "nobody"
    home.mkdir()
    os.chown(home, 65534, 65534)
    first = envsync(inv, *SLOW_APPLY)
    holder = wait_held()
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENVSYNC_")}
    env["HOME"] = str(home)
    second = subprocess.Popen(
        [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, "-m", "envsync",
         "--inventory", str(inv), *SLOW_APPLY],
        env=env, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    refused_at_once(second, holder["who"]["pid"])
    _, err = first.communicate(timeout=300)
    assert first.returncode == 0, err
    assert versions(python)["xgrammar"] == "0.1.32"
    excluded("two users")


def test_a_container_view_of_the_venv_is_the_same_environment(
    bed: dict[str, Path],
    target: Path,
    tmp_path: Path,
    containers: Callable[..., Container],
) -> None:
    """The venv bound at /opt/venv inside a container (bubblewrap: its own mount and PID
    namespaces): the apply outside holds its lock, the one inside is refused; the rollback
    from inside undoes the apply made outside, whose record names the same paths."""
    from tests.repair.conftest import env_hash

    ct = containers(target.parent.parent, mounts={"/opt/wheels": bed["wheels"]})
    inv = inventory(bed, target, tmp_path / "inv.toml")
    text = inv.read_text()
    inside = (
        text[text.index("[hosts.tgt]") :]
        .replace("[hosts.tgt]", "[hosts.inside]")
        .replace(
            f'python = "{target}"',
            f'python = "/opt/venv/bin/python"\nexec = {json.dumps(ct.exec_prefix)}',
        )
        .replace(str(bed["wheels"]), "/opt/wheels")
    )
    inv.write_text(text + inside)
    before = env_hash(target)
    outside = envsync(inv, *SLOW_APPLY)
    holder = wait_held()
    second = envsync(
        inv, "-q", "repair", "ref", "inside", "--prefer", "fix", "--apply", "--no-deploy"
    )
    _, err = second.communicate(timeout=120)
    assert second.returncode == 6, err
    assert "inside: locked by another envsync: pid " in err
    assert f"pid {holder['who']['pid']} " in err
    _, err = outside.communicate(timeout=300)
    assert outside.returncode == 0, err
    excluded("a container's bind mount of the venv")
    assert backup_ids(inv, host="inside") == backup_ids(inv)
    proc = envsync(inv, "-q", "rollback", "inside")
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    assert env_hash(target) == before
    excluded("rollback inside undoes the apply made outside")
