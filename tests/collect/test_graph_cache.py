"""The host's cache of whole startup graphs: reused while nothing it read has changed.

A real venv with a small service package; the probe runs for real. Files are dated back
so that the cache may hold them (nothing touched in the last seconds is cached).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from envsync.collect import ProbeOptions, collect
from envsync.model.environment import StartupGraph
from envsync.runner.local import LocalRunner
from envsync.sources.inventory import HostSpec
from tests.helpers import OLD_NS, service_venv, site_packages

OPTIONS = ProbeOptions(roots=("svc.main",), internal=("svc",))


@pytest.fixture
def venv(tmp_path: Path) -> Path:
    return service_venv(tmp_path / "venv")


def _graph(python: Path) -> StartupGraph:
    spec = HostSpec(name="t", python=str(python))
    graph = collect(spec, LocalRunner("t"), OPTIONS).startup
    assert graph is not None
    return graph


def _imports(graph: StartupGraph, name: str) -> list[str]:
    return [e.module for e in graph.modules[name].imports]


def test_an_unchanged_graph_is_reused_whole(venv: Path) -> None:
    first = _graph(venv)
    second = _graph(venv)
    assert first.parsed == 3 and second.parsed == 0 and second.cached == 3
    assert second.modules == first.modules
    cached = list((Path.home() / ".cache" / "envsync").glob("graph-*.json"))
    assert len(cached) == 1


def test_a_module_changed_behind_its_mtime_is_read_again(venv: Path) -> None:
    util = site_packages(venv) / "svc" / "util.py"
    assert _imports(_graph(venv), "svc.util") == ["alpha"]
    # same size, mtime set back: only the ctime (and the content) differ
    util.write_text("import gamma\n")
    os.utime(util, ns=(OLD_NS, OLD_NS))
    graph = _graph(venv)
    assert _imports(graph, "svc.util") == ["gamma"]
    assert graph.modules["gamma"].kind == "missing" and "alpha" not in graph.modules


def test_a_module_that_appears_is_found(venv: Path) -> None:
    sp = site_packages(venv)
    assert _graph(venv).modules["alpha"].kind == "missing"
    (sp / "alpha.py").write_text("X = 1\n")  # a new file changes its folder's mtime
    os.utime(sp / "alpha.py", ns=(OLD_NS, OLD_NS))
    assert _graph(venv).modules["alpha"].kind == "source"


def test_a_module_touched_just_now_is_not_cached(venv: Path) -> None:
    (site_packages(venv) / "svc" / "util.py").write_text("import alpha\n")  # mtime: now
    _graph(venv)
    assert not list((Path.home() / ".cache" / "envsync").glob("graph-*.json"))
    assert _graph(venv).parsed == 0  # per-module facts are still cached by content


def test_no_cache_reads_everything(venv: Path) -> None:
    from dataclasses import replace

    _graph(venv)
    spec = HostSpec(name="t", python=str(venv))
    graph = collect(spec, LocalRunner("t"), replace(OPTIONS, cache_dir="")).startup
    assert graph is not None and graph.parsed == 3


def test_a_pycache_folder_made_by_a_start_keeps_the_graph(venv: Path) -> None:
    """A service's first start compiles its modules: __pycache__ appears in each package
    folder, changing the folder's mtime and nothing an import finds."""
    import subprocess

    _graph(venv)
    # svc.util imports alpha, which is missing: the import fails after compiling them
    subprocess.run([str(venv), "-c", "import svc.main"], env={}, capture_output=True)
    assert (site_packages(venv) / "svc" / "__pycache__").is_dir()
    # (dated back past the racy window, as a start minutes ago would have left it)
    os.utime(site_packages(venv) / "svc", ns=(OLD_NS, OLD_NS + 5 * 10**9))
    graph = _graph(venv)
    assert graph.parsed == 0 and graph.cached == 3
    # the folder's new stat is kept with the same graph: the next run stats it, lists nothing
    (cached,) = (Path.home() / ".cache" / "envsync").glob("graph-*.json")
    stamps = json.loads(cached.read_text().splitlines()[0])
    row = next(r for r in stamps if r[0] == str(site_packages(venv) / "svc"))
    assert row[1][1] == (site_packages(venv) / "svc").stat().st_mtime_ns
    # a new module in the same folder is another listing: the graph is read again
    (site_packages(venv) / "svc" / "extra.py").write_text("X = 1\n")
    (site_packages(venv) / "svc" / "main.py").write_text("import svc.util\nimport svc.extra\n")
    for path in (site_packages(venv) / "svc").iterdir():
        os.utime(path, ns=(OLD_NS, OLD_NS + 10**9))
    again = _graph(venv)
    assert again.modules["svc.extra"].kind == "source"
