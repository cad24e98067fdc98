"""The tests mirror the package (issue 47, item 4), read from the tree: every test file is in
tests/<folder>/, where <folder> is a package of envsync/ or one of the few that mirror none
(OTHER, each with why); every package has its folder; none sits flat in tests/; every folder
is a package of its own (tests import each other as tests.<folder>.<module>); the modules the
quick layer leaves out exist; and every test file the docs, the code and the tests name is
there."""

from __future__ import annotations

import os
import re
from pathlib import Path

from tests.conftest import HEAVY_MODULES
from tests.helpers import REPO

TESTS = REPO / "tests"
# The folders of tests/ that mirror no package of envsync/, and why.
OTHER = {
    "project": "envsync as a whole: docs, the tree's rules, the example, the top-level modules",
    "corpus": "the public drifts, rebuilt as pairs of real venvs from real wheels",
}
# Where a path to a test file may be named: the docs, the code, CI, the tests themselves.
NAMED_IN = ("README.md", "CONTRIBUTING.md", "pyproject.toml", ".ci/run", "mkdocs.yml")
NAMED_UNDER = ("docs", "envsync", "docsgen", "benchmarks", "examples", "tests")
NAMED_SUFFIXES = {".md", ".py", ".toml", ".yml", ".yaml", ".css", ".json", ".sh", ""}
TEST_PATH = re.compile(r"(?<![\w/.-])tests/[\w/]+\.py")


def _packages() -> set[str]:
    return {p.parent.name for p in (REPO / "envsync").glob("*/__init__.py")}


def _test_files() -> list[Path]:
    return sorted(p for p in TESTS.rglob("test_*.py") if "__pycache__" not in p.parts)


def test_every_test_file_is_in_the_folder_of_a_package_or_a_named_one() -> None:
    allowed = _packages() | set(OTHER)
    flat = [p.name for p in _test_files() if p.parent == TESTS]
    assert flat == [], f"flat in tests/: move each to tests/<package>/ ({flat})"
    stray = [
        str(p.relative_to(REPO))
        for p in _test_files()
        if p.relative_to(TESTS).parts[0] not in allowed
    ]
    assert stray == [], f"in no package's folder, nor in OTHER: {stray}"


def test_every_package_has_its_folder_of_tests() -> None:
    assert not set(OTHER) & _packages(), "a folder of OTHER shadows a package"
    missing = sorted(p for p in _packages() if not (TESTS / p).is_dir())
    assert missing == [], f"packages of envsync/ with no tests/<package>/: {missing}"
    for name in sorted(_packages() | set(OTHER)):
        assert any((TESTS / name).rglob("test_*.py")), f"tests/{name}/ holds no test"


def test_every_folder_of_tests_is_a_package() -> None:
    folders = {p.parent for p in TESTS.rglob("*.py") if "__pycache__" not in p.parts}
    without = sorted(str(f.relative_to(REPO)) for f in folders if not (f / "__init__.py").is_file())
    assert without == [], f"no __init__.py (tests import each other as tests.x.y): {without}"


def test_the_modules_the_quick_layer_leaves_out_exist() -> None:
    """A name left stale after a move would put its heavy module in the quick layer."""
    gone = sorted(m for m in HEAVY_MODULES if not (REPO / (m.replace(".", "/") + ".py")).is_file())
    assert gone == [], f"HEAVY_MODULES (tests/conftest.py) names no module: {gone}"


def _named() -> dict[str, set[str]]:
    files = [REPO / name for name in NAMED_IN]
    for folder in NAMED_UNDER:
        for root, dirs, names in os.walk(REPO / folder):
            # not examples/.hosts nor a cache: built venvs, not what the project says
            dirs[:] = [d for d in dirs if not d.startswith(".") and d != "__pycache__"]
            files += [Path(root, n) for n in names if Path(n).suffix in NAMED_SUFFIXES]
    named: dict[str, set[str]] = {}
    for path in files:
        if path.is_file():
            for found in TEST_PATH.findall(path.read_text(errors="replace")):
                named.setdefault(found, set()).add(str(path.relative_to(REPO)))
    return named


def test_every_test_file_named_is_there() -> None:
    """The docs, the code and the tests name test files by their path: each is there (the
    changelog keeps the paths of its day)."""
    named = _named()
    assert "tests/project/test_layout.py" in named  # CONTRIBUTING names this one
    gone = {path: sorted(where) for path, where in named.items() if not (REPO / path).is_file()}
    assert gone == {}, gone
