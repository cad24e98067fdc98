"""Nothing unchanged crosses the wire twice: a startup graph's modules are sent once, kept
by envsync by their digest, and named on the next probe; the host then sends the digest
alone. What envsync keeps is never trusted without it: a copy lost, damaged or replaced
while the probe runs makes the probe run again for everything, never a stale answer.

A real venv with a small service package; the probe runs for real.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from envsync.collect import ProbeOptions, collect, parse_probe_output, wire
from envsync.errors import CollectError
from envsync.hostside.shared import text_digest
from envsync.model.environment import Snapshot, StartupGraph
from envsync.runner import CommandResult
from envsync.runner.local import LocalRunner
from envsync.sources.inventory import HostSpec
from envsync.sources.snapshot import dumps_snapshot
from tests.figures import round_four
from tests.helpers import OLD_NS, comparable, service_venv, site_packages

OPTIONS = ProbeOptions(roots=("svc.main",), internal=("svc",))
RACE_ITEM = "5 diffs side by side on a cache at its cap: the --no-cache verdict"


class Recording:
    """A real local runner that keeps each probe's output (and may act while it runs)."""

    def __init__(self, during: Callable[[], None] | None = None) -> None:
        self.host = "t"
        self.runner = LocalRunner("t")
        self.outputs: list[bytes] = []
        self.during = during

    def run(
        self, argv: Sequence[str], *, input: bytes | None = None, timeout: float
    ) -> CommandResult:
        result = self.runner.run(argv, input=input, timeout=timeout)
        if self.during is not None:
            self.during()
            self.during = None
        self.outputs.append(result.stdout)
        return result


@pytest.fixture
def venv(tmp_path: Path) -> Path:
    return service_venv(tmp_path / "venv")


def _collect(python: Path, runner: Recording) -> StartupGraph:
    graph = collect(HostSpec(name="t", python=str(python)), runner, OPTIONS).startup
    assert graph is not None
    return graph


def _sent(output: bytes) -> bool:
    head = json.loads(output.partition(b"\n")[0])
    return bool(head["startup"]["modules_sent"])


def _parts(output: bytes) -> dict[str, bool]:
    head = json.loads(output.partition(b"\n")[0])
    return {name: sent for name, (_, sent) in head["parts"].items()}


def _packs_sent(output: bytes) -> int:
    head = json.loads(output.partition(b"\n")[0])
    return sum(1 for _, _, sent in (head.get("packs") or {}).get("index", []) if sent)


def _facts(snap: Snapshot) -> dict[str, object]:
    """A snapshot's facts, without how they were collected (nor which were parsed anew)."""
    data = comparable(json.loads(dumps_snapshot(snap)))
    for key in ("parsed", "cached"):
        data["startup"].pop(key)
    return data


def _copies(kind: str = "modules") -> list[Path]:
    return sorted(wire.folder().glob(f"{kind}-*.json"))


def test_unchanged_modules_cross_the_wire_once(venv: Path) -> None:
    runner = Recording()
    first = _collect(venv, runner)
    second = _collect(venv, runner)
    third = _collect(venv, runner)
    assert [_sent(o) for o in runner.outputs] == [True, False, False]
    # the document, the modules, the distributions, the native facts (and the packs of
    # facts parsed, collect/share.py); then the document
    assert [o.count(b"\n") - _packs_sent(o) for o in runner.outputs] == [4, 1, 1]
    assert _packs_sent(runner.outputs[0]) > 0 and _packs_sent(runner.outputs[1]) == 0
    assert [_parts(o) for o in runner.outputs] == [
        {"distributions": True, "native": True},
        {"distributions": False, "native": False},
        {"distributions": False, "native": False},
    ]
    assert b'"svc.util"' in runner.outputs[0] and b'"svc.util"' not in runner.outputs[1]
    assert dict(second.modules) == dict(first.modules) == dict(third.modules)
    assert second.modules.digest == first.modules.digest  # type: ignore[attr-defined]  # modules is typed Mapping; a probe's graph holds a LazyModules, which has its digest
    assert [p.name for p in _copies()] == [f"modules-{first.modules.digest}.json"]  # type: ignore[attr-defined]  # modules is typed Mapping; a probe's graph holds a LazyModules, which has its digest


def test_a_part_that_changed_is_sent_alone(venv: Path) -> None:
    """A distribution installed: the distributions are sent again, the graph is not (the
    folder changed, so the host read the graph again, and it is the same)."""
    runner = Recording()
    spec = HostSpec(name="t", python=str(venv))
    first = collect(spec, runner, OPTIONS)
    info = site_packages(venv) / "beta-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: beta\nVersion: 1.0\n")
    (info / "RECORD").write_text("beta-1.0.dist-info/METADATA,,\n")
    second = collect(spec, runner, OPTIONS)
    assert _parts(runner.outputs[1])["distributions"] is True
    assert _sent(runner.outputs[1]) is False
    assert {d.name for d in second.distributions} - {d.name for d in first.distributions} == {
        "beta"
    }


def test_a_part_is_decoded_once_per_process(venv: Path) -> None:
    """Hosts with one environment share their decoded parts (a fleet's do, mostly)."""
    runner = Recording()
    spec = HostSpec(name="t", python=str(venv))
    snaps = [collect(spec, runner, OPTIONS) for _ in range(3)]
    assert snaps[1].distributions is snaps[2].distributions
    assert snaps[1].distributions == snaps[0].distributions


def test_a_changed_graph_is_sent_whole(venv: Path) -> None:
    runner = Recording()
    _collect(venv, runner)
    util = site_packages(venv) / "svc" / "util.py"
    util.write_text("import gamma\n")
    os.utime(util, ns=(OLD_NS, OLD_NS))
    graph = _collect(venv, runner)
    assert [_sent(o) for o in runner.outputs] == [True, True]
    assert [e.module for e in graph.modules["svc.util"].imports] == ["gamma"]
    assert len(_copies()) == 2


def test_a_host_back_in_a_state_it_had_parses_nothing_and_sends_no_graph(venv: Path) -> None:
    """An edit that changes the walk's course, then the file put back (a new file of the
    old content, as a rollback writes it): the host takes its past state's graph by the
    files' content, and envsync, which holds that graph, is not sent it again."""
    runner = Recording()
    first = _collect(venv, runner)
    util = site_packages(venv) / "svc" / "util.py"
    original = util.read_bytes()
    util.write_text("import gamma\n")
    os.utime(util, ns=(OLD_NS + 10**9, OLD_NS + 10**9))
    changed = _collect(venv, runner)
    assert [e.module for e in changed.modules["svc.util"].imports] == ["gamma"]
    restored = util.with_name("util.py.new")
    restored.write_bytes(original)
    os.utime(restored, ns=(OLD_NS + 2 * 10**9, OLD_NS + 2 * 10**9))
    os.replace(restored, util)  # another inode and other times: the same content
    back = _collect(venv, runner)
    assert [_sent(o) for o in runner.outputs] == [True, True, False]
    assert back.parsed == 0 and back.cached == first.parsed + first.cached
    assert dict(back.modules) == dict(first.modules)
    assert back.modules.digest == first.modules.digest  # type: ignore[attr-defined]  # modules is typed Mapping; a probe's graph holds a LazyModules, which has its digest
    # it is the graph file again: the next run only stats the files, and sends nothing
    again = _collect(venv, runner)
    assert _sent(runner.outputs[-1]) is False and dict(again.modules) == dict(first.modules)


def test_a_host_that_lost_its_cache_builds_the_same_graph_and_is_not_resent(venv: Path) -> None:
    runner = Recording()
    first = _collect(venv, runner)
    for cached in (Path.home() / ".cache" / "envsync").glob("graph-*.json"):
        cached.unlink()
    second = _collect(venv, runner)
    assert second.parsed == 0 and second.cached == 3  # built again from the parsed facts
    assert [_sent(o) for o in runner.outputs] == [True, False]  # the same digest
    assert dict(second.modules) == dict(first.modules)


@pytest.mark.parametrize("damage", ["garbage", "truncated", "other graph", "removed"])
def test_a_damaged_or_lost_copy_is_never_used(venv: Path, damage: str) -> None:
    runner = Recording()
    truth = dict(_collect(venv, runner).modules)
    (copy,) = _copies()
    wire._MEMO.clear()  # another envsync process: nothing of this one's memory
    if damage == "garbage":
        copy.write_bytes(b"{}")
    elif damage == "truncated":
        copy.write_bytes(copy.read_bytes()[:-10])
    elif damage == "other graph":
        copy.write_bytes(json.dumps({"svc.main": {"kind": "missing"}}).encode())
    else:
        copy.unlink()
    again = _collect(venv, runner)
    assert dict(again.modules) == truth
    # a copy gone is known before the probe (not named); a damaged one after it (run again)
    assert [_sent(o) for o in runner.outputs] == (
        [True, True] if damage == "removed" else [True, False, True]
    )
    assert [p.name for p in _copies()] == [copy.name]
    assert dict(_collect(venv, runner).modules) == truth
    assert _sent(runner.outputs[-1]) is False  # kept anew, and named again


@pytest.mark.parametrize("kind", ["distributions", "native"])
def test_a_damaged_part_is_never_used(venv: Path, kind: str) -> None:
    runner = Recording()
    spec = HostSpec(name="t", python=str(venv))
    truth = collect(spec, runner, OPTIONS)
    (copy,) = _copies(kind)
    wire._MEMO.clear()  # another envsync process
    wire._DECODED.clear()
    copy.write_bytes(b"[1]" if kind == "distributions" else b"{}")  # JSON, not the digest's
    again = collect(spec, runner, OPTIONS)
    assert getattr(again, kind) == getattr(truth, kind)
    assert [_parts(o)[kind] for o in runner.outputs] == [True, False, True]


def test_a_copy_removed_while_the_probe_runs_is_asked_for_again(venv: Path) -> None:
    truth = dict(_collect(venv, Recording()).modules)
    wire._MEMO.clear()  # another envsync process: nothing of this one's memory
    (copy,) = _copies()
    runner = Recording(during=copy.unlink)
    assert dict(_collect(venv, runner).modules) == truth
    assert [_sent(o) for o in runner.outputs] == [False, True]


@pytest.mark.parametrize("kind", ["modules", "distributions", "native"])
def test_a_copy_pruned_while_the_host_asks_for_every_pack_is_asked_for_again(
    venv: Path, kind: str
) -> None:
    """Another run on this machine pruned a copy this one named, while the host answered
    that its facts store was made anew (a clear, a prune of its cache): the probe asked
    again with every pack named the copy still, and the Stale of it ended envsync in a
    traceback (`envsync.collect.wire.Stale: no copy of the distributions`, exit 1)."""
    spec = HostSpec(name="t", python=str(venv))
    truth = collect(spec, Recording(), OPTIONS)
    wire._MEMO.clear()  # another envsync process: nothing of this one's memory
    wire._DECODED.clear()
    (store,) = (Path.home() / ".cache" / "envsync").glob("facts-*/id")
    store.write_text("0" * 32)  # the host's facts store made anew since envsync's record
    (copy,) = _copies(kind)
    runner = Recording(during=copy.unlink)
    again = collect(spec, runner, OPTIONS)
    assert _facts(again) == _facts(truth)
    assert len(runner.outputs) == 3  # asked again with every pack, then for everything
    round_four(RACE_ITEM)


def test_a_host_that_says_envsync_holds_what_it_never_named_is_a_collect_error(
    venv: Path,
) -> None:
    """Asked for everything, a host that answers "unchanged" is lying or broken: one line
    that names it (exit 3), never a traceback nor a loop."""

    class Lying(Recording):
        def run(
            self, argv: Sequence[str], *, input: bytes | None = None, timeout: float
        ) -> CommandResult:
            done = super().run(argv, input=input, timeout=timeout)
            head, _, rest = done.stdout.partition(b"\n")
            data = json.loads(head)
            data["startup"]["modules_sent"] = False
            lie = json.dumps(data).encode() + b"\n" + rest.partition(b"\n")[2]
            return CommandResult(
                argv=tuple(argv), returncode=0, stdout=lie, stderr=b"", duration_s=0.0
            )

    runner = Lying()
    with pytest.raises(CollectError, match=r"t: .*never named"):
        collect(HostSpec(name="t", python=str(venv)), runner, OPTIONS)
    assert len(runner.outputs) == 1


def test_no_cache_names_nothing_and_keeps_nothing(venv: Path) -> None:
    from dataclasses import replace

    runner = Recording()
    spec = HostSpec(name="t", python=str(venv))
    for _ in range(2):
        collect(spec, runner, replace(OPTIONS, cache_dir=""))
    assert [_sent(o) for o in runner.outputs] == [True, True]
    assert not _copies()


def _document(digest: str, sent: bool) -> bytes:
    """A probe's first line whose graph's modules have `digest` (on the next line: sent)."""
    graph: dict[str, object] = {"roots": ["svc.main"], "internal": ["svc"], "modules": None}
    graph |= {"modules_digest": digest, "modules_sent": sent}
    head = {"host": "h", "schema_version": 1, "source": "probe", "startup": graph}
    return json.dumps(head).encode() + b"\n"


def test_a_host_claiming_a_graph_envsync_never_held_is_refused() -> None:
    with pytest.raises(wire.Stale):
        parse_probe_output("h", _document("0" * 32, sent=False))


def test_modules_that_do_not_match_their_digest_are_refused() -> None:
    text = json.dumps({"svc.main": {"kind": "missing"}}).encode()
    with pytest.raises(CollectError, match="startup graph's modules do not match their digest"):
        parse_probe_output("h", _document(text_digest(text + b" "), sent=True) + text + b"\n")
    assert not _copies()
