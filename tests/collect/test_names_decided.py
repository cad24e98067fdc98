"""Names a module binds at run time, read as far as they can be decided (issue 45, item 3),
and the guards Python really applies: each form on source, its negative controls beside it.

The real wheels behind each are in tests/corpus/test_web_layer.py (numpy 2's expired
`NaN`, typing_extensions 4.13's missing `Sentinel`, starlette's nested fallback,
FastAPI's python-multipart check)."""

from __future__ import annotations

import ast

import pytest

from envsync.hostside.graph.analyse import analyze_source
from envsync.hostside.graph.answers import answered
from tests.figures import add

pytestmark = pytest.mark.quick

SECTION = "startup truth (issue 45, cases held)"

NUMPY_SHAPE = """\
def __getattr__(attr):
    import warnings
    if attr == "linalg":
        import numpy.linalg as linalg
        return linalg
    elif attr == "distutils":
        if "distutils" in __numpy_submodules__:
            return 1
        else:
            raise AttributeError("gone")
    if attr in __former_attrs__:
        raise AttributeError(__former_attrs__[attr])
    if attr in ("core", "char"):
        return 2
    if attr.startswith("float") and len(attr) > 5:
        return 3
    raise AttributeError(f"module has no attribute {attr!r}")
"""


def _getattr(source: str) -> ast.FunctionDef:
    (node,) = [n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef)]
    return node


def test_a_getattr_answers_only_for_the_names_its_returning_paths_allow() -> None:
    assert answered(_getattr(NUMPY_SHAPE)) == {
        "names": ["char", "core", "distutils", "linalg"],
        "prefixes": ["float"],
    }
    add(SECTION, "3 dynamic names: a __getattr__ read path by path")


@pytest.mark.parametrize(
    "tail",
    [
        "    return globals()[attr]\n",  # returns for any name
        "    for x in range(3):\n        return x\n",  # may return inside a loop
        "    pass\n",  # the end of the body returns None
        '    if attr != "x":\n        return 1\n    raise AttributeError\n',  # an else
    ],
)
def test_a_path_that_returns_for_any_name_answers_for_any(tail: str) -> None:
    source = NUMPY_SHAPE.rsplit("    raise AttributeError", 1)[0] + tail
    assert answered(_getattr(source)) is None
    add(SECTION, "3 dynamic names: its negative controls")


def test_a_module_getattr_makes_its_names_decided_and_a_method_of_that_name_does_not() -> None:
    facts = analyze_source("x = 1\n" + NUMPY_SHAPE, "numpy", True)
    assert facts["dynamic"] and facts["getattr"]["names"] == ["char", "core", "distutils", "linalg"]
    # names bound by a loop over a literal list, as numpy's aliases are: bound, not "any"
    loop = 'for ta in ["float96", "float128"]:\n    globals()[ta] = 1\n'
    facts = analyze_source(loop + NUMPY_SHAPE, "numpy", True)
    assert facts["getattr"] is not None and {"float96", "float128"} <= set(facts["defines"])
    # anything else that binds names at run time: any name may exist
    facts = analyze_source("globals().update(x=1)\n" + NUMPY_SHAPE, "numpy", True)
    assert facts["dynamic"] and facts["getattr"] is None
    # typing_extensions 4.13's _SpecialForm: a class's __getattr__ is the class's
    method = "class Form:\n    def __getattr__(self, item):\n        return 1\n"
    facts = analyze_source(method, "typing_extensions", False)
    assert not facts["dynamic"] and "__getattr__" not in facts["defines"]
    add(SECTION, "3 dynamic names: module-level only, the rest stays unknown")


STARLETTE = """\
try:
    try:
        import python_multipart as multipart
    except ModuleNotFoundError:
        import multipart
except ModuleNotFoundError:
    multipart = None
"""


def test_an_except_body_inside_a_guarded_try_is_guarded() -> None:
    facts = analyze_source(STARLETTE, "starlette.formparsers", False)
    contexts = {e["module"]: e["context"] for e in facts["imports"]}
    assert contexts == {"python_multipart": "try", "multipart": "try"}
    # without the outer guard, the fallback is one: it fails the start with the first
    inner = "try:\n    import a\nexcept ImportError:\n    import b\n"
    contexts = {e["module"]: e["context"] for e in analyze_source(inner, "m", False)["imports"]}
    assert contexts == {"a": "try", "b": "fallback"}
    # a guarded import in a fallback is caught where it fails
    nested = "try:\n    import a\nexcept ImportError:\n    try:\n        import b\n"
    nested += "    except ImportError:\n        b = None\n"
    contexts = {e["module"]: e["context"] for e in analyze_source(nested, "m", False)["imports"]}
    assert contexts == {"a": "try", "b": "try"}
    add(SECTION, "1 guards as Python applies them: nested tries")


def test_an_import_whose_handler_raises_is_an_install_check() -> None:
    source = (
        "def ensure():\n    try:\n        from python_multipart import __version__\n"
        "    except ImportError:\n        raise RuntimeError('install it')\n"
        "def optional():\n    try:\n        import yaml\n    except ImportError:\n"
        "        yaml = None\n"
    )
    edges = {e["module"]: e for e in analyze_source(source, "m", False)["imports"]}
    assert edges["python_multipart"].get("raises") is True
    assert "raises" not in edges["yaml"]
    add(SECTION, "3 calls at import time: an install check, marked")


@pytest.mark.parametrize(
    "test, variable",
    [
        ('os.environ.get("SVC_X")', "SVC_X"),
        ('os.getenv("SVC_X")', "SVC_X"),
        ('os.environ["SVC_X"]', "SVC_X"),
        ('"SVC_X" in os.environ', "SVC_X"),
        ("envs.SGLANG_EXTERNAL_MODEL_PACKAGE.get()", "SGLANG_EXTERNAL_MODEL_PACKAGE"),
        ('plugin := os.environ.get("SVC_X")', "SVC_X"),
        ("envs.VLLM_PLUGINS", "VLLM_PLUGINS"),
        # not a variable's value: both ways stay open
        ("config.get()", None),
        ("settings.DEBUG", None),
        ('name == "x"', None),
    ],
)
def test_the_environment_variable_an_if_reads(test: str, variable: str | None) -> None:
    from envsync.hostside.graph.calls import environment_read

    (node,) = ast.parse(f"if {test}:\n    pass\n").body
    assert isinstance(node, ast.If)
    assert environment_read(node.test) == variable
    add(SECTION, "3 calls at import time: an if that reads the environment")
