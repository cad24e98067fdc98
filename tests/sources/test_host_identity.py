"""A host's identity: its past is that of the machine that answers at its address (its
probe reads a digest of the machine id), not of its name; a host re-imaged at the same
address, or another container behind the same prefix, starts a history of its own, and
`history` says so; a state folder of the layout before identities (the name alone) is
taken over on first touch, with a note."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from envsync.hostside.facts import machine
from envsync.model.environment import Snapshot, System
from envsync.sources.hostidentity import MIGRATED, address_key, identity, machine_of
from envsync.sources.inventory import HostSpec
from envsync.sources.snapshot import load_snapshot
from envsync.sources.states import StateStore, last_good, record, states_of
from tests.figures import held
from tests.helpers import make_venv, run_cli

SNAPSHOT = Path(__file__).resolve().parent.parent / "data" / "snapshots" / "ct129.json"
T0 = datetime(2026, 12, 1, 10, 2, 3, tzinfo=timezone.utc)
ITEM = "18 a host's past keyed by its identity"
SPEC = HostSpec(name="ct200", python="/opt/venv/bin/python", ssh="root@10.0.0.7")


def on(machine_id: str | None, version: str = "0.1.32") -> Snapshot:
    """The ct200 snapshot as the machine `machine_id` answers it."""
    snap = load_snapshot(SNAPSHOT)
    assert isinstance(snap.system, System)
    dists = tuple(
        replace(d, version=version) if d.name == "xgrammar" else d for d in snap.distributions
    )
    return replace(
        snap,
        host="ct200",
        distributions=dists,
        system=replace(snap.system, machine_id=machine_id),
    )


def test_the_probe_reads_a_digest_of_the_machine_id(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """/etc/machine-id, else D-Bus's; an app-specific digest, never the id itself; None
    where neither can be read (a minimal container), the same on every run."""
    etc, dbus = tmp_path / "machine-id", tmp_path / "dbus-machine-id"
    monkeypatch.setattr(machine, "MACHINE_ID_FILES", (str(etc), str(dbus)))
    assert machine.machine_id() is None
    dbus.write_text("0123456789abcdef0123456789abcdef\n")
    from_dbus = machine.machine_id()
    etc.write_text("fedcba9876543210fedcba9876543210\n")
    from_etc = machine.machine_id()
    assert from_dbus and from_etc and from_dbus != from_etc
    assert from_etc == machine.machine_id()  # stable
    assert "fedcba98" not in from_etc and len(from_etc) == 16
    expected = hmac.new(b"fedcba9876543210fedcba9876543210", b"envsync host identity", "sha256")
    assert from_etc == expected.hexdigest()[:16]
    etc.write_text("")  # empty: the next file
    assert machine.machine_id() == from_dbus
    os.mkfifo(tmp_path / "fifo")  # never waited on
    monkeypatch.setattr(machine, "MACHINE_ID_FILES", (str(tmp_path / "fifo"),))
    assert machine.machine_id() is None
    held(ITEM)


def test_this_machines_probe_says_which_machine_it_is(tmp_path: Path) -> None:
    from envsync.collect import collect
    from envsync.runner.local import LocalRunner

    python = make_venv(tmp_path / "venv")
    snap = collect(HostSpec(name="h", python=str(python)), LocalRunner())
    try:
        raw = Path("/etc/machine-id").read_bytes().strip()
    except OSError:
        raw = b""
    if raw:
        want = hmac.new(raw, b"envsync host identity", hashlib.sha256).hexdigest()[:16]
        assert machine_of(snap) == want
    store = StateStore(root=tmp_path / "states").bound([HostSpec(name="h", python=str(python))])
    recorded = record(store, snap, "lock")
    assert recorded.state.path.parent.name == f"h~{identity(snap_spec(python), machine_of(snap))}"
    held(ITEM)


def snap_spec(python: Path) -> HostSpec:
    return HostSpec(name="h", python=str(python))


def test_another_machine_at_the_same_address_gets_a_history_of_its_own(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """ct200 re-imaged (or another container behind its prefix): the same address and
    interpreter, another machine id. Its states are not the other machine's; reading a
    state without the live host reads the last machine recorded there; history says so."""
    store = StateStore(root=tmp_path / "states").bound([SPEC])
    assert identity(SPEC, "aaaa") != identity(SPEC, "bbbb") != address_key(SPEC)
    first = record(store, on("aaaa"), "ready", now=T0)
    assert first.other_machine is None
    again = record(store, on("bbbb"), "lock", now=T0 + timedelta(hours=1))
    assert again.new and again.other_machine == first.state.path.parent
    assert [s.why for s in states_of(store, "ct200")] == ["lock"]  # the last machine's
    assert [s.why for s in states_of(store, "ct200", "aaaa")] == ["ready"]
    assert last_good(store, "ct200") == again.state
    # back on the first machine: its own past again, the other's kept apart
    back = record(store, on("aaaa"), "ready", now=T0 + timedelta(hours=2))
    assert not back.new and back.other_machine == again.state.path.parent
    assert states_of(store, "ct200") == [first.state]
    held(ITEM, 2)
    # through the CLI: history names the other machine's folder and its machine id
    inv = tmp_path / "envsync.toml"
    inv.write_text(f'[hosts.ct200]\npython = "{SPEC.python}"\nssh = "{SPEC.ssh}"\n')
    record(store, on("bbbb", "0.1.10"), "lock", now=T0 + timedelta(hours=3))
    code, out, err = run_cli(
        capsys,
        "--inventory",
        str(inv),
        "history",
        "ct200",
        "--no-live",
        "--state-dir",
        str(tmp_path / "states"),
    )
    assert code == 0, err
    assert "ct200@-1" in out and "ct200@-2" not in out, out  # bbbb's two alone
    assert "ct200: its identity changed" in err, err
    words = " ".join(err.split())
    assert f"{first.state.path.parent}" in words and "machine id aaaa" in words, words
    held(ITEM)


def test_states_from_before_identities_are_taken_over_on_first_touch(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A folder named for the host alone (as envsync recorded before it kept hosts by
    identity, and as an unbound store still does): the first host of that name to touch
    it takes it over (moved, with a note that history repeats); a later record of a known
    machine keeps it as that machine's past; a host of another identity is told."""
    root = tmp_path / "states"
    old = StateStore(root=root)  # the layout before identities: the name alone
    record(old, on(None), "ready", now=T0)
    record(old, on(None, "0.1.10"), "watch", now=T0 + timedelta(hours=1))
    assert sorted(p.name for p in root.iterdir()) == ["ct200"]
    inv = tmp_path / "envsync.toml"
    inv.write_text(f'[hosts.ct200]\npython = "{SPEC.python}"\nssh = "{SPEC.ssh}"\n')
    states = ("--state-dir", str(root))
    code, out, err = run_cli(
        capsys, "--inventory", str(inv), "history", "ct200", "--no-live", *states
    )
    assert code == 0, err
    assert "ct200@latest" in out and "ct200@-1" in out, out
    words = " ".join(err.split())
    assert "recorded under its name alone" in words and "taken as its past" in words, words
    taken = root / f"ct200~{address_key(SPEC)}"
    assert not (root / "ct200").exists() and (taken / MIGRATED).is_file()
    held(ITEM)
    # the next record reads the machine id: the same past, now that machine's
    store = StateStore(root=root).bound([SPEC])
    recorded = record(store, on("cccc", "0.1.11"), "lock", now=T0 + timedelta(hours=2))
    assert recorded.other_machine is None
    assert recorded.state.path.parent.name == f"ct200~{identity(SPEC, 'cccc')}"
    assert [s.why for s in states_of(store, "ct200")] == ["ready", "watch", "lock"]
    code, out, err = run_cli(
        capsys, "--inventory", str(inv), "history", "ct200", "--no-live", *states
    )
    assert code == 0 and "ct200@-2" in out and "taken as its past" in " ".join(err.split())
    # a ct200 of another interpreter: none of that is its past, and it is told where it is
    other = tmp_path / "other.toml"
    other.write_text(f'[hosts.ct200]\npython = "/opt/other/bin/python"\nssh = "{SPEC.ssh}"\n')
    code, out, err = run_cli(
        capsys, "--inventory", str(other), "history", "ct200", "--no-live", *states
    )
    words = " ".join(err.split())
    assert code == 2 and "ct200@latest" not in out
    assert "its identity changed" in words and "machine id cccc" in words, words
    held(ITEM, 2)


def test_an_old_folder_that_cannot_be_moved_is_read_where_it_is(tmp_path: Path) -> None:
    root = tmp_path / "states"
    record(StateStore(root=root), on(None), "ready", now=T0)
    root.chmod(0o555)
    try:
        if os.access(root, os.W_OK):
            pytest.skip("root may write to any folder")
        store = StateStore(root=root).bound([SPEC])
        assert [s.why for s in states_of(store, "ct200")] == ["ready"]
        assert store.folder("ct200") == root / "ct200"
    finally:
        root.chmod(0o755)
    held(ITEM)


def test_a_pointer_that_names_no_folder_of_the_host_is_ignored(tmp_path: Path) -> None:
    store = StateStore(root=tmp_path / "states").bound([SPEC])
    record(store, on("aaaa"), "ready", now=T0)
    pointer = tmp_path / "states" / f"ct200~{address_key(SPEC)}.current"
    assert json.dumps(pointer.read_text().strip()) == json.dumps(f"ct200~{identity(SPEC, 'aaaa')}")
    pointer.write_text("../../elsewhere\n")
    assert store.folder("ct200") == tmp_path / "states" / f"ct200~{address_key(SPEC)}"
    held(ITEM)


@pytest.mark.slow
def test_another_container_behind_the_same_prefix_has_a_past_of_its_own(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], containers: Callable[..., Any]
) -> None:
    """One inventory whose exec prefix enters whichever container runs now (a checkout
    pointing at another container, a host re-imaged): real namespaces, each with its own
    /etc/machine-id, the real probe through the prefix. The second container's lock is not
    recorded as the first one's past, and history says where that past is."""
    from tests.container import NSENTER, VENV

    venv = tmp_path / "venv"
    make_venv(venv)
    pidfile = tmp_path / "running.pid"
    enter = tmp_path / "enter"
    enter.write_text(
        f'#!/bin/sh\nexec {NSENTER} --target "$(cat {pidfile})" --mount --uts --ipc --pid -- "$@"\n'
    )
    enter.chmod(0o755)
    inv = tmp_path / "envsync.toml"
    inv.write_text(f'[hosts.ct200]\nexec = ["{enter}"]\npython = "{VENV}/bin/python"\n')
    states = ("--state-dir", str(tmp_path / "states"))
    seen = []
    for n in ("1", "2"):
        ids = tmp_path / f"machine-id-{n}"
        ids.write_text(n * 32 + "\n")
        box = containers(venv, mounts={"/etc/machine-id": ids})
        pidfile.write_text(str(box.pid))
        code, _, err = run_cli(capsys, "--inventory", str(inv), "-q", "lock", "ct200", *states)
        assert code == 0, err
        code, out, err = run_cli(capsys, "--inventory", str(inv), "history", "ct200", *states)
        assert code == 0, err
        seen.append((out, " ".join(err.split())))
        box.stop()
    (first_out, first_err), (second_out, second_err) = seen
    assert "ct200@latest" in first_out and "identity changed" not in first_err, first_err
    assert "ct200@latest" in second_out and "ct200@-1" not in second_out, second_out
    want = hmac.new(b"1" * 32, b"envsync host identity", hashlib.sha256).hexdigest()[:16]
    assert "its identity changed" in second_err and f"machine id {want}" in second_err
    held(ITEM)
