"""The host side travels as one bundle: written once per digest, reused, or run from memory.

Real interpreters, real processes: the probe and the agent are run by a venv's python
through the same command envsync sends to a host.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import threading
import zlib
from dataclasses import replace
from pathlib import Path

import pytest

import envsync.hostside
from envsync.collect import ProbeOptions, collect
from envsync.hostside import protocol
from envsync.hostside.boot import PACKAGE
from envsync.hostside.caches.folder import FACTS_CODE, facts_digest
from envsync.runner import bundle as shipping
from envsync.runner.agent import Agent
from envsync.runner.local import LocalRunner
from envsync.sources.inventory import HostSpec
from envsync.sources.snapshot import dumps_snapshot
from tests import container
from tests.figures import round_four
from tests.helpers import comparable, make_venv, make_wheel, pip_install

PKG = {"tiny/__init__.py": "import json\n", "tiny/mod.py": "X = 1\n"}
OPTIONS = ProbeOptions(roots=("tiny",), internal=("tiny",))


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("boot")
    python = make_venv(root / "venv")
    pip_install(python, make_wheel(root / "wheels", "tiny", "1.0", PKG))
    return python


def spec(python: Path) -> HostSpec:
    return HostSpec(name="t", python=str(python), watch=("tiny",))


def cached_copy() -> Path:
    return Path.home() / ".cache" / "envsync" / f"host-{shipping.bundle().digest}"


def facts(python: Path, options: ProbeOptions = OPTIONS) -> dict[str, object]:
    """A snapshot's facts, without how they were collected (nor which were parsed anew)."""
    snap = collect(spec(python), LocalRunner("t"), options)
    data = comparable(json.loads(dumps_snapshot(snap)))
    if isinstance(data.get("startup"), dict):
        data["startup"].pop("parsed")
        data["startup"].pop("cached")
    return data


def test_the_bundle_is_the_host_side_and_its_digest_keys_it() -> None:
    shipped = shipping.bundle()
    again = shipping.bundle.__wrapped__()  # built anew from the files: the same bytes
    assert again == shipped
    text = zlib.decompress(shipped.blob)
    assert hashlib.sha256(text).hexdigest()[:16] == shipped.digest
    sources = json.loads(text)
    assert envsync.hostside.__file__ is not None
    hostside = Path(envsync.hostside.__file__).parent
    assert set(sources) == {p.relative_to(hostside).as_posix() for p in hostside.rglob("*.py")}
    assert sources["boot.py"] == shipped.boot
    argv = shipping.host_argv("python3", protocol.COLLECT, ["{}"])
    # the program's arguments where they stand when it runs alone, then the bootstrap's
    assert argv[:2] == ["python3", "-c"] and argv[3] == "{}" and argv[-1] == shipped.boot
    assert json.loads(argv[4]) == {
        "program": "collect",
        "digest": shipped.digest,
        "cache": None,
    }


def test_a_first_run_writes_the_host_side_once_later_runs_reuse_its_bytecode(
    venv: Path,
) -> None:
    first = facts(venv)
    copy = cached_copy()
    compiled = sorted((copy / PACKAGE / "__pycache__").glob("collect.cpython-*.pyc"))
    assert len(compiled) == 1, "the first run compiled the probe into the cache folder"
    stamp = compiled[0].stat()
    assert facts(venv) == first
    again = compiled[0].stat()
    assert (again.st_ino, again.st_mtime_ns) == (stamp.st_ino, stamp.st_mtime_ns)
    # the probe's caches beside it, its parsed facts keyed by the code that parses them
    parsed = list(copy.parent.glob("facts-*-py*"))
    assert [p.name.split("-")[1] for p in parsed] == [facts_digest("")]
    assert len(parsed) == 1 and parsed[0].is_dir() and list(parsed[0].rglob("*.json"))
    assert not list(copy.parent.glob("*.part"))


def test_no_cache_writes_nothing_at_all(venv: Path) -> None:
    home = Path.home()
    before = sorted(home.rglob("*"))
    uncached = facts(venv, replace(OPTIONS, cache_dir=""))
    assert sorted(home.rglob("*")) == before
    assert uncached == facts(venv)  # from memory or from the copy: the same facts


def test_a_host_whose_home_is_read_only_still_works(venv: Path) -> None:
    why = container.available()
    if why:
        pytest.skip(why)
    # the whole machine read-only, as a host whose home cannot be written
    prefix = ("bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--")
    host = replace(spec(venv), exec=prefix)
    from envsync.runner import make_runner

    snap = collect(host, make_runner(host), OPTIONS)
    # the host wrote nothing; envsync (here, the same home) kept only what it was sent
    from envsync.collect import wire

    written = [p for p in (Path.home() / ".cache").rglob("*") if p.is_file()]
    assert written and all(p.parent == wire.folder() for p in written), written
    assert snap.startup is not None and snap.startup.parsed == 1  # no cache could be kept
    read_only = comparable(json.loads(dumps_snapshot(snap)))
    for key in ("parsed", "cached"):
        read_only["startup"].pop(key)
    assert read_only == facts(venv)
    # the agent too: an operation that writes nothing on the host answers
    state = Agent(host, make_runner(host)).locked("token")
    assert (state.ours, state.stale) == (False, None)


def test_concurrent_first_runs_share_one_copy(venv: Path) -> None:
    results: list[object] = []

    def run() -> None:
        try:
            results.append(facts(venv, replace(OPTIONS, roots=())))
        except BaseException as e:  # reported below
            results.append(e)

    threads = [threading.Thread(target=run) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(isinstance(r, dict) for r in results), results
    folder = cached_copy().parent
    assert [p.name for p in folder.glob("host-*")] == [cached_copy().name]
    assert not list(folder.glob("*.part"))


def run_boot(
    python: Path, program: str, args: list[str], stdin: bytes, cwd: Path
) -> subprocess.CompletedProcess[bytes]:
    argv = shipping.host_argv(str(python), program, args)
    return subprocess.run(argv, input=stdin, capture_output=True, cwd=cwd, timeout=120)


def test_the_current_directory_does_not_shadow_the_stdlib(venv: Path, tmp_path: Path) -> None:
    (tmp_path / "json.py").write_text("raise SystemExit('the json.py of the current folder')\n")
    (tmp_path / "zlib.py").write_text("raise SystemExit('the zlib.py of the current folder')\n")
    out = run_boot(venv, protocol.COLLECT, ["{}"], shipping.host_input(), tmp_path)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.partition(b"\n")[0])["source"] == "probe"  # the document line


def test_a_damaged_bundle_is_one_line(venv: Path, tmp_path: Path) -> None:
    blob = bytearray(shipping.bundle().blob)
    blob[len(blob) // 2] ^= 0xFF
    stdin = b"%d\n" % len(blob) + bytes(blob)
    out = run_boot(venv, protocol.COLLECT, ["{}"], stdin, tmp_path)
    assert out.returncode == 1
    assert out.stderr.decode().strip() == (
        "envsync: the host-side bundle arrived damaged (its digest differs)"
    )
    cut = run_boot(venv, protocol.COLLECT, ["{}"], stdin[:100], tmp_path)
    assert cut.stderr.decode().strip() == (
        "envsync: the host-side bundle did not arrive whole on stdin"
    )
    assert not cached_copy().exists()


def test_the_host_side_needs_nothing_of_envsync_on_the_host(venv: Path, tmp_path: Path) -> None:
    """The venv has no envsync: the import check runs from the bundle alone."""
    bare = subprocess.run([str(venv), "-c", "import envsync"], capture_output=True, cwd=tmp_path)
    assert bare.returncode == 1
    imported = run_boot(
        venv,
        protocol.IMPORT_CHECK,
        [json.dumps(["tiny", "tiny.gone"])],
        shipping.host_input(b"n0nce\n"),
        tmp_path,
    )
    assert imported.returncode == 0, imported.stderr
    line = imported.stdout.decode().strip().splitlines()[-1]
    outcome = json.loads(line[len(protocol.IMPORT_CHECK_MARKER + "n0nce ") :])
    assert [(o["module"], o["ok"]) for o in outcome] == [("tiny", True), ("tiny.gone", False)]
    assert outcome[1]["exception"] == "ModuleNotFoundError"
    assert os.path.isdir(cached_copy() / PACKAGE / "agent")


def upgraded(module: str) -> shipping.Bundle:
    """The bundle of an envsync whose host side differs from this one in `module` only."""
    files = json.loads(zlib.decompress(shipping.bundle.__wrapped__().blob))
    files[module] += "\n# the next release\n"
    text = json.dumps(files, sort_keys=True, separators=(",", ":")).encode()
    digest = hashlib.sha256(text).hexdigest()[:16]
    return shipping.Bundle(digest=digest, blob=zlib.compress(text, 1), boot=files["boot.py"])


def _parsed(python: Path) -> tuple[int, int]:
    graph = collect(spec(python), LocalRunner("t"), OPTIONS).startup
    assert graph is not None
    return graph.parsed, graph.cached


@pytest.mark.parametrize("module", ["collect.py", "graph/analyse.py"])
def test_an_upgrade_keeps_the_parsed_facts_unless_it_changes_the_parser(
    venv: Path, monkeypatch: pytest.MonkeyPatch, module: str
) -> None:
    first = _parsed(venv)
    assert sum(first) == 1  # tiny, parsed now or on an earlier test
    new = upgraded(module)
    monkeypatch.setattr(shipping, "bundle", lambda: new)
    keeps = module[:-3] not in FACTS_CODE
    assert _parsed(venv) == ((0, 1) if keeps else (1, 0))
    copies = list((Path.home() / ".cache" / "envsync").glob("host-*"))
    assert len(copies) == 2  # the new host side beside the old one


CLEAR_ITEM = "5 a clear or prune during a running diff: the --no-cache verdict"
# What the collect program does to the cache folder once it runs (its package imported),
# before it imports the rest of the host side: what another envsync command on the same
# machine may do at that moment.
DURING = {
    "cache clear": "import shutil\n    shutil.rmtree(cache)\n",
    "cache prune --max-size 0": (
        "from envsync_host.caches.store import prune\n    prune(cache, 0)\n"
    ),
    "another run moved the copy aside": (
        "from envsync_host.boot import discard\n"
        "    discard(os.path.join(cache, 'host-' + digest))\n"
    ),
}


def changed_during_the_run(what: str) -> shipping.Bundle:
    """The bundle of this host side whose collect program does `what` to its cache folder
    as it starts (the folder the package was imported from: gone while it runs)."""
    files = json.loads(zlib.decompress(shipping.bundle.__wrapped__().blob))
    head = "def main(args: list[str], digest: str, cache: str | None) -> int:\n"
    assert head in files["collect.py"]
    body = "    import os\n\n    if os.environ.get('CHANGE_DURING') and cache:\n        " + DURING[
        what
    ].replace("\n    ", "\n        ")
    files["collect.py"] = files["collect.py"].replace(head, head + body)
    text = json.dumps(files, sort_keys=True, separators=(",", ":")).encode()
    digest = hashlib.sha256(text).hexdigest()[:16]
    return shipping.Bundle(digest=digest, blob=zlib.compress(text, 1), boot=files["boot.py"])


@pytest.mark.parametrize("warm", [False, True], ids=["first run", "warm copy"])
@pytest.mark.parametrize("what", sorted(DURING))
def test_a_copy_removed_while_the_program_runs_takes_nothing_from_it(
    venv: Path, monkeypatch: pytest.MonkeyPatch, what: str, warm: bool
) -> None:
    """`envsync cache clear` (or a prune, or another run that found the copy damaged) while
    a probe runs on this machine: what the probe imports after it is already in memory, so
    it answers as a --no-cache run does (it failed with `No module named
    'envsync_host.native.demangle'`, exit 3, 'probe failed', blaming the host)."""
    truth = facts(venv, replace(OPTIONS, cache_dir=""))
    changed = changed_during_the_run(what)
    monkeypatch.setattr(shipping, "bundle", lambda: changed)
    if warm:  # the copy written and compiled by an earlier run
        assert facts(venv) == truth
        assert list(cached_copy().glob(f"{PACKAGE}/__pycache__/collect.*.pyc"))
    monkeypatch.setenv("CHANGE_DURING", "1")
    assert facts(venv) == truth
    round_four(CLEAR_ITEM)
