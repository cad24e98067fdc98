"""Version checks that raise at import, read from source as the code compares (issue 31,
Deliver 1): the shapes real packages write, and those that are not read (caught, or not
a comparison with a constant). The real-wheel case is numba's, in tests/corpus/test_required.py.
"""

from __future__ import annotations

import pytest

from envsync.classify.dependents import check_raises
from envsync.hostside.graph.analyse import analyze_source
from envsync.model.environment import VersionCheck

NUMBA_LIKE = """\
import sys

def _ensure():
    def extract_version(mod):
        return tuple(map(int, mod.__version__.split('.')[:2]))
    import numpy as np
    numpy_version = extract_version(np)
    if numpy_version > (2, 2):
        msg = "too new"
        raise ImportError(msg)

_ensure()
"""

PACKAGING = """\
from packaging.version import Version
import torch
if Version(torch.__version__) < Version("2.4.0"):
    raise ImportError("needs torch 2.4")
"""

METADATA = """\
import importlib.metadata
if importlib.metadata.version("huggingface-hub") >= "1.0" or not (
        importlib.metadata.version("huggingface-hub") >= "0.30"):
    raise RuntimeError("hub")
"""

CAUGHT = """\
import numpy
try:
    if numpy.__version__ < "2":
        raise ImportError("old")
except ImportError:
    pass
def later():
    if numpy.__version__ < "2":
        raise ImportError("old")
"""

NESTED = """\
import os, numpy
if os.environ.get("STRICT"):
    if numpy.__version__ >= "2.3":
        raise ImportError("new")
"""


def _checks(source: str) -> list[tuple[object, ...]]:
    found: list[dict[str, object]] = analyze_source(source, "pkg", False)["checks"]
    keys = ("name", "of", "compares", "parts", "op", "value", "line", "context")
    return [tuple(c[k] for k in keys) for c in found]


def test_the_shapes_real_packages_write() -> None:
    assert _checks(NUMBA_LIKE) == [("numpy", "module", "ints", 2, ">", "2.2", 10, "module")]
    assert _checks(PACKAGING) == [("torch", "module", "version", None, "<", "2.4.0", 4, "module")]
    # a string compared with a string, as Python compares strings; `not (a >= b)`: a < b
    assert _checks(METADATA) == [
        ("huggingface-hub", "dist", "str", None, ">=", "1.0", 4, "module"),
        ("huggingface-hub", "dist", "str", None, "<", "0.30", 4, "module"),
    ]


def test_a_caught_check_or_one_in_a_function_nothing_calls_is_not_read() -> None:
    assert _checks(CAUGHT) == []


def test_a_check_under_another_condition_is_as_sure_as_an_if() -> None:
    assert [c[-1] for c in _checks(NESTED)] == ["if"]


def _check(op: str, value: str, compares: str, parts: int | None = None) -> VersionCheck:
    return VersionCheck(
        of="module",
        name="numpy",
        compares=compares,  # type: ignore[arg-type]  # the callers' values are the Literal's, given as str
        parts=parts,
        op=op,  # type: ignore[arg-type]  # the callers' operators are the Literal's, given as str
        value=value,
        line=1,
        test_line=1,
        statement="",
        raises="",
        context="module",
    )


@pytest.mark.parametrize(
    ("op", "value", "compares", "parts", "version", "raises"),
    [
        (">", "2.2", "ints", 2, "2.2.6", False),  # numba reads two parts: 2.2.6 is (2, 2)
        (">", "2.2", "ints", 2, "2.3.1", True),
        (">", "2.2", "version", None, "2.2.6", True),  # the whole version: 2.2.6 > 2.2
        ("<", "1.24", "ints", 2, "1.26.4", False),
        ("<", "2.4.0", "version", None, "2.4.0+cpu", False),
        ("<", "2.9", "str", None, "2.10.0", True),  # as strings, "2.10.0" < "2.9"
        ("<", "2", "ints", 1, "2rc1", None),  # int("2rc1") fails: the code cannot read it
    ],
)
def test_a_check_is_evaluated_as_the_code_compares(
    op: str, value: str, compares: str, parts: int | None, version: str, raises: bool | None
) -> None:
    assert check_raises(_check(op, value, compares, parts), version) is raises
