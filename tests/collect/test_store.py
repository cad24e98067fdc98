"""Facts known by their content: a change costs the files that changed.

Real venvs with the real rich wheel; the probe runs for real. Every file is dated back so
that the host's caches may hold it (nothing touched in the last seconds is trusted by its
stat), and the counts of parsed and cached modules are the graph's own.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from envsync.collect import ProbeOptions, collect
from envsync.hostside.caches import store as host_store
from envsync.model.environment import StartupGraph
from envsync.runner.local import LocalRunner
from envsync.sources.inventory import HostSpec
from tests.helpers import OLD_NS, date_back, fetch, make_venv, pip_install, site_packages

OPTIONS = ProbeOptions(roots=("svc.main",), internal=("svc",))
pytestmark = pytest.mark.slow


def _rich_venv(root: Path, wheel_cache: Path) -> Path:
    python = make_venv(root)
    pip_install(python, fetch(wheel_cache, "rich==13.7.1"))
    sp = site_packages(python)
    (sp / "svc").mkdir()
    (sp / "svc" / "__init__.py").write_text("")
    (sp / "svc" / "main.py").write_text("import rich.console\nimport rich.table\n")
    date_back(sp)
    return python


def _graph(python: Path, options: ProbeOptions = OPTIONS) -> StartupGraph:
    spec = HostSpec(name="t", python=str(python))
    graph = collect(spec, LocalRunner("t"), options).startup
    assert graph is not None
    return graph


def _facts_folder() -> Path:
    found = list((Path.home() / ".cache" / "envsync").glob("facts-*"))
    assert len(found) == 1, found
    return found[0]


def _is_facts(entry: Path) -> bool:
    """An entry of a module's facts (not the digest of a pack of them, share.py)."""
    return not json.loads(entry.read_bytes().partition(b"\n")[0])[0].startswith("pack:")


@pytest.fixture
def rich_venv(tmp_path: Path, wheel_cache: Path) -> Path:
    return _rich_venv(tmp_path / "venv", wheel_cache)


def test_one_edited_file_is_the_only_one_parsed_again(rich_venv: Path) -> None:
    first = _graph(rich_venv)
    read = first.parsed + first.cached
    assert first.parsed > 20 and first.cached == 0  # rich's modules that startup reaches
    table = site_packages(rich_venv) / "rich" / "table.py"
    assert first.modules["rich.table"].kind == "source"
    table.write_text(table.read_text() + "\n# a local patch\n")
    os.utime(table, ns=(OLD_NS, OLD_NS + 10**9))
    second = _graph(rich_venv)
    assert (second.parsed, second.cached) == (1, read - 1)
    assert second.modules["rich.table"].sha256 != first.modules["rich.table"].sha256
    # putting it back costs nothing: its content's facts are known
    table.write_text(table.read_text().replace("\n# a local patch\n", ""))
    os.utime(table, ns=(OLD_NS, OLD_NS + 2 * 10**9))
    third = _graph(rich_venv)
    assert (third.parsed, third.cached) == (0, read)
    assert third.modules == first.modules


def test_two_environments_of_the_same_wheels_parse_each_file_once(
    tmp_path: Path, wheel_cache: Path
) -> None:
    one = _rich_venv(tmp_path / "one", wheel_cache)
    two = _rich_venv(tmp_path / "two", wheel_cache)
    first = _graph(one)
    second = _graph(two)
    assert first.parsed > 20
    assert second.parsed == 0 and second.cached == first.parsed + first.cached
    assert sorted(second.modules) == sorted(first.modules)


def test_a_damaged_entry_is_dropped_and_learned_again(rich_venv: Path) -> None:
    first = _graph(rich_venv, OPTIONS)
    entries = [p for p in sorted(_facts_folder().rglob("*.json")) if _is_facts(p)]
    assert len(entries) >= first.parsed
    for path in entries[:5]:  # cut short, and another entry's bytes under this name
        path.write_bytes(path.read_bytes()[:-7])
    entries[5].write_bytes(entries[6].read_bytes())
    # another graph key (another root), so that the whole graph is not reused as it is
    again = _graph(rich_venv, ProbeOptions(roots=("svc.main", "rich.text"), internal=("svc",)))
    assert 6 <= again.parsed < first.parsed
    for name, info in first.modules.items():
        assert again.modules[name].defines == info.defines, name


def test_a_planted_entry_of_the_wrong_shape_is_dropped_and_learned_again(
    rich_venv: Path,
) -> None:
    # An entry whose text matches its digest (anyone who can write the folder can make
    # one) but whose facts are not facts: never used, never a stop of the probe.
    first = _graph(rich_venv, OPTIONS)
    entries = [p for p in sorted(_facts_folder().rglob("*.json")) if _is_facts(p)]
    for path, bad in zip(entries[:4], ({}, {"imports": 1}, [], {"imports": [{}]}), strict=True):
        key = json.loads(path.read_bytes().partition(b"\n")[0])[0]  # [key, digest]
        path.write_bytes(host_store.entry_text(key, bad))
    again = _graph(rich_venv, ProbeOptions(roots=("svc.main", "rich.text"), internal=("svc",)))
    assert 4 <= again.parsed < first.parsed
    for name, info in first.modules.items():
        assert again.modules[name].defines == info.defines, name


def test_the_host_cache_stays_under_its_cap(
    rich_venv: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cap_mb = 0.25
    monkeypatch.setenv("ENVSYNC_HOST_CACHE_MB", str(cap_mb))
    table = site_packages(rich_venv) / "rich" / "table.py"
    text = table.read_text()
    for i in range(12):  # a change each time: a new entry each time
        table.write_text(text + f"\nVERSION_{i} = {i}\n")
        os.utime(table, ns=(OLD_NS, OLD_NS + (i + 1) * 10**9))
        graph = _graph(rich_venv)
        assert graph.modules["rich.table"].kind == "source"
        cache = Path.home() / ".cache" / "envsync"
        kept = [  # the host's side (envsync's own received/ has its cap: test_received.py)
            p
            for p in cache.rglob("*")
            if p.is_file() and not {"received"} & set(p.parts) and "host-" not in str(p)
        ]
        assert sum(p.stat().st_size for p in kept) <= cap_mb * (1 << 20)


def test_the_store_refuses_an_entry_that_names_another_key(tmp_path: Path) -> None:
    store = host_store.Store(str(tmp_path))
    store.put("a", {"x": 1})
    other = host_store.Store(str(tmp_path))
    path = other.path("b")
    assert path is not None
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_bytes(host_store.entry_text("a", {"x": 1}))
    assert other.get("a") == {"x": 1}
    assert other.get("b") is None and not Path(path).exists() and other.dropped == 1


def test_a_probe_of_this_machine_never_prunes_envsyncs_received_copies(
    rich_venv: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The host's cache folder is envsync's own parent folder when the host is this
    machine: the host's cap is for the host's caches only (received/ has its own)."""
    from envsync.collect import wire

    _graph(rich_venv)
    kept = sorted(p.name for p in wire.folder().iterdir())
    assert any(n.startswith("chunk-") for n in kept)
    monkeypatch.setenv("ENVSYNC_HOST_CACHE_MB", "0.01")  # everything of the host's is over it
    table = site_packages(rich_venv) / "rich" / "table.py"
    table.write_text(table.read_text() + "\n# changed\n")
    os.utime(table, ns=(OLD_NS, OLD_NS + 10**9))
    _graph(rich_venv)
    assert set(kept) <= {p.name for p in wire.folder().iterdir()}
