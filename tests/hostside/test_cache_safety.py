"""The caches another user can touch: a cache folder that is not this user's alone is not
used at all; a link planted at a temporary file's name is never written through; every
folder a cache makes is 0700 whatever the umask."""

from __future__ import annotations

import json
import os
import pwd
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from envsync.collect import wire
from envsync.hostside import protocol
from envsync.hostside.caches.store import write_file
from envsync.hostside.shared import temp_name
from envsync.runner.bundle import host_argv, host_input
from tests.figures import round_four


@pytest.mark.parametrize("how", ["writable by others", "another user's"])
def test_a_cache_folder_not_this_users_alone_is_not_used(tmp_path: Path, how: str) -> None:
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    if how == "writable by others":
        cache.chmod(0o777)
    else:
        if os.geteuid() != 0:
            pytest.skip("giving a folder to another user needs root")
        nobody = pwd.getpwnam("nobody")
        os.chown(cache, nobody.pw_uid, nobody.pw_gid)
    options = {"roots": ["envsync.model.vocab"], "internal": ["envsync"]}
    done = subprocess.run(
        host_argv(sys.executable, protocol.COLLECT, [json.dumps(options)], cache_dir=str(cache)),
        input=host_input(),
        capture_output=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()[-1000:]
    assert list(cache.iterdir()) == []  # nothing read there, nothing written
    err = done.stderr.decode()
    assert f"envsync: {cache} is not this user's, or others may write to it" in err
    assert "no cache is used" in err and err.count("\n") == 1
    round_four("1 a cache folder not private: unused")


def test_a_link_at_a_temporary_name_is_never_written_through(tmp_path: Path) -> None:
    victim = tmp_path / "root-only"
    victim.write_bytes(b"precious")
    path = tmp_path / "cache" / "facts" / "entry.json"
    path.parent.mkdir(parents=True)
    link = Path(temp_name(str(path)))
    link.symlink_to(victim)
    assert write_file(str(path), b"new entry") is False
    assert victim.read_bytes() == b"precious" and link.is_symlink() and not path.exists()
    # envsync's own received/ too (its temporary name carries the thread)
    target = wire.folder() / "chunk-y.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    planted = Path(temp_name(f"{target}.{threading.get_ident()}"))
    planted.symlink_to(victim)
    with pytest.raises(FileExistsError):
        wire.write(target, b"chunk")
    assert victim.read_bytes() == b"precious" and planted.is_symlink()
    round_four("1 links at temporary names", 2)


def test_every_folder_a_cache_makes_is_private_whatever_the_umask(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        path = tmp_path / "a" / "b" / "c" / "entry.json"
        assert write_file(str(path), b"x")
        received = Path(os.environ["HOME"]) / ".cache" / "envsync" / "received"
        wire.write(received / "known-z", b"{}")
    finally:
        os.umask(old)
    for folder in (
        tmp_path / "a",
        tmp_path / "a" / "b",
        tmp_path / "a" / "b" / "c",
        received.parent,
        received,
    ):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700, folder
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    round_four("1 folders made 0700 under umask 000", 5)


def test_the_user_hears_once_that_a_hosts_cache_folder_was_not_used(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The host side's note reaches the user (stderr, once, with the fix), where it used to
    stay on the probe's stderr, which envsync reads only when the probe fails."""
    from tests.helpers import run_cli

    home = tmp_path / "host-home"
    cache = home / "envsync"
    cache.mkdir(parents=True)
    cache.chmod(0o777)
    inventory = tmp_path / "envsync.toml"
    inventory.write_text(
        f'[hosts.h]\npython = "{sys.executable}"\nexec = ["env", "XDG_CACHE_HOME={home}"]\n'
    )
    code, out, err = run_cli(capsys, "snapshot", "--inventory", str(inventory), "h")
    assert code == 0 and json.loads(out)["host"] == "h"
    line = f"h: {cache} is not this user's, or others may write to it: no cache is used"
    assert err.count(line) == 1 and "make it this user's and 0700" in err, err
    assert list(cache.iterdir()) == []
    round_four("1 an unsafe host cache said to the user")


@pytest.mark.parametrize("how", ["writable by others", "received/ a link"])
def test_envsyncs_own_cache_folder_is_used_only_if_safe(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], how: str
) -> None:
    """envsync's side as the host's: a cache folder others may write to, or a received/
    that is a link (to a folder root owns), is neither read nor written for the run."""
    from tests.helpers import run_cli

    root = wire.place().parent
    root.mkdir(parents=True)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    if how == "writable by others":
        root.chmod(0o777)
    else:
        (root / "received").symlink_to(elsewhere)
    before = sorted(root.rglob("*"))
    host_home = tmp_path / "host-home"  # the host's own cache: a private one
    inventory = tmp_path / "envsync.toml"
    inventory.write_text(
        f'[hosts.h]\npython = "{sys.executable}"\nexec = ["env", "XDG_CACHE_HOME={host_home}"]\n'
        "[service]\ncommand = ['{python}', '-m', 'envsync.model.vocab']\n"
    )
    code, out, err = run_cli(capsys, "snapshot", "--inventory", str(inventory), "h")
    assert code == 0 and json.loads(out)["host"] == "h", err
    note = f"envsync: {root} is not this user's, or others may write to it: no cache is used"
    assert err.count(note) == 1 and "make it this user's and 0700" in err, err
    assert sorted(root.rglob("*")) == before and list(elsewhere.iterdir()) == []
    assert any((host_home / "envsync").iterdir())  # the host's own cache was used
    round_four("1 envsync's own cache folder not private: unused, said once")


def test_a_key_in_a_folder_others_may_write_seals_nothing(tmp_path: Path) -> None:
    """Another user who may write envsync's state folder could put their own key there
    and seal what they forge: then there is no key, and nothing is kept sealed."""
    from envsync import seal

    folder = seal.secret_path().parent
    assert seal.secret() is not None  # made 0700
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    folder.chmod(0o777)
    assert seal.secret() is None
    round_four("1 a key others could replace: none used")
