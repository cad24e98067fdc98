"""Hermetic tests: HOME in a temporary folder, ENVSYNC_* variables, ~/.ssh and the
terminal's size kept out; every report checked for consistency (ENVSYNC_CONSISTENCY=raise).
The suite runs on two workers (pytest-xdist): each worker's figures reach the controller."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from envsync.classify.consistency import STRICT_ENV
from envsync.hostside import shared as host_shared
from tests.helpers import REPO, build_example


@pytest.fixture(autouse=True)
def hermetic(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    for name in list(os.environ):
        if name.startswith("ENVSYNC_"):
            monkeypatch.delenv(name)
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)
    # The terminal's size is the runner's, not the test's (a parallel worker is given 80x24).
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.delenv("LINES", raising=False)
    # Every report the suite builds is checked for one story: a contradiction fails the test.
    monkeypatch.setenv(STRICT_ENV, "raise")
    # The host side run in this process (its caches called directly) seals with a test's
    # key, as boot sets the run's key on a host.
    monkeypatch.setattr(host_shared, "KEY", b"0" * 64)


# `pytest -m quick`, the inner loop's layer (a few minutes): every test but the slow ones
# (real venvs from real wheels), those on a heavy bed (the example's hosts, sshd, containers,
# the wheel cache, the corpus pairs), and these modules, which start real probes, services or
# loaders by the dozen.
HEAVY_FIXTURES = frozenset(
    {"example_hosts", "sshd_bed", "containers", "jump_bed", "wheel_cache", "pairs"}
)
HEAVY_MODULES = frozenset(
    {
        "tests.project.test_secrets",
        "tests.report.test_watch",
        "tests.project.test_hostile_input",
        "tests.compare.test_verdicts",
        "tests.hostside.native.test_real_loader",
        "tests.hostside.native.test_elf",
        "tests.hostside.test_parallel",
        "tests.hostside.test_bundle_cache",
        "tests.classify.test_contexts",
        "tests.classify.test_native_diff",
        "tests.classify.test_one_story",
        "tests.collect.test_wire",
        "tests.service.test_bounds",
        "tests.service.test_smoke",
    }
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        module = getattr(item, "module", None)
        if (
            item.get_closest_marker("slow")
            or HEAVY_FIXTURES & set(getattr(item, "fixturenames", ()))
            or (module is not None and module.__name__ in HEAVY_MODULES)
        ):
            continue
        item.add_marker(pytest.mark.quick)


@pytest.fixture(scope="session")
def wheel_cache() -> Path:
    """Real wheels from the package index, fetched once (shared with the example)."""
    path = Path(os.environ.get("TEST_WHEEL_CACHE", REPO / "examples" / ".cache" / "wheels"))
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture(scope="session")
def example_hosts(tmp_path_factory: pytest.TempPathFactory, wheel_cache: Path) -> Path:
    """The built-in example's ct129 and ct200 venvs, built from real wheels."""
    dest = tmp_path_factory.mktemp("example-hosts")
    build_example(dest, wheel_cache)
    return dest


@pytest.fixture(scope="session")
def sshd_bed(tmp_path_factory: pytest.TempPathFactory):
    """A real OpenSSH sshd on a free loopback port (tests/sshd.py)."""
    from tests.sshd import SSHD, available

    _bed_unavailable(available())
    server = SSHD(tmp_path_factory.mktemp("sshd")).start()
    yield server
    server.stop()


def _bed_unavailable(why: str | None) -> None:
    if why:
        if os.environ.get("CI"):
            pytest.fail(f"the test bed must run in CI: {why}")
        pytest.skip(why)


@pytest.fixture
def containers():
    """Start containers (tests/container.py: real namespaces, bubblewrap); all stopped after."""
    from tests.container import Container, available

    _bed_unavailable(available())
    started: list[Container] = []

    def start(venv_root: Path, **kwargs: Any) -> Container:
        started.append(Container(venv_root, **kwargs).start())
        return started[-1]

    yield start
    for container in started:
        container.stop()


@pytest.fixture(scope="session")
def jump_bed(tmp_path_factory: pytest.TempPathFactory):
    """A bastion sshd and a target sshd that only the bastion reaches (tests/sshd.py)."""
    from tests.container import available as containers_available
    from tests.sshd import JumpBed, available

    _bed_unavailable(available() or containers_available())
    bed = JumpBed(tmp_path_factory.mktemp("jump")).start()
    yield bed
    bed.stop()


def _whole_suite(config: pytest.Config) -> bool:
    """This run is the suite as CI runs it: no paths, no selection, nothing deselected."""
    option = config.option
    return config.args_source == pytest.Config.ArgsSource.TESTPATHS and not (
        option.keyword
        or option.markexpr != _default_markexpr(config)  # addopts' own -m is the default run
        or getattr(option, "lf", False)  # absent with -p no:cacheprovider
        or option.deselect
        or option.maxfail
    )


def _default_markexpr(config: pytest.Config) -> str:
    """The -m of pyproject's addopts (the sets left out of the default run), else ""."""
    args = list(config.getini("addopts"))
    return str(args[args.index("-m") + 1]) if "-m" in args[:-1] else ""


def pytest_sessionfinish(session: pytest.Session) -> None:
    """A worker of a parallel run (pytest-xdist) hands its figures to the controller."""
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        from tests.corpus import table
        from tests.figures import export

        workeroutput["envsync_figures"] = export()
        workeroutput["envsync_corpus"] = table.export()


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    """The controller of a parallel run adds each worker's figures and corpus rows to its
    own, which its terminal summary prints and a whole run writes."""
    output = getattr(node, "workeroutput", {})
    data = output.get("envsync_figures")
    if data:
        from tests.figures import merge

        merge(data)
    rows = output.get("envsync_corpus")
    if rows:
        from tests.corpus import table

        table.merge(rows)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """The reliability figures this run measured; a whole run writes them for the docs."""
    from tests.figures import (
        FIGURES,
        FIGURES_FILE,
        MATRIX_FILE,
        MATRIX_MARK,
        MATRIX_SECTIONS,
        lines,
        write,
        write_matrix,
    )

    found = lines()
    if found:
        terminalreporter.section("envsync reliability figures")
        for line in found:
            terminalreporter.write_line(line)
    counts = {k: len(terminalreporter.stats.get(k, [])) for k in ("passed", "failed", "skipped")}
    config = terminalreporter.config
    if found and counts["passed"] and _whole_suite(config):
        write(REPO / FIGURES_FILE, counts, REPO / MATRIX_FILE)
        terminalreporter.write_line(f"(written to {FIGURES_FILE} for the docs)")
    elif (
        config.option.markexpr == MATRIX_MARK
        and not (config.option.keyword or config.option.deselect or config.option.maxfail)
        and counts["passed"]
        and not counts["failed"]
        and any(FIGURES.get(s) for s in MATRIX_SECTIONS)
    ):
        write_matrix(REPO / MATRIX_FILE, counts)
        terminalreporter.write_line(f"(the matrix's counts written to {MATRIX_FILE})")
    _write_corpus(terminalreporter, counts)


def _write_corpus(terminalreporter: pytest.TerminalReporter, counts: dict[str, int]) -> None:
    """The corpus table (tests/corpus/table.py): written by a whole run, as the figures are,
    or by any run under ENVSYNC_WRITE_CORPUS=1 (the corpus-bearing files alone, say)."""
    from tests.corpus import table

    # a worker of a parallel run hands its rows to the controller (pytest_sessionfinish)
    if not table.ROWS or hasattr(terminalreporter.config, "workerinput"):
        return
    agreeing = sum(table.agrees(row) for row in table.ROWS.values())
    terminalreporter.write_line(
        f"corpus table: {len(table.ROWS)} cases, {agreeing} agreeing with their expectation"
    )
    config = terminalreporter.config
    forced = os.environ.get(table.FORCE_ENV) == "1"
    if not (counts["passed"] and (_whole_suite(config) or forced)):
        return
    if _whole_suite(config):
        command = ".venv/bin/python -m pytest -q"
    else:
        command = " ".join(
            [f"{table.FORCE_ENV}=1", ".venv/bin/python -m pytest", *config.invocation_params.args]
        )
    table.write(REPO / table.CORPUS_FILE, command)
    terminalreporter.write_line(f"(written to {table.CORPUS_FILE} for the docs)")
