"""The state folder: recording (deduplicated by digest, bounded, atomic), naming a state
(HOST@good, @latest, @-N, @TIME), and every way a state cannot be read: one line each."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from envsync.collect.identity import compared as digest
from envsync.errors import StateError
from envsync.exitcodes import ExitCode
from envsync.model.codec import from_data
from envsync.model.environment import Distribution, Snapshot
from envsync.sources.inventory import HostSpec, Inventory
from envsync.sources.snapshot import load_snapshot
from envsync.sources.source import FileSource, HostSource, StateSource, resolve
from envsync.sources.states import (
    AtTime,
    Back,
    LastGood,
    StateStore,
    last_good,
    load,
    parse_selector,
    pick,
    record,
    states_of,
)
from tests.figures import held, round_four
from tests.helpers import REPO, children

SNAPSHOT = Path(__file__).resolve().parent.parent / "data" / "snapshots" / "ct129.json"
T0 = datetime(2026, 12, 1, 10, 2, 3, tzinfo=timezone.utc)


def base() -> Snapshot:
    return load_snapshot(SNAPSHOT)


def with_version(snap: Snapshot, name: str, version: str) -> Snapshot:
    dists = tuple(replace(d, version=version) if d.name == name else d for d in snap.distributions)
    return replace(snap, distributions=dists)


def store(tmp_path: Path, keep: int = 20) -> StateStore:
    return StateStore(root=tmp_path / "states", keep=keep)


def cli_store(tmp_path: Path) -> StateStore:
    """The store as the CLI sees it for `[hosts.ct129] python = "/nonexistent/python"`:
    bound to that host's identity."""
    return store(tmp_path).bound([HostSpec(name="ct129", python="/nonexistent/python")])


def test_the_digest_is_of_what_diff_compares_not_of_when() -> None:
    snap = base()
    later = replace(snap, collected_at="2027-01-01T00:00:00Z", duration_s=9.0, source="lock")
    # install times and where a package lies are facts of the machine, not compared either
    moved = replace(
        snap,
        distributions=tuple(
            replace(d, installed_at="2027-01-01T00:00:00Z") for d in snap.distributions
        ),
    )
    assert digest(snap) == digest(later) == digest(moved)
    assert digest(snap) != digest(with_version(snap, "xgrammar", "0.1.10"))


def test_an_unchanged_host_records_one_state(tmp_path: Path) -> None:
    s = store(tmp_path)
    first = record(s, base(), "ready", now=T0)
    again = record(s, replace(base(), collected_at="2026-12-02T00:00:00Z"), "ready", now=T0)
    locked = record(s, base(), "lock", now=T0 + timedelta(hours=1))
    assert first.new and not again.new and not locked.new
    assert again.state == first.state == locked.state
    assert [p.name for p in sorted((tmp_path / "states" / "ct129").iterdir())] == [
        ".lock",
        first.state.path.name,
    ]
    assert first.state.path.name.startswith("20261201T100203.000000Z-ready-")


def test_a_changed_host_records_a_new_state_and_a_watched_one_becomes_good(
    tmp_path: Path,
) -> None:
    s = store(tmp_path)
    record(s, base(), "ready", now=T0)
    drifted = with_version(base(), "xgrammar", "0.1.10")
    seen = record(s, drifted, "watch", now=T0 + timedelta(minutes=5))
    assert seen.new and not seen.state.good
    assert (good := last_good(s, "ct129")) is not None and good.at == T0
    # the same environment, now seen ready: a good state in place of the watched one
    ready = record(s, drifted, "ready", now=T0 + timedelta(minutes=9))
    assert ready.new and ready.state.good
    assert not seen.state.path.exists()
    assert [(st.why, st.at) for st in states_of(s, "ct129")] == [
        ("ready", T0),
        ("ready", T0 + timedelta(minutes=9)),
    ]
    # a host that comes back to an earlier environment has that as its latest state again
    back = record(s, base(), "ready", now=T0 + timedelta(minutes=20))
    assert back.new and len(states_of(s, "ct129")) == 3


def test_states_are_bounded_and_the_last_good_one_is_kept(tmp_path: Path) -> None:
    s = store(tmp_path, keep=3)
    record(s, base(), "lock", now=T0)
    for i in range(6):
        record(
            s,
            with_version(base(), "xgrammar", f"0.2.{i}"),
            "watch",
            now=T0 + timedelta(minutes=i + 1),
        )
    kept = states_of(s, "ct129")
    assert [st.why for st in kept] == ["lock", "watch", "watch"]
    assert kept[0].at == T0 and kept[-1].at == T0 + timedelta(minutes=6)


def test_a_clock_that_went_back_keeps_the_order(tmp_path: Path) -> None:
    s = store(tmp_path)
    record(s, base(), "ready", now=T0)
    later = record(
        s, with_version(base(), "xgrammar", "0.1.10"), "watch", now=T0 - timedelta(days=1)
    )
    assert later.state.at > T0
    assert states_of(s, "ct129")[-1] == later.state


def test_a_state_holds_the_snapshot_without_its_graph_and_reads_back(tmp_path: Path) -> None:
    s = store(tmp_path)
    snap = base()
    state = record(s, snap, "ready", now=T0).state
    data = json.loads(state.path.read_text())
    assert (
        data["host"] == "ct129" and data["why"] == "ready" and data["at"] == "2026-12-01T10:02:03Z"
    )
    assert data["digest"] == digest(snap) and data["startup_graph"] is False
    assert data["snapshot"]["startup"] is None
    assert load(state) == replace(snap, startup=None)
    assert not [p for p in state.path.parent.iterdir() if p.name.endswith(".tmp")]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("good", LastGood()),
        ("latest", Back(steps=0)),
        ("0", Back(steps=0)),
        ("-1", Back(steps=1)),
        ("-12", Back(steps=12)),
        ("2026-11-30T14:00Z", AtTime(until=datetime(2026, 11, 30, 14, 0, tzinfo=timezone.utc))),
        (
            "2026-11-30T14:00:30Z",
            AtTime(until=datetime(2026, 11, 30, 14, 0, 30, tzinfo=timezone.utc)),
        ),
        (
            "2026-11-30 14:00+01:00",
            AtTime(until=datetime(2026, 11, 30, 13, 0, tzinfo=timezone.utc)),
        ),
        (
            "2026-11-30T14:00-0230",
            AtTime(until=datetime(2026, 11, 30, 16, 30, tzinfo=timezone.utc)),
        ),
        ("2026-11-30", AtTime(until=datetime(2026, 11, 30).astimezone())),
        ("2026-11-30T14:00", AtTime(until=datetime(2026, 11, 30, 14, 0).astimezone())),
    ],
)
def test_selectors(text: str, expected: object) -> None:
    assert parse_selector(text, f"ct129@{text}") == expected


@pytest.mark.parametrize(
    "text",
    [
        "",
        "bogus",
        "-0",
        "--1",
        "+1",
        "Good",
        "2026-13-01",
        "2026-11-31T10:00",
        "2026-11-30T25:00",
        "1.5",
    ],
)
def test_a_malformed_selector_is_one_line_with_a_tip(text: str) -> None:
    with pytest.raises(StateError) as e:
        parse_selector(text, f"ct129@{text}")
    line = str(e.value)
    assert line.startswith(f"ct129@{text}: ") and "\n" not in line
    assert "Tip: write HOST@good" in line and e.value.exit_code == ExitCode.USAGE


def test_picking_a_state(tmp_path: Path) -> None:
    s = store(tmp_path)
    with pytest.raises(
        StateError, match=r"ct129@good: no state of ct129 is recorded in .*Tip: a ready"
    ):
        pick(s, "ct129", LastGood(), "ct129@good")
    record(s, base(), "watch", now=T0)
    with pytest.raises(StateError, match="none of the 1 recorded state"):
        pick(s, "ct129", LastGood(), "ct129@good")
    record(s, with_version(base(), "xgrammar", "0.1.10"), "lock", now=T0 + timedelta(hours=1))
    record(s, with_version(base(), "xgrammar", "0.1.11"), "watch", now=T0 + timedelta(hours=2))
    states = states_of(s, "ct129")
    assert pick(s, "ct129", LastGood(), "x") == states[1]
    assert pick(s, "ct129", Back(steps=0), "x") == states[2]
    assert pick(s, "ct129", Back(steps=2), "x") == states[0]
    with pytest.raises(
        StateError, match=r"ct129@-3: ct129 has 3 recorded state\(s\), ct129@latest to ct129@-2"
    ):
        pick(s, "ct129", Back(steps=3), "ct129@-3")
    at = AtTime(until=T0 + timedelta(minutes=90))
    assert pick(s, "ct129", at, "x") == states[1]
    assert pick(s, "ct129", AtTime(until=T0), "x") == states[0]  # at or before: exactly then too
    with pytest.raises(
        StateError,
        match=r"no state of ct129 was recorded at or before 2026-12-01T10:02:02Z \(the first: 2026-12-01T10:02:03Z\)",
    ):
        pick(s, "ct129", AtTime(until=T0 - timedelta(seconds=1)), "ct129@...")


def _one_state(tmp_path: Path) -> tuple[StateStore, Path]:
    s = store(tmp_path)
    return s, record(s, base(), "ready", now=T0).state.path


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda p: p.write_text(p.read_text()[: len(p.read_text()) // 2]), "not valid JSON"),
        (lambda p: p.write_text("[]"), "not an envsync state"),
        (lambda p: p.write_bytes(b"\xff\xfe"), "cannot read state"),
        (lambda p: _edit(p, schema_version=9), "a damaged state of ct129 (state schema_version 9"),
        (lambda p: _edit(p, host="ct200"), "a state of 'ct200', not of ct129"),
        (lambda p: _edit(p, digest="0" * 64), "its digest is not the one its name says"),
        (
            lambda p: _edit(p, snapshot={"schema_version": 1, "host": 3}),
            "a damaged state of ct129: state.snapshot",
        ),
        (lambda p: _edit(p, snapshot=None), "no snapshot this envsync reads"),
        (lambda p: p.unlink(), "state not found"),
    ],
)
def test_a_state_that_cannot_be_read_is_one_line(
    tmp_path: Path, damage: Callable[[Path], object], message: str
) -> None:
    s, path = _one_state(tmp_path)
    (state,) = states_of(s, "ct129")
    damage(path)
    with pytest.raises(StateError) as e:
        load(state)
    line = str(e.value)
    assert message in line and "\n" not in line and line.startswith(str(path))
    assert e.value.exit_code == ExitCode.USAGE


def _edit(path: Path, **changes: object) -> None:
    data = json.loads(path.read_text())
    data.update(changes)
    path.write_text(json.dumps(data))


def test_an_edited_state_is_never_used(tmp_path: Path) -> None:
    """A forger who edits a state (a package's version), leaving the digest its name says
    (all that was checked), with or without the seal: refused."""
    s, path = _one_state(tmp_path)
    (state,) = states_of(s, "ct129")
    assert load(state) == base()
    data = json.loads(path.read_text())
    data["snapshot"]["distributions"][0]["version"] = "9.9.9"
    assert from_data(Snapshot, data["snapshot"], "state.snapshot") != base()  # still a state
    for forgery in (data, {k: v for k, v in data.items() if k != "seal"}):
        path.write_text(json.dumps(forgery, separators=(",", ":")))
        with pytest.raises(StateError) as e:
            load(state)
        assert "whose seal does not verify" in str(e.value) and "envsync lock ct129" in str(
            e.value.tip
        )
    round_four("3 recorded states edited or unsealed: refused", 2)


def test_files_in_the_folder_that_are_no_states_are_left_alone(tmp_path: Path) -> None:
    s, path = _one_state(tmp_path)
    folder = path.parent
    (folder / ".20261201T100203.000000Z-ready-0123456789abcdef.json.x1.tmp").write_text("{")
    (folder / "watch.json").write_text("{}")
    (folder / "notes.txt").write_text("mine")
    assert [st.path for st in states_of(s, "ct129")] == [path]


def test_a_host_name_that_is_no_file_name_gets_a_folder_of_its_own(tmp_path: Path) -> None:
    s = store(tmp_path)
    for name in ("../etc", "a/b", ".hidden", "ünï"):
        folder = s.folder(name)
        assert folder.parent == s.root and folder.name.startswith("_")
    assert s.folder("gpu-01.example") == s.root / "gpu-01.example"


def test_an_unwritable_state_folder_is_one_line(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        blocker = tmp_path / "states"
        blocker.write_text("a file where the folder should be")
    else:
        (tmp_path / "states").mkdir()
        (tmp_path / "states").chmod(0o500)
    with pytest.raises(StateError, match="cannot create the state folder"):
        record(store(tmp_path), base(), "ready")


def _inventory() -> Inventory:
    spec = HostSpec(name="ct129", python="/usr/bin/python3")
    odd = HostSpec(name="odd@good", python="/usr/bin/python3")
    return Inventory(path=None, hosts={"ct129": spec, "odd@good": odd})


def test_what_a_host_argument_with_an_at_names(tmp_path: Path) -> None:
    inv = _inventory()
    source = resolve("ct129@good", inv)
    assert isinstance(source, StateSource) and source.spec.name == "ct129"
    assert source.selector == LastGood() and source.label == "ct129@good"
    assert isinstance(resolve("odd@good", inv), HostSource)  # a host of that very name wins
    (tmp_path / "x@good.json").write_text("{}")
    assert isinstance(resolve(str(tmp_path / "x@good.json"), inv), FileSource)
    with pytest.raises(StateError, match=r"ct999@good: unknown host 'ct999'.*Tip: HOST@good"):
        resolve("ct999@good", inv)
    with pytest.raises(StateError, match=r"ct129@yesterday: @yesterday does not name"):
        resolve("ct129@yesterday", inv)


def test_a_recorded_state_stands_for_the_host_it_was(tmp_path: Path) -> None:
    from envsync.runner import Runners
    from envsync.sources.session import Session

    s = store(tmp_path)
    record(s, base(), "ready", now=T0)
    with Session(inventory=_inventory(), runners=Runners(), states=s) as session:
        snap = session.collect_one("ct129@good")
        assert snap.host == "ct129@good" and snap.source == "state"
        assert snap.distribution("xgrammar") == base().distribution("xgrammar")
        with pytest.raises(StateError, match="ct129@-1: ct129 has one recorded state"):
            session.resolve("ct129@-1")
    with (
        Session(inventory=_inventory(), runners=Runners()) as session,
        pytest.raises(StateError, match="no state folder"),
    ):
        session.collect_one("ct129@good")


def test_the_snapshot_of_a_new_distribution_field_reads_old_snapshots() -> None:
    data = json.loads(SNAPSHOT.read_text())
    for dist in data["distributions"]:
        dist.pop("installed_at", None)
    from envsync.model.codec import from_data

    snap = from_data(Snapshot, data)
    assert all(d.installed_at is None for d in snap.distributions)
    assert isinstance(snap.distributions[0], Distribution)


def test_check_and_watch_take_states_where_they_may(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.helpers import run_cli

    inv = tmp_path / "envsync.toml"
    inv.write_text('[hosts.ct129]\npython = "/nonexistent/python"\n')
    states = ("--state-dir", str(tmp_path / "states"))
    code, _, err = run_cli(
        capsys, "--inventory", str(inv), "check", "--lock", "ct129@good", "ct129", *states
    )
    assert code == 2 and "envsync: ct129@good: no state of ct129 is recorded in" in err
    missing = str(tmp_path / "env@2.lock")
    code, _, err = run_cli(capsys, "--inventory", str(inv), "check", "--lock", missing, "ct129")
    assert code == 2 and f"{missing}: lock file not found" in err
    code, _, err = run_cli(
        capsys, "--inventory", str(inv), "watch", "--once", "ct129@good", *states
    )
    assert code == 2 and "ct129@good is a recorded state of ct129, not a host" in err
    assert not (tmp_path / "states").exists()  # nothing was recorded for a name that is no host


@pytest.mark.parametrize(
    "text",
    [
        "2026-11-30T14:00+99:00",  # a zone past 24 hours
        "2026-11-30T14:00-24:00",
        "9999-12-31T23:59-01:00",  # past the year 9999 once in UTC
        "0001-01-01T00:00+01:00",  # before the year 1 once in UTC
        "0000-01-01",
    ],
)
def test_a_time_out_of_range_is_one_line(text: str) -> None:
    with pytest.raises(StateError) as e:
        parse_selector(text, f"ct129@{text}")
    line = str(e.value)
    assert line.startswith(f"ct129@{text}: {text} is not a time") and "\n" not in line
    assert e.value.exit_code == ExitCode.USAGE
    held("16 selectors and state names")


@pytest.mark.parametrize(
    "stamp", ["99991231T235959.999999Z", "99990101T000000.000000Z", "20261341T000000.000000Z"]
)
def test_a_state_named_for_no_usable_time_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], stamp: str
) -> None:
    """A state named for the year 9999 (or a month 13): history, diff HOST@latest and
    recording (lock) say so in one line, exit 2, never a traceback with exit 1."""
    from tests.helpers import run_cli

    s = cli_store(tmp_path)
    record(s, base(), "ready", now=T0)
    (s.folder("ct129") / f"{stamp}-watch-{'0' * 16}.json").write_text("{}")
    with pytest.raises(StateError, match=r"not a state envsync recorded") as e:
        states_of(s, "ct129")
    assert e.value.exit_code == ExitCode.USAGE
    with pytest.raises(StateError, match=r"not a state envsync recorded"):
        record(s, with_version(base(), "xgrammar", "0.1.10"), "lock")
    inv = tmp_path / "envsync.toml"
    inv.write_text('[hosts.ct129]\npython = "/nonexistent/python"\n')
    states = ("--state-dir", str(tmp_path / "states"))
    for args in (["history", "ct129"], ["diff", "ct129@latest", "ct129@good"]):
        code, _, err = run_cli(capsys, "--inventory", str(inv), *args, *states)
        assert code == 2, err
        assert "not a state envsync recorded" in err and "Traceback" not in err
        assert len(err.strip().splitlines()) <= 2  # the line and its Tip
    held("16 selectors and state names", 2)


def _envsync(tmp_path: Path, *argv: str) -> subprocess.Popen[str]:
    """envsync in a process of its own: a test that would hang ends at its timeout."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "ENVSYNC_STATE_DIR": str(tmp_path / "states")}
    return subprocess.Popen(
        [sys.executable, "-m", "envsync", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def _ended(proc: subprocess.Popen[str], timeout: float) -> tuple[int, str]:
    try:
        _, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        pytest.fail(f"envsync did not end within {timeout:g}s")
    return proc.returncode, err


@pytest.mark.parametrize("kind", ["fifo", "link"])
def test_a_fifo_or_a_link_named_like_a_state_is_one_line(tmp_path: Path, kind: str) -> None:
    """history and diff HOST@latest end at once with one line: a FIFO is not waited on, a
    link (to a file anywhere) is not followed."""
    s = cli_store(tmp_path)
    record(s, base(), "ready", now=T0)
    name = (
        s.folder("ct129")
        / f"{(T0 + timedelta(hours=1)).strftime('%Y%m%dT%H%M%S.%fZ')}-watch-{'0' * 16}.json"
    )
    if kind == "fifo":
        os.mkfifo(name)
    else:
        elsewhere = tmp_path / "elsewhere.json"
        elsewhere.write_text(json.dumps({"schema_version": 1, "host": "ct129"}))
        name.symlink_to(elsewhere)
    inv = tmp_path / "envsync.toml"
    inv.write_text('[hosts.ct129]\npython = "/nonexistent/python"\n')
    for argv in (["history", "ct129"], ["diff", "ct129@latest", "ct129@good"]):
        code, err = _ended(_envsync(tmp_path, "--inventory", str(inv), *argv), 30)
        assert code == 2, err
        last = err.strip().splitlines()[-1]  # after the note on ct129@good, for diff
        assert "Traceback" not in err and last.startswith(f"envsync: {name}: "), err
        assert "not a file" in last and err.count("envsync: ") <= 2, err
        held("14 state and cache files: no link followed, no FIFO waited on")


def test_a_fifo_for_the_state_folders_lock_or_the_watch_memory(tmp_path: Path) -> None:
    s = store(tmp_path)
    folder = s.folder("ct129")
    folder.mkdir(parents=True)
    os.mkfifo(folder / ".lock")
    with pytest.raises(StateError, match=r"\.lock: cannot lock the state folder: a FIFO") as e:
        record(s, base(), "ready", now=T0)
    assert e.value.exit_code == ExitCode.USAGE
    held("14 state and cache files: no link followed, no FIFO waited on")
    (folder / ".lock").unlink()
    from envsync.report.watch import MEMORY, _memory

    os.mkfifo(folder / MEMORY)
    assert _memory(s, "ct129") == {}  # as unreadable: rewritten at the end of the run
    held("14 state and cache files: no link followed, no FIFO waited on")


def test_sigterm_ends_a_running_diff_within_a_second(tmp_path: Path) -> None:
    """A diff waiting on a host (an interpreter that hangs) ends within a second of SIGTERM,
    one line, exit 143."""
    slow = tmp_path / "slow" / "python"
    slow.parent.mkdir()
    slow.write_text("#!/bin/sh\nsleep 60\n")
    slow.chmod(0o755)
    inv = tmp_path / "envsync.toml"
    inv.write_text(f'[hosts.a]\npython = "{slow}"\n[hosts.b]\npython = "{slow}"\n')
    proc = _envsync(tmp_path, "--inventory", str(inv), "diff", "a", "b")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not children(proc.pid):
        time.sleep(0.05)
    time.sleep(0.3)
    sent = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    code, err = _ended(proc, 10)
    took = time.monotonic() - sent
    assert code == 143 and "envsync: terminated" in err, err
    assert took < 1.0, f"{took:.2f}s"
    held("14 SIGTERM ends a command within a second")


def test_a_hosts_past_is_keyed_by_its_identity_not_its_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two inventories that both call a host ct200 (staging and production): each machine
    has a history of its own, and `history ct200` says when the name's identity changed."""
    from envsync.sources.hostidentity import identity
    from tests.helpers import run_cli

    root = tmp_path / "states"
    staging = HostSpec(name="ct200", python="/opt/staging/bin/python", ssh="root@10.0.0.7")
    production = HostSpec(name="ct200", python="/opt/prod/bin/python", ssh="root@10.0.0.8")
    assert identity(staging) != identity(production)
    assert identity(staging) == identity(
        HostSpec(name="other", python=staging.python, ssh=staging.ssh)
    )
    s_store = StateStore(root=root).bound([staging])
    p_store = StateStore(root=root).bound([production])
    assert s_store.folder("ct200") != p_store.folder("ct200")
    record(s_store, replace(base(), host="ct200"), "ready", now=T0)
    assert states_of(p_store, "ct200") == []  # production has no past of staging's
    with pytest.raises(StateError, match="no state of ct200 is recorded"):
        pick(p_store, "ct200", LastGood(), "ct200@good")
    assert [p.name for p in p_store.elsewhere("ct200")] == [s_store.folder("ct200").name]
    held("18 a host's past keyed by its identity")
    # through the CLI: the same name, another interpreter: history says so
    for name, spec in (("staging", staging), ("production", production)):
        (tmp_path / f"{name}.toml").write_text(
            f'[hosts.ct200]\npython = "{spec.python}"\nssh = "{spec.ssh}"\n'
        )
    states = ("--state-dir", str(root))
    code, out, err = run_cli(
        capsys,
        "--inventory",
        str(tmp_path / "staging.toml"),
        "history",
        "ct200",
        "--no-live",
        *states,
    )
    assert code == 0 and "ct200@latest" in out and "identity changed" not in err, err
    code, out, err = run_cli(
        capsys,
        "--inventory",
        str(tmp_path / "production.toml"),
        "history",
        "ct200",
        "--no-live",
        *states,
    )
    assert code == 2 and "ct200@latest" not in out
    assert "ct200: its identity changed" in err and "/opt/prod/bin/python" in err, err
    record(p_store, replace(base(), host="ct200"), "lock", now=T0)
    code, out, err = run_cli(
        capsys,
        "--inventory",
        str(tmp_path / "production.toml"),
        "history",
        "ct200",
        "--no-live",
        *states,
    )
    assert code == 0 and out.count("ct200@latest") == 2 and "ct200@-1" not in out, out
    assert "ct200: its identity changed" in err
    held("18 a host's past keyed by its identity", 2)


def test_a_state_write_that_fails_leaves_no_temporary_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The disk full as a state is written: one line, the folder as it was (no *.tmp)."""
    from envsync.errors import OutputError

    s = store(tmp_path)
    record(s, base(), "ready", now=T0)
    before = sorted(p.name for p in s.folder("ct129").iterdir())

    def full(src: object, dst: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", full)
    with pytest.raises(OutputError, match="No space left on device"):
        record(s, with_version(base(), "xgrammar", "0.1.10"), "watch", now=T0 + timedelta(hours=1))
    monkeypatch.undo()
    assert sorted(p.name for p in s.folder("ct129").iterdir()) == before
    held("17 temporary files removed and swept")
