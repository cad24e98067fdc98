"""The suite's own configuration: what counts as a whole run (it writes the figures)."""

from __future__ import annotations

import shlex

from envsync.documents import tomllib
from tests.conftest import DEFAULT_MARKS
from tests.helpers import REPO


def test_the_default_marker_expression_is_the_one_addopts_gives() -> None:
    # A whole run writes docs/generated/reliability.json: it must know the default run's
    # marker expression, or no run ever counts as whole.
    ini = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    words = shlex.split(ini["addopts"])
    assert words[words.index("-m") + 1] == DEFAULT_MARKS
