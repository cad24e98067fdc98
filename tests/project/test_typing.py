"""The tests are code too: mypy reads them, and each `# type: ignore` left in them says why."""

from __future__ import annotations

import io
import re
import sys
import tokenize
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]
CHECKED = ("tests", "benchmarks")
# `# type: ignore[code, ...]  # why`: the codes mypy reports, then a reason in words
EXPLAINED = re.compile(r"# type: ignore\[[a-z0-9-]+(?:, ?[a-z0-9-]+)*\]  # \S.{8,}")


def ignores(text: str) -> list[tuple[int, str]]:
    """Each comment of `text` that tells mypy to ignore its line: (line, the comment)."""
    tokens = tokenize.generate_tokens(io.StringIO(text).readline)
    return [
        (t.start[0], t.string)
        for t in tokens
        if t.type == tokenize.COMMENT and re.match(r"#\s*type:\s*ignore", t.string)
    ]


def test_the_one_mypy_command_checks_the_tests_and_benchmarks() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    assert config["strict"] is True
    assert {"envsync", "docsgen", *CHECKED} <= set(config["files"])
    (tests,) = [o for o in config["overrides"] if "tests.*" in o["module"]]
    assert {"tests", "benchmarks", "benchmarks.*"} <= set(tests["module"])
    # not strict, but every body is checked and an ignore that checks nothing is an error
    assert tests["check_untyped_defs"] is True and tests["warn_unused_ignores"] is True


def test_every_ignore_in_the_tests_names_its_error_and_says_why() -> None:
    unexplained = [
        f"{path.relative_to(ROOT)}:{line}: {comment}"
        for folder in CHECKED
        for path in sorted((ROOT / folder).rglob("*.py"))
        # not the code of others that a benchmark builds in its ignored cache (.cache)
        if ".cache" not in path.relative_to(ROOT).parts
        for line, comment in ignores(path.read_text())
        if not EXPLAINED.fullmatch(comment)
    ]
    assert unexplained == [], "\n".join(unexplained)


def test_the_check_tells_an_explained_ignore_from_a_bare_one() -> None:
    text = (
        "a = f()  # type: ignore\n"
        "b = g()  # type: ignore[arg-type]\n"
        "c = h()  # type: ignore[arg-type]  # a fake runner takes any argv\n"
        "d = '# type: ignore'  # a string, not a comment\n"
    )
    found = ignores(text)
    assert [line for line, _ in found] == [1, 2, 3]
    assert [bool(EXPLAINED.fullmatch(c)) for _, c in found] == [False, False, True]
