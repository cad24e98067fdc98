"""The views of a snapshot envsync hashes: one module, each view once per snapshot, each
changing with what it covers and only with that."""

from __future__ import annotations

import ast
import hashlib
import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from envsync.collect import Digested, LazyModules, identity, parse_probe_output, wire
from envsync.collect.importcheck import NO_IMPORT_CHECK
from envsync.compare import targets as compare
from envsync.hostside.shared import text_digest
from envsync.model.changes import view
from envsync.model.codec import from_data
from envsync.model.environment import Crash, ModuleFacts, Snapshot, StartupGraph, Unavailable
from tests import fleet_sim
from tests.helpers import REPO

DATA = Path(__file__).resolve().parent.parent / "data" / "snapshots" / "ct129.json"
VIEWS: dict[str, Callable[[Snapshot], str | None]] = {
    "compared": identity.compared,
    "environment": identity.environment,
    "plan_target": identity.plan_target,
    "verdict_input": identity.verdict_input,
}


@pytest.fixture(scope="module")
def base() -> Snapshot:
    return from_data(Snapshot, json.loads(DATA.read_text()))


def _graph(sha: str = "a" * 64, file: str = "/venv/app/__init__.py") -> StartupGraph:
    raw = {"app": {"kind": "source", "file": file, "sha256": sha}}
    text = json.dumps(raw).encode()
    modules = LazyModules(raw, "h.startup.modules", digest=text_digest(text))
    return StartupGraph(roots=("app",), internal=("app",), modules=modules)


def _hashes_a_snapshot(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """A function that takes a Snapshot and calls a hash (hashlib, hmac, text_digest)."""
    takes = any(
        a.annotation is not None and "Snapshot" in ast.unparse(a.annotation)
        for a in [*fn.args.args, *fn.args.kwonlyargs]
    )
    hashes = any(
        isinstance(node, ast.Call)
        and any(word in ast.unparse(node.func) for word in ("hashlib.", "hmac.", "text_digest"))
        for node in ast.walk(fn)
    )
    return takes and hashes


def test_no_module_but_identity_hashes_a_snapshot() -> None:
    offenders = []
    for path in sorted((REPO / "envsync").rglob("*.py")):
        if path.name == "identity.py" or "hostside" in path.parts:
            continue
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and _hashes_a_snapshot(
                node
            ):
                offenders.append(f"{path.relative_to(REPO)}:{node.lineno} {node.name}")
    assert offenders == []
    # and the four old hashes are gone
    text = "\n".join(p.read_text() for p in (REPO / "envsync").rglob("*.py"))
    for old in ("def environment_digest", "def snapshot_key", "def fingerprint(snapshot"):
        assert old not in text
    assert "def digest(snapshot" not in (REPO / "envsync" / "sources" / "states.py").read_text()


def test_the_tree_check_can_fail() -> None:
    source = "def h(s: Snapshot) -> str:\n    return hashlib.sha256(repr(s).encode()).hexdigest()\n"
    fn = ast.parse(source).body[0]
    assert isinstance(fn, ast.FunctionDef) and _hashes_a_snapshot(fn)


def test_each_view_is_computed_once_per_snapshot(base: Snapshot) -> None:
    snap = replace(base, startup=_graph())
    before = dict(identity.COMPUTED)
    first = {name: view_of(snap) for name, view_of in VIEWS.items()}
    again = {name: view_of(snap) for name, view_of in VIEWS.items()}
    assert first == again
    assert {n: identity.COMPUTED[n] - before.get(n, 0) for n in VIEWS} == dict.fromkeys(VIEWS, 1)
    other = replace(snap, host="other")  # another snapshot: its own views, once
    for view_of in VIEWS.values():
        view_of(other)
        view_of(other)
    assert {n: identity.COMPUTED[n] - before.get(n, 0) for n in VIEWS} == dict.fromkeys(VIEWS, 2)


def test_a_fleet_computes_each_hosts_environment_once(base: Snapshot) -> None:
    snapshots = fleet_sim.fleet(base, 60, 3)
    before = identity.COMPUTED["environment"]
    with fleet_sim.session(snapshots) as session:
        among = compare.targets(session, list(snapshots))
        result = compare._compare_each(session, among, reference=base, import_check=NO_IMPORT_CHECK)
        for target, name in zip(among, snapshots, strict=True):
            compare.class_key(target, snapshots[name])  # asked again: kept
    assert len(result.classes) == 3
    assert identity.COMPUTED["environment"] - before == len({id(s) for s in snapshots.values()})


def _edit_module(s: Snapshot) -> Snapshot:
    return replace(s, startup=_graph(sha="b" * 64))


def _move_module(s: Snapshot) -> Snapshot:
    return replace(s, startup=_graph(file="/other/venv/app/__init__.py"))


def _edit_file(s: Snapshot) -> Snapshot:
    dists = tuple(
        replace(d, files={**d.files, next(iter(d.files)): "sha256=changed"}) if d.files else d
        for d in s.distributions
    )
    return replace(s, distributions=dists)


def _bump(s: Snapshot) -> Snapshot:
    return fleet_sim.variant(s, 2)


def _flags(s: Snapshot) -> Snapshot:
    return replace(s, service_flags={"--grammar-backend": "none"})


def _crash(s: Snapshot) -> Snapshot:
    return replace(s, crash=Crash(exception="ImportError: x"))


def _gpu(s: Snapshot) -> Snapshot:
    return replace(s, gpu=Unavailable(reason="nvidia-smi not found"))


def _when(s: Snapshot) -> Snapshot:
    return replace(s, collected_at="2030-01-01T00:00:00Z", duration_s=99.0)


def _reinstalled(s: Snapshot) -> Snapshot:
    """Every package installed again as it was: only their install times differ."""
    return replace(
        s,
        distributions=tuple(
            replace(d, installed_at="2030-01-01T00:00:00Z") for d in s.distributions
        ),
    )


def _name(s: Snapshot) -> Snapshot:
    return replace(s, host="renamed")


# (change, the views it must change); every other view must stay
CHANGES = [
    (_edit_module, {"environment", "verdict_input"}),
    (_move_module, {"verdict_input"}),  # a path: the classifier reads modules by content
    (_edit_file, {"compared", "environment", "plan_target", "verdict_input"}),
    (_bump, {"compared", "environment", "plan_target", "verdict_input"}),
    (_flags, {"environment", "plan_target", "verdict_input"}),
    (_crash, {"environment", "verdict_input"}),
    (_gpu, {"compared", "environment", "verdict_input"}),
    (_when, set()),
    (_reinstalled, set()),  # a package reinstalled as it was: no verdict reads when
    (_name, {"verdict_input"}),  # a report names its host
]


@pytest.mark.parametrize(("change", "changes"), CHANGES, ids=[c.__name__ for c, _ in CHANGES])
def test_a_view_changes_with_what_it_covers_and_only_that(
    base: Snapshot, change: Callable[[Snapshot], Snapshot], changes: set[str]
) -> None:
    snap = replace(base, startup=_graph())
    changed = change(snap)
    moved = {name for name, view_of in VIEWS.items() if view_of(changed) != view_of(snap)}
    assert moved == changes


def test_recorded_states_and_saved_plans_keep_their_digests(base: Snapshot) -> None:
    """Spelled as before this module: a host recorded, or planned, by an older envsync is
    still known as the same."""
    text = json.dumps(view(base), sort_keys=True, separators=(",", ":"), default=str)
    assert identity.compared(base) == hashlib.sha256(text.encode()).hexdigest()
    assert not isinstance(base.interpreter, Unavailable)
    data = {
        "distributions": {
            d.name: [d.version, d.location, dict(d.files) if d.files is not None else None]
            for d in base.distributions
        },
        "python": [base.interpreter.executable, base.interpreter.version],
        "service_flags": {},
    }
    old = hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()
    assert identity.plan_target(base) == old


def test_a_graph_is_decoded_once_per_text_then_never_to_hash_it(base: Snapshot) -> None:
    raw = {"app": {"kind": "source", "file": "/v/app.py", "sha256": "c" * 64}}
    text = json.dumps(raw).encode()
    digest = text_digest(text)
    first = replace(
        base,
        startup=StartupGraph(
            roots=("app",),
            internal=(),
            modules=Digested(
                {"app": ModuleFacts(kind="source", file="/v/app.py", sha256="c" * 64)}, digest
            ),
        ),
    )
    expected = identity.environment(first)
    identity._ROWS.clear()  # a new process: the sealed copy in the cache folder answers
    lazy = LazyModules(None, "h", text=text, digest=digest)
    later = replace(base, startup=StartupGraph(roots=("app",), internal=(), modules=lazy))
    assert identity.environment(later) == expected
    assert lazy._raw_data is None  # its text was never parsed


def test_a_forged_kept_rows_digest_is_dropped(base: Snapshot) -> None:
    raw = {"app": {"kind": "source", "file": "/v/app.py", "sha256": "d" * 64}}
    text = json.dumps(raw).encode()
    digest = text_digest(text)

    def snap() -> Snapshot:
        modules = LazyModules(None, "h", text=text, digest=digest)
        return replace(base, startup=StartupGraph(roots=("app",), internal=(), modules=modules))

    expected = identity.environment(snap())
    path = wire.folder() / f"rows-{digest}.json"
    entry = json.loads(path.read_text())
    path.write_text(json.dumps({"rows": "0" * 64, "mac": entry["mac"]}))  # another class's
    identity._ROWS.clear()
    assert identity.environment(snap()) == expected
    assert json.loads(path.read_text())["rows"] == entry["rows"]  # derived and kept again


def test_a_verdict_names_the_parts_a_host_sent_by_their_digests(base: Snapshot) -> None:
    dists = json.dumps(
        [json.loads(json.dumps(d)) for d in json.loads(DATA.read_text())["distributions"]]
    ).encode()
    head = {k: v for k, v in json.loads(DATA.read_text()).items() if k != "distributions"}
    head["distributions"] = []
    head["parts"] = {"distributions": [text_digest(dists), True]}
    out = json.dumps(head).encode() + b"\n" + dists + b"\n"
    one = parse_probe_output("ct129", out)
    two = parse_probe_output("ct129", out)
    assert one.distributions is two.distributions  # decoded once, shared
    assert wire.digest_of("distributions", one.distributions) == text_digest(dists)
    assert identity.verdict_input(one) == identity.verdict_input(two)
    assert identity.verdict_input(one) != identity.verdict_input(_bump(one))
