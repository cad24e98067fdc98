"""`history HOST`: what changed between recorded states, when each package arrived (from
the distribution's own RECORD and INSTALLER), as a table and as JSON."""

from __future__ import annotations

import calendar
import json
import os
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from envsync.errors import InventoryError, StateError
from envsync.hostside.facts.dists import read_distribution
from envsync.model.environment import GpuInfo, Snapshot, Torch
from envsync.report.history import render
from envsync.runner import Runners
from envsync.sources.history import Change, arrivals, change_text, changes, history, since_notes
from envsync.sources.inventory import HostSpec, Inventory
from envsync.sources.session import Session
from envsync.sources.snapshot import load_snapshot
from envsync.sources.states import StateStore, record
from tests.helpers import run_cli

SNAPSHOT = Path(__file__).resolve().parent.parent / "data" / "snapshots" / "ct129.json"
T0 = datetime(2026, 12, 1, 10, 2, 3, tzinfo=timezone.utc)


def base() -> Snapshot:
    return load_snapshot(SNAPSHOT)


def edit(snap: Snapshot, name: str, **fields: Any) -> Snapshot:
    dists = tuple(replace(d, **fields) if d.name == name else d for d in snap.distributions)
    return replace(snap, distributions=dists)


def test_what_changed_between_two_states() -> None:
    old = base()
    new = edit(
        old, "xgrammar", version="0.1.10", installed_at="2026-12-01T10:05:12Z", installer="uv"
    )
    soundfile = old.distribution("soundfile")
    assert soundfile is not None
    new = replace(
        new,
        distributions=(
            *(d for d in new.distributions if d.name != "soundfile"),
            replace(
                soundfile,
                name="six",
                display_name="six",
                version="1.17.0",
                installed_at="2026-12-01T10:06:00Z",
            ),
        ),
        torch=replace(old.torch, cuda="12.8") if isinstance(old.torch, Torch) else old.torch,
        gpu=replace(old.gpu, driver_version="570.10") if isinstance(old.gpu, GpuInfo) else old.gpu,
    )
    sglang = old.distribution("sglang")
    assert sglang is not None and sglang.files
    path = next(iter(sglang.files))
    new = edit(new, "sglang", files={**sglang.files, path: "f" * 64})
    got = {c.subject: c for c in changes(old, new)}
    assert got["xgrammar"] == Change(
        kind="version",
        subject="xgrammar",
        before="0.1.32",
        after="0.1.10",
        package="xgrammar",
        installed_at="2026-12-01T10:05:12Z",
        installer="uv",
    )
    assert (got["soundfile"].kind, got["soundfile"].before, got["soundfile"].installed_at) == (
        "missing",
        "0.13.1",
        None,
    )
    assert (got["six"].kind, got["six"].after, got["six"].installed_at) == (
        "extra",
        "1.17.0",
        "2026-12-01T10:06:00Z",
    )
    assert got["torch cuda"].before == "13.0" and got["torch cuda"].after == "12.8"
    assert got["gpu driver"].after == "570.10"
    assert got[path].kind == "file" and got[path].package == "sglang"
    assert (
        change_text(got["xgrammar"])
        == "xgrammar 0.1.32 → 0.1.10 (installed 2026-12-01T10:05:12Z by uv)"
    )
    assert change_text(got["soundfile"]) == "soundfile 0.13.1 removed"
    assert change_text(got["six"]).startswith("six 1.17.0 added (installed 2026-12-01T10:06:00Z")
    assert change_text(got[path]).endswith(" → ffffffffff…")
    assert changes(old, replace(old, collected_at="2030-01-01T00:00:00Z")) == ()


def test_packages_by_install_time_latest_first() -> None:
    snap = edit(base(), "soundfile", installed_at=None)
    assert [(a.name, a.installed_at) for a in arrivals(snap)] == [
        ("xgrammar", "2026-11-27T16:03:12Z"),
        ("sglang", "2026-11-20T09:12:44Z"),
        ("torch", "2026-11-20T09:12:40Z"),
        ("soundfile", None),
    ]


def test_a_report_against_a_state_says_what_arrived_since() -> None:
    ref = replace(base(), host="ct129@good", source="state")
    new = edit(base(), "xgrammar", version="0.1.10", installed_at="2026-12-01T10:05:12Z")
    assert since_notes(ref, new) == (
        "since ct129@good (collected 2026-11-28T21:14:03Z): xgrammar 0.1.32 → 0.1.10 "
        "(installed 2026-12-01T10:05:12Z by pip)",
    )


def test_the_probe_reads_when_and_by_what_a_package_was_installed(tmp_path: Path) -> None:
    info = tmp_path / "demo-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: demo\nVersion: 1.0\n\n")
    (info / "INSTALLER").write_text("uv\n")
    dist, _ = read_distribution(str(tmp_path), info.name)
    assert dist["installer"] == "uv"
    meta_time = calendar.timegm((2026, 11, 2, 8, 0, 0))
    os.utime(info / "METADATA", (meta_time, meta_time))
    dist, _ = read_distribution(str(tmp_path), info.name)  # no RECORD: the METADATA's time
    assert dist["installed_at"] == "2026-11-02T08:00:00Z"
    (info / "RECORD").write_text("demo/__init__.py,,\n")
    os.utime(info / "RECORD", (meta_time + 3600, meta_time + 3600))
    dist, _ = read_distribution(str(tmp_path), info.name)
    assert dist["installed_at"] == "2026-11-02T09:00:00Z"
    egg = tmp_path / "old.egg-info"
    egg.write_text("Metadata-Version: 1.0\nName: old\nVersion: 2\n\n")
    os.utime(egg, (meta_time, meta_time))
    dist, _ = read_distribution(str(tmp_path), egg.name)
    assert dist["installed_at"] == "2026-11-02T08:00:00Z"


def _session(tmp_path: Path) -> Session:
    spec = HostSpec(name="ct129", python="/usr/bin/python3")
    return Session(
        inventory=Inventory(path=None, hosts={"ct129": spec}),
        runners=Runners(),
        states=StateStore(root=tmp_path / "states").bound([spec]),
    )


def _three_states(tmp_path: Path) -> Session:
    session = _session(tmp_path)
    assert session.states is not None
    record(session.states, base(), "lock", now=T0)
    drifted = edit(base(), "xgrammar", version="0.1.10", installed_at="2026-12-01T10:05:12Z")
    record(session.states, drifted, "watch", now=T0 + timedelta(minutes=5))
    back = edit(base(), "xgrammar", installed_at="2026-12-01T10:08:51Z")
    record(session.states, back, "ready", now=T0 + timedelta(minutes=9))
    return session


def test_history_lists_the_states_newest_first_with_their_changes(tmp_path: Path) -> None:
    done = history(_three_states(tmp_path), "ct129")
    assert [(e.ref, e.why, e.good, e.first) for e in done.entries] == [
        ("ct129@latest", "ready", True, False),
        ("ct129@-1", "watch", False, False),
        ("ct129@-2", "lock", True, True),
    ]
    assert [change_text(c) for c in done.entries[0].changes] == [
        "xgrammar 0.1.10 → 0.1.32 (installed 2026-12-01T10:08:51Z by pip)"
    ]
    assert [change_text(c) for c in done.entries[1].changes] == [
        "xgrammar 0.1.32 → 0.1.10 (installed 2026-12-01T10:05:12Z by pip)"
    ]
    assert (
        done.packages[0].name == "xgrammar"
        and done.packages[0].installed_at == "2026-12-01T10:08:51Z"
    )
    text = render(done, "table")
    assert text.startswith(f"ct129: 3 recorded state(s) in {done.folder}, newest first")
    assert "ct129@latest  2026-12-01T10:11:03Z  ready  good" in text  # when each was recorded
    assert "ct129@-1      2026-12-01T10:07:03Z  watch" in text
    assert "    xgrammar 0.1.32 → 0.1.10 (installed 2026-12-01T10:05:12Z by pip)" in text
    assert "    the first recorded state" in text
    assert "  2026-12-01T10:08:51Z  pip  xgrammar 0.1.32" in text
    data = json.loads(render(done, "json"))
    assert data["schema_version"] == 1 and data["host"] == "ct129"
    assert [e["ref"] for e in data["entries"]] == ["ct129@latest", "ct129@-1", "ct129@-2"]
    assert data["entries"][1]["changes"][0]["installed_at"] == "2026-12-01T10:05:12Z"
    assert data["packages"][0] == {
        "name": "xgrammar",
        "version": "0.1.32",
        "installed_at": "2026-12-01T10:08:51Z",
        "installer": "pip",
    }


def test_history_errors_are_one_line(tmp_path: Path) -> None:
    session = _session(tmp_path)
    with pytest.raises(StateError, match=r"ct129: no state is recorded in .*Tip: a ready"):
        history(session, "ct129")
    with pytest.raises(InventoryError, match="unknown host 'nope'"):
        history(session, "nope")


def test_history_of_a_host_no_longer_in_the_inventory(tmp_path: Path) -> None:
    session = _three_states(tmp_path)
    gone = replace(session, inventory=Inventory(path=None, hosts={}))
    assert len(history(gone, "ct129").entries) == 3


def test_the_history_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _three_states(tmp_path)
    inv = tmp_path / "envsync.toml"
    inv.write_text('[hosts.ct129]\npython = "/usr/bin/python3"\n')
    states = str(tmp_path / "states")
    code, out, err = run_cli(
        capsys, "--inventory", str(inv), "history", "ct129", "--state-dir", states, "--no-live"
    )
    assert code == 0 and "ct129@-2" in out and not err
    assert out.splitlines()[2].startswith("ct129@latest")  # the records alone: no "now"
    out_file = tmp_path / "h.json"
    code, out, _ = run_cli(
        capsys,
        "--inventory",
        str(inv),
        "history",
        "ct129",
        "--state-dir",
        states,
        "--format",
        "json",
        "-o",
        str(out_file),
        "--no-live",
    )
    assert code == 0 and not out and json.loads(out_file.read_text())["schema_version"] == 1
    (next((tmp_path / "states").glob("ct129~*/*-watch-*.json"))).write_text("{")
    code, out, err = run_cli(
        capsys, "--inventory", str(inv), "history", "ct129", "--state-dir", states, "--no-live"
    )
    assert code == 2 and not out
    assert err.count("\n") == 1 and "a damaged" not in err and "not valid JSON" in err
    code, _, err = run_cli(
        capsys, "--inventory", str(inv), "history", "ct200", "--state-dir", states
    )
    assert code == 2 and "unknown host 'ct200'" in err


def test_history_shows_the_host_as_it_is_now_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A package changed by hand after the last recorded state: `history HOST` collects the
    host and shows it first ("now"), with the change, its install time and installer; the
    packages listed are the host's as it is, not as recorded. --no-live: the records."""
    from tests.helpers import make_venv, make_wheel, pip_install

    python = make_venv(tmp_path / "venv")
    pip_install(
        python, make_wheel(tmp_path / "w", "xgrammar", "0.1.32", {"xgrammar/__init__.py": ""})
    )
    inv = tmp_path / "envsync.toml"
    inv.write_text(f'[hosts.ct200]\npython = "{python}"\n')
    states = str(tmp_path / "states")
    code, _, _ = run_cli(
        capsys, "--inventory", str(inv), "-q", "lock", "ct200", "--state-dir", states
    )
    assert code == 0
    pip_install(
        python, make_wheel(tmp_path / "w", "xgrammar", "0.1.10", {"xgrammar/__init__.py": ""})
    )

    code, out, _ = run_cli(
        capsys,
        "--inventory",
        str(inv),
        "-q",
        "history",
        "ct200",
        "--state-dir",
        states,
        "--format",
        "json",
    )
    assert code == 0
    data = json.loads(out)
    now, latest = data["entries"][:2]
    assert (now["ref"], now["why"], now["file"]) == ("ct200", "now", None)
    assert latest["ref"] == "ct200@latest" and latest["why"] == "lock"
    (change,) = [c for c in now["changes"] if c["subject"] == "xgrammar"]
    assert (change["before"], change["after"], change["installer"]) == ("0.1.32", "0.1.10", "pip")
    assert change["installed_at"]
    assert {"name": "xgrammar", "version": "0.1.10"}.items() <= next(
        p for p in data["packages"] if p["name"] == "xgrammar"
    ).items()
    code, out, _ = run_cli(
        capsys, "--inventory", str(inv), "-q", "history", "ct200", "--state-dir", states
    )
    assert code == 0
    lines = out.splitlines()
    assert lines[2].startswith("ct200 ") and " now" in lines[2]
    assert "    xgrammar 0.1.32 → 0.1.10 (installed " in out and " by pip)" in out
    code, out, _ = run_cli(
        capsys,
        "--inventory",
        str(inv),
        "-q",
        "history",
        "ct200",
        "--state-dir",
        states,
        "--no-live",
        "--format",
        "json",
    )
    recorded = json.loads(out)
    assert [e["ref"] for e in recorded["entries"]] == ["ct200@latest"]
    assert next(p for p in recorded["packages"] if p["name"] == "xgrammar")["version"] == "0.1.32"
