"""The conventions the probe, the agent and envsync share cannot drift: each is one rule.

A leftover of a killed write (`NAME.envsync-PID.tmp`, as the agent names them) is never a
finding; URL credentials are stripped by one function, `@` in a password included.
"""

from __future__ import annotations

import io
import json
from dataclasses import replace
from pathlib import Path

import pytest

from envsync.collect import ProbeOptions, collect
from envsync.hostside import shared
from envsync.hostside.agent import restore, transfer
from envsync.hostside.facts.git import git_remote
from envsync.model.changes import differences
from envsync.model.environment import Distribution, Snapshot
from envsync.runner.local import LocalRunner
from envsync.sources.inventory import HostSpec
from envsync.sources.locks.index import redact as index_redact
from tests.helpers import make_venv, make_wheel, pip_install, site_packages
from tests.model.test_diff import base

LEFTOVER = "sglang/srt/server_args.py.envsync-4242.tmp"
PKG = {"svc/__init__.py": "", "svc/server_args.py": "PORT = 1\n"}


@pytest.mark.parametrize(
    ("name", "temporary"),
    [
        ("server_args.py.envsync-4242.tmp", True),
        ("server_args.py.envsync-tmp", True),  # the shape of older envsync versions
        ("server_args.py", False),
        ("server_args.py.tmp", False),
        ("envsync-4242.tmp.py", False),
    ],
)
def test_one_rule_names_temporary_files_and_recognises_them(name: str, temporary: bool) -> None:
    assert shared.is_temp_name(name) is temporary
    assert shared.package_file(f"sglang/srt/{name}") is not temporary
    made = Path(shared.temp_name("/srv/pkg/mod.py")).name
    assert shared.is_temp_name(made) and made.startswith("mod.py.envsync-")


def test_the_leftover_of_a_killed_write_is_not_a_file_of_the_package() -> None:
    assert not shared.package_file(LEFTOVER)


def test_the_agent_writes_through_and_sweeps_the_same_names(tmp_path: Path) -> None:
    target = tmp_path / "mod.py"
    killed = Path(shared.temp_name(str(target)))
    killed.write_text("half a write")  # what a killed `put` of this process leaves
    other = tmp_path / "mod.py.envsync-4242.tmp"
    other.write_text("half a write of another run")
    transfer.put(str(target), io.BytesIO(b"X = 2\n"), 0o644)
    assert target.read_bytes() == b"X = 2\n" and not killed.exists()
    restore.sweep_leftovers(str(tmp_path))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mod.py"]


def dist_with(files: dict[str, str]) -> Distribution:
    return Distribution(
        name="sglang", display_name="sglang", version="0.5.11", location="/sp", files=files
    )


def test_a_leftover_in_a_snapshot_is_no_difference() -> None:
    """A snapshot taken by an older probe may list one: diff still ignores it."""
    clean = {"sglang/srt/server_args.py": "1" * 64}
    a = replace(base(), distributions=(dist_with(clean),))
    b = replace(base(), distributions=(dist_with({**clean, LEFTOVER: "2" * 64}),))
    assert differences(a, b) == []


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("drift")
    python = make_venv(root / "venv")
    pip_install(python, make_wheel(root / "wheels", "svc", "1.0", PKG))
    return python


def snapshot(python: Path) -> Snapshot:
    spec = HostSpec(name="t", python=str(python), watch=("svc",))
    return collect(spec, LocalRunner("t"), ProbeOptions(cache_dir=""))


def test_the_probe_never_reports_a_leftover_of_a_killed_write(venv: Path) -> None:
    before = snapshot(venv)
    leftover = site_packages(venv) / "svc" / "server_args.py.envsync-4242.tmp"
    leftover.write_text("PORT = 2\n")
    stray = site_packages(venv) / "svc" / "stray.py"
    stray.write_text("X = 1\n")  # a file RECORD does not know: that one is reported
    try:
        after = snapshot(venv)
    finally:
        leftover.unlink()
        stray.unlink()
    dist = after.distribution("svc")
    assert dist is not None and dist.files is not None
    assert dist.added == ("svc/stray.py",)
    assert "svc/server_args.py.envsync-4242.tmp" not in dist.files
    assert [d.subject for d in differences(before, after)] == ["svc/stray.py"]


@pytest.mark.parametrize(
    ("url", "stripped", "shown"),
    [
        # a password holding `@`: all of the user info goes, not up to its first `@`
        (
            "https://bob:pa@ssW0rd@index.example/simple",
            "https://index.example/simple",
            "https://<redacted>@index.example/simple",
        ),
        ("https://user:tok@git.example/org/x.git", "https://git.example/org/x.git", None),
        ("https://tok@git.example/x", "https://git.example/x", None),
        ("https://u:p@w@host:8443", "https://host:8443", "https://<redacted>@host:8443"),
        ("ssh://git@git.example/org/x.git", "ssh://git.example/org/x.git", None),
        # scp-like remotes have no scheme: kept as they are
        ("git@git.example:org/x.git", "git@git.example:org/x.git", "git@git.example:org/x.git"),
        ("/srv/git/x.git", "/srv/git/x.git", "/srv/git/x.git"),
        ("https://host/path@v1?q=a@b#c@d", "https://host/path@v1?q=a@b#c@d", None),
        (
            "PIP_INDEX_URL=https://a:b@c@one/ extra https://x:y@two/",
            "PIP_INDEX_URL=https://one/ extra https://two/",
            "PIP_INDEX_URL=https://<redacted>@one/ extra https://<redacted>@two/",
        ),
    ],
)
def test_one_credential_stripper(url: str, stripped: str, shown: str | None) -> None:
    assert shared.strip_credentials(url) == stripped
    assert index_redact(url) == stripped  # an index URL as a lock names it
    if shown is not None:
        assert shared.redact_url(url) == shown  # as facts and logs show it
        assert "ssW0rd" not in shared.redact_text(url)


def test_a_git_remote_loses_a_password_that_holds_an_at_sign(tmp_path: Path) -> None:
    (tmp_path / "config").write_text(
        '[core]\n\tbare = false\n[remote "origin"]\n'
        "\turl = https://bob:pa@ssW0rd@git.example/org/sglang.git\n"
    )
    assert git_remote(str(tmp_path)) == "https://git.example/org/sglang.git"


def test_envsync_and_the_host_side_redact_with_the_same_rules() -> None:
    from envsync import redact

    line = "--api-key hf_" + "a" * 20 + " https://bob:pa@ssW0rd@index/"
    assert redact.text(line) == shared.redact_text(line)
    assert "ssW0rd" not in redact.text(line) and "hf_" not in redact.text(line)
    assert json.dumps(shared.redact_data({"url": "https://t:x@y@h/"})) == (
        '{"url": "https://<redacted>@h/"}'
    )
