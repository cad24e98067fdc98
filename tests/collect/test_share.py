"""Facts shared across hosts: a host parses only content no host has shown envsync before.

Real venvs of the real rich wheel, real probes. Each host is an exec host whose prefix
(`env XDG_CACHE_HOME=...`) gives it a cache folder of its own, so that hosts share facts
only through envsync: what one sent, envsync gives the next. The counts of parsed modules
are the graphs' own.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from envsync.collect import ProbeOptions, collect, share, wire
from envsync.hostside.shared import SEAL_SIZE
from envsync.model.environment import Snapshot
from envsync.runner import Runners
from envsync.runner.local import LocalRunner
from envsync.sources.inventory import HostSpec, Inventory
from envsync.sources.session import Session
from tests.figures import round_four
from tests.helpers import OLD_NS, date_back, fetch, make_venv, pip_install, run_cli, site_packages

OPTIONS = ProbeOptions(roots=("svc.main",), internal=("svc",))
NONE = ProbeOptions(roots=OPTIONS.roots, internal=OPTIONS.internal, cache_dir="")
pytestmark = pytest.mark.slow


def _venv(
    root: Path,
    wheel_cache: Path,
    *,
    patch: bool = False,
    wheel: str = "rich==13.7.1",
    main: str = "import rich.console\nimport rich.table\n",
) -> Path:
    python = make_venv(root)
    pip_install(python, fetch(wheel_cache, wheel))
    sp = site_packages(python)
    (sp / "svc").mkdir()
    (sp / "svc" / "__init__.py").write_text("")
    (sp / "svc" / "main.py").write_text(main)
    if patch:  # a local patch: its content is this host's own
        table = sp / "rich" / "table.py"
        table.write_text(table.read_text() + "\n# a local patch\n")
    date_back(sp)
    return python


def _host(name: str, python: Path, home: Path, trust: str | None = "fleet") -> HostSpec:
    """A host with a cache folder of its own (as a real host has its own disk), of the
    trust `trust` (hosts of one trust are given each other's facts)."""
    return HostSpec(
        name=name, python=str(python), exec=("env", f"XDG_CACHE_HOME={home}"), trust=trust
    )


def _collect(spec: HostSpec, options: ProbeOptions = OPTIONS) -> Snapshot:
    return collect(spec, Runners()(spec), options)


def _parsed(snap: Snapshot) -> int:
    assert snap.startup is not None
    return snap.startup.parsed


def _verdict(snap: Snapshot) -> dict[str, tuple[str, str | None, tuple[str, ...] | None]]:
    """What a verdict reads of a graph: each module's kind, content and names."""
    assert snap.startup is not None
    return {name: (m.kind, m.sha256, m.defines) for name, m in sorted(snap.startup.modules.items())}


@pytest.fixture
def venvs(tmp_path: Path, wheel_cache: Path) -> tuple[Path, Path]:
    return _venv(tmp_path / "ref", wheel_cache), _venv(tmp_path / "tgt", wheel_cache, patch=True)


def test_a_target_against_a_warm_reference_parses_only_what_differs(
    tmp_path: Path, venvs: tuple[Path, Path]
) -> None:
    ref, tgt = venvs
    first = _collect(_host("ref", ref, tmp_path / "ref-cache"))
    assert _parsed(first) > 20  # rich's modules that startup reaches, and svc's
    target = _collect(_host("tgt", tgt, tmp_path / "tgt-cache"))
    assert _parsed(target) == 1  # the patched rich/table.py, no other file
    # the same verdict as a probe that shares nothing and keeps nothing
    alone = _collect(
        _host("tgt", tgt, tmp_path / "none"),
        ProbeOptions(roots=OPTIONS.roots, internal=OPTIONS.internal, cache_dir=""),
    )
    assert _parsed(alone) == _parsed(first)
    assert _verdict(target) == _verdict(alone)
    # the target's store kept what it was given: a second walk parses nothing
    for path in (tmp_path / "tgt-cache").rglob("graph-*"):
        path.unlink()
    again = _collect(_host("tgt", tgt, tmp_path / "tgt-cache"))
    assert _parsed(again) == 0


@pytest.mark.parametrize("trusts", [(None, None), ("fleet", "lab"), (None, "fleet")])
def test_a_host_is_given_no_facts_of_a_host_outside_its_trust(
    tmp_path: Path, venvs: tuple[Path, Path], trusts: tuple[str | None, str | None]
) -> None:
    """A host's facts decide that host's verdicts only, unless the inventory says the
    hosts share a trust: one whose interpreter lies in what it sends changes nothing else."""
    ref, tgt = venvs
    first = _collect(_host("ref", ref, tmp_path / "ref-cache", trusts[0]))
    target_spec = _host("tgt", tgt, tmp_path / "tgt-cache", trusts[1])
    offered = share.offer(target_spec, None, OPTIONS.roots, OPTIONS.internal, None)
    assert offered is not None and offered.give == ()
    target = _collect(target_spec)
    assert _parsed(target) == _parsed(first)  # every file of its own: nothing given
    round_four("3 packs never given outside their trust", 1)


def _script_venv(root: Path, wheel_cache: Path) -> Path:
    """A venv with pygments (its console script, bin/pygmentize, names this venv's python,
    and so does its row in pygments' RECORD) and a service that imports pygments."""
    main = "import pygments.lexers.python\nimport pygments.token\n"
    return _venv(root, wheel_cache, wheel="pygments==2.21.0", main=main)


def test_a_target_in_another_venv_takes_the_facts_of_its_files_alike(
    tmp_path: Path, wheel_cache: Path
) -> None:
    """Two venvs of one pygments: their RECORDs differ in the script's row only. The
    target is given the reference's pack for the module files alike, entry by entry, and
    parses none of them (it parsed every one when the pack needed the same RECORD)."""
    ref, tgt = (
        _script_venv(tmp_path / "ref", wheel_cache),
        _script_venv(tmp_path / "tgt", wheel_cache),
    )
    records = [
        next(site_packages(p).glob("pygments-*.dist-info")).joinpath("RECORD").read_text()
        for p in (ref, tgt)
    ]
    assert records[0] != records[1]
    differ = set(records[0].splitlines()) ^ set(records[1].splitlines())
    assert {row.split(",")[0].rsplit("/", 1)[-1] for row in differ} == {"pygmentize"}
    first = _collect(_host("ref", ref, tmp_path / "ref-cache"))
    assert _parsed(first) > 5  # pygments' modules that startup reaches, and svc's
    target = _collect(_host("tgt", tgt, tmp_path / "tgt-cache"))
    assert _parsed(target) == 0
    alone = _collect(_host("tgt", tgt, tmp_path / "none"), NONE)
    assert _verdict(target) == _verdict(alone)


def _inventory(hosts: dict[str, HostSpec]) -> Inventory:
    return Inventory(path=None, hosts=hosts)


def test_a_fleet_of_one_image_parses_each_file_once(tmp_path: Path, wheel_cache: Path) -> None:
    image = _venv(tmp_path / "image", wheel_cache)
    hosts = {f"node{n}": _host(f"node{n}", image, tmp_path / f"node{n}") for n in range(4)}
    with Session(inventory=_inventory(hosts), runners=Runners(), probe=OPTIONS, jobs=4) as s:
        snaps = s.collect_all([(name, None) for name in hosts])
    parsed = [_parsed(snap) for snap in snaps]
    assert sorted(parsed)[:3] == [0, 0, 0]  # the first wave's node parsed, the rest did not
    assert max(parsed) > 20
    assert len({json.dumps(_verdict(snap)) for snap in snaps}) == 1
    # each node's own store now holds the facts (the packs it used, kept whole): envsync
    # is not needed for the next walk
    for n in range(4):
        assert list((tmp_path / f"node{n}" / "envsync").glob("facts-*/*/*.*"))
    shutil.rmtree(wire.folder())  # envsync's own cache gone: no pack to give
    for graph in (tmp_path / "node3" / "envsync").glob("graph-*.json"):
        graph.unlink()  # the node walks its graph again
    assert _parsed(_collect(hosts["node3"])) == 0


def test_new_nodes_of_one_image_against_a_known_reference_parse_what_differs_once(
    tmp_path: Path, wheel_cache: Path
) -> None:
    reference = _venv(tmp_path / "reference", wheel_cache)
    image = _venv(tmp_path / "image", wheel_cache, patch=True)  # one file the reference lacks
    hosts = {"ref": _host("ref", reference, tmp_path / "ref")}
    hosts |= {f"node{n}": _host(f"node{n}", image, tmp_path / f"node{n}") for n in range(3)}
    with Session(inventory=_inventory(hosts), runners=Runners(), probe=OPTIONS, jobs=4) as s:
        s.collect_all([("ref", None)])  # known now: its command's packs are envsync's
    with Session(inventory=_inventory(hosts), runners=Runners(), probe=OPTIONS, jobs=4) as s:
        snaps = s.collect_all([(f"node{n}", None) for n in range(3)])
    # the patched file is parsed on one node; the others are given its facts
    assert sorted(_parsed(snap) for snap in snaps) == [0, 0, 1]


LAZY_INIT = """\
from typing import TYPE_CHECKING
from .._lazy import LazyModule, define_import_structure
if TYPE_CHECKING:
    from .processing import *
else:
    import sys
    sys.modules[__name__] = LazyModule(__name__, define_import_structure(__file__))
"""


def _entry_keys(store: Path) -> list[str]:
    """The keys of a facts store's entries (one file each; not its kept packs)."""
    return [json.loads(p.read_bytes().partition(b"\n")[0])[0] for p in store.glob("*/*.json")]


def test_a_text_search_one_node_ran_is_not_run_again_on_another(
    tmp_path: Path, wheel_cache: Path
) -> None:
    from tests.helpers import make_wheel

    image = _venv(tmp_path / "image", wheel_cache)
    lazy = make_wheel(
        tmp_path / "w",
        "lazyt",
        "1.0",
        {
            "lazyt/__init__.py": "",
            "lazyt/_lazy.py": "LazyModule = define_import_structure = None\n",
            "lazyt/vision/__init__.py": LAZY_INIT,
            "lazyt/vision/processing.py": "def is_valid():\n    pass\n",
            "lazyt/vision/other.py": "def unrelated():\n    pass\n",
        },
    )
    pip_install(image, lazy)
    main = site_packages(image) / "svc" / "main.py"
    main.write_text(main.read_text() + "from lazyt.vision import is_valid\n")
    for path in [main.parent, *main.parent.iterdir()]:
        os.utime(path, ns=(OLD_NS, OLD_NS))
    hosts = {f"node{n}": _host(f"node{n}", image, tmp_path / f"node{n}") for n in range(2)}
    with Session(inventory=_inventory(hosts), runners=Runners(), probe=OPTIONS, jobs=2) as s:
        snaps = s.collect_all([(name, None) for name in hosts])
    assert snaps[0].startup is not None and "lazyt.vision.processing" in snaps[0].startup.modules
    assert sorted(_parsed(snap) for snap in snaps)[0] == 0
    stores = {n: next((tmp_path / f"node{n}" / "envsync").glob("facts-*")) for n in range(2)}
    searched = [
        n for n in range(2) if any(k.startswith("mentions:") for k in _entry_keys(stores[n]))
    ]
    assert len(searched) == 1  # the first node searched the text; the other was given it
    other = stores[1 - searched[0]]
    packs = (other / "packs").glob("*.pack")  # each sealed (hostside/shared.py)
    ids = [json.loads(p.read_bytes()[:-SEAL_SIZE])["id"][0] for p in packs]
    assert "mentions" in ids


def test_two_new_hosts_collected_together_parse_each_file_once(
    tmp_path: Path, venvs: tuple[Path, Path]
) -> None:
    ref, tgt = venvs
    hosts = {"ref": _host("ref", ref, tmp_path / "a"), "tgt": _host("tgt", tgt, tmp_path / "b")}
    with Session(inventory=_inventory(hosts), runners=Runners(), probe=OPTIONS) as s:
        snaps = s.collect_all([("ref", None), ("tgt", None)])
    first, second = (_parsed(snap) for snap in snaps)
    assert first > 20 and second == 1  # in all: every file once, and the patched one


def _packs() -> list[Path]:
    return sorted(wire.folder().glob("pack-*.json"))


def _rich_pack() -> Path:
    for path in _packs():
        pack = json.loads(path.read_bytes())
        if pack["id"][:2] == ["dist", "rich"]:
            return path
    raise AssertionError("no pack of rich")


def _rewrite(path: Path, pack: dict[str, object]) -> None:
    """A pack changed and filed under the digest of its new text (a host that lies)."""
    from envsync.hostside.shared import text_digest

    text = json.dumps(pack, sort_keys=True, separators=(",", ":")).encode()
    path.unlink()
    new = path.with_name(f"pack-{text_digest(text)}.json")
    new.write_bytes(text)
    command = next(wire.folder().glob("packs-command-*.json"))
    record = share._read(command)
    assert record is not None
    old = path.name[len("pack-") : -len(".json")]
    index = [text_digest(text) if d == old else d for d in record["index"]]
    share._write(command, {"index": index})  # as envsync keeps what a host sent


@pytest.mark.parametrize("tamper", ["text", "entry"])
def test_a_tampered_pack_is_refused_and_the_verdict_is_unchanged(
    tmp_path: Path, venvs: tuple[Path, Path], tamper: str
) -> None:
    ref, tgt = venvs
    first = _collect(_host("ref", ref, tmp_path / "ref-cache"))
    path = _rich_pack()
    pack = json.loads(path.read_bytes())
    console = next(k for k in pack["entries"] if k.split(":")[1] == "rich.console")
    if tamper == "text":  # changed where it lies: its text no longer matches its digest
        lied = dict(pack["entries"][console], defines=["nothing"])
        pack["entries"][console] = lied
        path.write_bytes(json.dumps(pack).encode())
    else:  # facts filed under a content the host's file does not have
        facts = pack["entries"].pop(console)
        pack["entries"]["0" * 64 + console[64:]] = dict(facts, defines=["nothing"])
        _rewrite(path, pack)
    spec = _host("tgt", tgt, tmp_path / "tgt-cache")
    notes: list[str] = []
    inventory = _inventory({"tgt": spec})
    with Session(inventory=inventory, runners=Runners(), probe=OPTIONS, notes=notes.append) as s:
        target = s.collect_one("tgt")
    alone = collect(
        spec,
        LocalRunner("tgt"),
        ProbeOptions(roots=OPTIONS.roots, internal=OPTIONS.internal, cache_dir=""),
    )
    assert _verdict(target) == _verdict(alone)
    assert target.startup is not None and target.startup.modules["rich.console"].defines
    assert "nothing" not in (target.startup.modules["rich.console"].defines or ())
    if tamper == "entry":  # the host refused it, and said so
        assert any("refused" in n and "RECORD" in n for n in notes), notes
        assert _parsed(target) > 20  # rich was parsed: its pack was not used
    else:  # envsync found its own copy damaged: removed, never given
        assert not path.exists()
    assert _parsed(first) > 20


def test_a_record_envsync_did_not_write_gives_nothing(
    tmp_path: Path, venvs: tuple[Path, Path]
) -> None:
    """A record planted in the cache folder (or restored from another machine's) carries
    no HMAC of this machine's key: no pack it names is given."""
    ref, tgt = venvs
    _collect(_host("ref", ref, tmp_path / "ref-cache"))
    command = next(wire.folder().glob("packs-command-*.json"))
    body = share._read(command)
    assert body is not None and body["index"]
    command.write_text(json.dumps({"body": body, "mac": "0" * 64}))
    target = _collect(_host("tgt", tgt, tmp_path / "tgt-cache"))
    assert _parsed(target) > 20


def test_no_cache_shares_nothing(tmp_path: Path, venvs: tuple[Path, Path]) -> None:
    ref, _ = venvs
    spec = _host("ref", ref, tmp_path / "ref-cache")
    none = ProbeOptions(roots=OPTIONS.roots, internal=OPTIONS.internal, cache_dir="")
    assert share.offer(spec, none.cache_dir, none.roots, none.internal, none.main) is None
    _collect(spec, none)
    assert _packs() == []


def test_packs_are_shown_by_cache_info_and_pruned_under_its_cap(
    tmp_path: Path,
    venvs: tuple[Path, Path],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ref, tgt = venvs
    _collect(_host("ref", ref, tmp_path / "ref-cache"))
    code, out, _ = run_cli(capsys, "cache", "info", "--format", "json")
    assert code == 0
    received = next(c for c in json.loads(out)["caches"] if c["name"] == "received")
    kinds = {k["kind"]: k for k in received["kinds"]}
    assert kinds["pack"]["entries"] == len(_packs()) > 1 and "packs" in kinds
    # under a cap smaller than the packs, the least recently used go; what is gone is
    # parsed again, with the same facts
    monkeypatch.setenv("ENVSYNC_CACHE_MB", "0.01")
    code, _, _ = run_cli(capsys, "cache", "prune")
    assert code == 0
    assert sum(p.stat().st_size for p in wire.folder().rglob("*") if p.is_file()) <= 10486
    target = _collect(_host("tgt", tgt, tmp_path / "tgt-cache"))
    assert _parsed(target) > 20
    alone = _collect(
        _host("tgt", tgt, tmp_path / "none"),
        ProbeOptions(roots=OPTIONS.roots, internal=OPTIONS.internal, cache_dir=""),
    )
    assert _verdict(target) == _verdict(alone)


def test_a_warm_host_envsync_has_no_record_of_sends_its_packs(
    tmp_path: Path, venvs: tuple[Path, Path]
) -> None:
    """envsync's cache cleared, the reference's own still warm: its next collection walks
    its graph from its facts (nothing parsed) to send them, and a new target is given them."""
    import shutil

    ref, tgt = venvs
    reference = _host("ref", ref, tmp_path / "ref-cache")
    _collect(reference)
    shutil.rmtree(wire.folder())
    again = _collect(reference)
    assert _parsed(again) == 0 and _packs()
    assert _parsed(_collect(_host("tgt", tgt, tmp_path / "tgt-cache"))) == 1


def test_a_host_whose_cache_was_removed_is_given_the_packs_again(
    tmp_path: Path, venvs: tuple[Path, Path]
) -> None:
    """envsync's record says what the target holds; its cache folder removed (a new disk,
    a cleared home), its facts store is another: it says so and is given every pack."""
    import shutil

    ref, tgt = venvs
    _collect(_host("ref", ref, tmp_path / "ref-cache"))
    target = _host("tgt", tgt, tmp_path / "tgt-cache")
    assert _parsed(_collect(target)) == 1
    shutil.rmtree(tmp_path / "tgt-cache")
    again = _collect(target)
    assert _parsed(again) == 0  # its own patched file's facts too: it sent them before
    assert _verdict(again) == _verdict(_collect(_host("tgt", tgt, tmp_path / "x"), NONE))
