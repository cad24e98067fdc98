"""A cold startup graph parsed on several cores is the graph one core parses.

The real startup of envsync's own CLI, read from this checkout's venv (rich, packaging,
deepdiff, fabric, paramiko and the rest: hundreds of third-party modules), with no cache,
by one process and by worker processes; then with a worker that dies on one module, and
with no way to fork: the walk parses those itself, and the graph is still the same.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import pytest

from envsync.hostside.graph import parallel
from envsync.hostside.graph.finder import ModuleFinder
from envsync.hostside.graph.startup import startup_graph

OPTIONS = {"roots": ["envsync.cli"], "internal": ["envsync"]}


def _graph(monkeypatch: pytest.MonkeyPatch, jobs: int) -> dict[str, Any]:
    monkeypatch.setenv("ENVSYNC_PARSE_JOBS", str(jobs))
    paths = [p for p in sys.path if p]
    graph = startup_graph(OPTIONS, ModuleFinder(paths), None, "parallel-test")
    assert graph is not None
    return graph


@pytest.fixture(scope="module")
def serial() -> dict[str, Any]:
    with pytest.MonkeyPatch.context() as m:
        return _graph(m, 1)


def test_the_workers_give_the_graph_one_process_gives(
    serial: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    submitted: list[int] = []
    real = parallel.Ahead.close

    def close(self: parallel.Ahead) -> None:
        submitted.append(self.submitted)
        real(self)

    monkeypatch.setattr(parallel.Ahead, "close", close)
    graph = _graph(monkeypatch, 4)
    assert len(serial["modules"]) > 300
    assert graph["modules"] == serial["modules"]
    assert graph["parsed"] == serial["parsed"] > 300
    assert submitted and submitted[0] > graph["parsed"] // 2  # most were parsed ahead


def test_a_worker_that_dies_leaves_the_rest_to_the_walk(
    serial: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    real = parallel.parse

    def dies_on_one(*args: Any) -> Any:
        if args[1] == "rich.console" and os.getpid() != parent:
            os._exit(9)  # a worker killed (out of memory, say)
        return real(*args)

    parent = os.getpid()
    monkeypatch.setattr(parallel, "parse", dies_on_one)
    broken: list[bool] = []
    close = parallel.Ahead.close

    def closing(self: parallel.Ahead) -> None:
        broken.append(self.broken)
        close(self)

    monkeypatch.setattr(parallel.Ahead, "close", closing)
    assert _graph(monkeypatch, 2)["modules"] == serial["modules"]
    assert broken == [True]


def test_without_fork_the_walk_parses_alone(
    serial: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    import multiprocessing

    def no_fork(method: str | None = None) -> Any:
        raise ValueError(f"cannot find context for {method!r}")

    monkeypatch.setattr(multiprocessing, "get_context", no_fork)
    assert _graph(monkeypatch, 4)["modules"] == serial["modules"]


@pytest.mark.parametrize("given, expected", [("1", 1), ("3", 3), ("x", 1), ("0", 1)])
def test_the_number_of_workers_can_be_capped(
    given: str, expected: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ENVSYNC_PARSE_JOBS", given)
    assert parallel.workers() == expected


def test_a_few_files_to_parse_start_no_pool() -> None:
    ahead = parallel.Ahead(4)
    try:
        for n in range(parallel.START_AFTER - 1):
            ahead.submit(f"k{n}", b"X = 1\n", f"m{n}", False, False, ())
        assert ahead.pool is None and ahead.submitted == 0
        assert ahead.take("k0") is None  # the walk parses it itself
        ahead.submit("k0", b"X = 1\n", "m0", False, False, ())
        ahead.submit("last", b"Y = 2\n", "last", False, False, ())
        assert ahead.pool is not None and ahead.submitted == parallel.START_AFTER
        found = ahead.take("last")
        assert found is not None and found[0] == "ok" and found[1]["defines"] == ["Y"]
    finally:
        ahead.close()


def test_a_parse_put_off_by_another_threads_traceback_is_made_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # CPython 3.11.7 (CI's) raised this in the walk once a worker had died: the pool's
    # manager thread formatted the worker's traceback (3.11's traceback module parses
    # the line for its carets) while the walk parsed, and the two shared one counter.
    from envsync.hostside.graph import analyse

    real = analyse.analyze_source
    calls: list[str] = []

    def once_off(*args: Any) -> Any:
        calls.append(args[1])
        if len(calls) == 1:
            raise SystemError("AST constructor recursion depth mismatch (before=159, after=27)")
        return real(*args)

    monkeypatch.setattr(analyse, "analyze_source", once_off)
    status, facts = parallel.parse(b"import json\n", "m", False, False, ())
    assert status == "ok" and calls == ["m", "m"]
    assert facts == real("import json\n", "m", False, False, ())


def test_a_system_error_that_is_not_the_counter_is_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    from envsync.hostside.graph import analyse

    def broken(*args: Any) -> Any:
        raise SystemError("error return without exception set")

    monkeypatch.setattr(analyse, "analyze_source", broken)
    with pytest.raises(SystemError, match="without exception"):
        parallel.parse(b"import json\n", "m", False, False, ())


def test_a_counter_put_off_every_time_is_not_hidden(monkeypatch: pytest.MonkeyPatch) -> None:
    from envsync.hostside.graph import analyse

    calls: list[str] = []

    def always_off(*args: Any) -> Any:
        calls.append(args[1])
        raise SystemError("AST constructor recursion depth mismatch (before=3, after=1)")

    monkeypatch.setattr(analyse, "analyze_source", always_off)
    with pytest.raises(SystemError, match="mismatch"):
        parallel.parse(b"import json\n", "m", False, False, ())
    assert len(calls) == parallel.RETRIES + 1
