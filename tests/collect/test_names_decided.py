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


# pydantic 2's shape (pydantic/__init__.py, pydantic/_migration.py, 2.11.4): a lazy table,
# and what no table names goes to a __getattr__ another module's factory made
PACKAGE = """\
from ._migration import getattr_migration

_dynamic_imports = {"BaseModel": (__spec__.parent, ".main"), "Field": (__spec__.parent, ".fields")}
_deprecated_dynamic_imports = {"GenerateSchema"}
_getattr_migration = getattr_migration(__name__)


def __getattr__(attr_name):
    if attr_name in _deprecated_dynamic_imports:
        warn("deprecated")
    dynamic_attr = _dynamic_imports.get(attr_name)
    if dynamic_attr is None:
        return _getattr_migration(attr_name)
    package, module_name = dynamic_attr
    return import_module(module_name, package=package)
"""
MIGRATION = """\
import sys

MOVED_IN_V2 = {"pkg.utils:version_info": "pkg.version:version_info", "pkg:PyObject": "x"}
DEPRECATED_MOVED_IN_V2 = {"pkg:validate_arguments": "pkg.deprecated:validate_arguments"}
REDIRECT_TO_V1 = {f"pkg.utils:{obj}": f"pkg.v1.utils:{obj}" for obj in ("deep_update", "ROOT_KEY")}
REMOVED_IN_V2 = {"pkg:ConstrainedInt"}


def getattr_migration(module):
    from .errors import PydanticImportError

    def wrapper(name):
        if name == "__path__":
            raise AttributeError(name)
        import_path = f"{module}:{name}"
        if import_path in MOVED_IN_V2.keys():
            return import_string(MOVED_IN_V2[import_path])
        if import_path in DEPRECATED_MOVED_IN_V2:
            return import_string(DEPRECATED_MOVED_IN_V2[import_path])
        if import_path in REDIRECT_TO_V1:
            return import_string(REDIRECT_TO_V1[import_path])
        if import_path == "pkg:BaseSettings":
            raise PydanticImportError("moved to pydantic-settings")
        if import_path in REMOVED_IN_V2:
            raise PydanticImportError("removed")
        globals = sys.modules[module].__dict__
        if name in globals:
            return globals[name]
        raise AttributeError(f"module {module!r} has no attribute {name!r}")

    return wrapper
"""


def test_a_getattr_another_modules_factory_made_answers_as_that_factory_does() -> None:
    from envsync.model.environment import Answers

    package = analyze_source(PACKAGE, "pkg", True)
    assert package["getattr"]["delegate"] == ["pkg._migration", "getattr_migration", "pkg"]
    # the table's names (a deprecated name's path goes on to the table's, which lacks it)
    assert sorted(package["getattr"]["names"]) == ["BaseModel", "Field"]
    assert package["lazy"]["exact"] is True  # every path read: what else it answers is known
    made = analyze_source(MIGRATION, "pkg._migration", False)["factories"]["getattr_migration"]
    factory = Answers(
        names=tuple(made["names"]), prefixes=tuple(made["prefixes"]), template=made["template"]
    )
    # moved, deprecated and redirected names come back; the rest raise
    assert factory.names_for("pkg") == {"PyObject", "validate_arguments"}
    assert factory.names_for("pkg.utils") == {"version_info", "deep_update", "ROOT_KEY"}
    assert not factory.answers_for("pkg", "BaseSettings")
    assert not factory.answers_for("pkg", "ConstrainedInt")
    add(SECTION, "3 dynamic names: a __getattr__ another module's factory made")


@pytest.mark.parametrize(
    "change",
    [
        # a table whose keys are not all written out: any key
        ('"pkg:PyObject": "x"}', '"pkg:PyObject": "x", **EXTRA}'),
        # a path that returns for any name before the module's own names
        ("        globals = sys.modules[module].__dict__\n", "        return 1\n"),
        # a key made otherwise than of the module's name and then the name
        ('import_path = f"{module}:{name}"', 'import_path = f"{name}@{module}"'),
    ],
)
def test_a_factory_envsync_cannot_read_answers_for_any(change: tuple[str, str]) -> None:
    source = MIGRATION.replace(*change)
    assert source != MIGRATION
    assert "getattr_migration" not in analyze_source(source, "pkg._migration", False)["factories"]


GETATTR_OVER_TABLE = """\
_MAP = {"a": "pkg.a"}


def __getattr__(name):
    if name in _MAP:
        return 1
    raise AttributeError(name)
"""


@pytest.mark.parametrize(
    ("source", "exact"),
    [
        (GETATTR_OVER_TABLE, True),  # the table is what it says: complete
        # a table changed after its literal: an item set, a method, augmented, bound again
        (GETATTR_OVER_TABLE + '_MAP["b"] = "pkg.b"\n', False),
        (GETATTR_OVER_TABLE + '_MAP.update(b="pkg.b")\n', False),
        (GETATTR_OVER_TABLE + '_MAP |= {"b": "pkg.b"}\n', False),
        (GETATTR_OVER_TABLE + "def load():\n    global _MAP\n    _MAP = {}\n", False),
        # a local of the table's name hides it
        (GETATTR_OVER_TABLE.replace("    if name", "    _MAP = make()\n    if name"), False),
        # an import hook binds names as it pleases
        (GETATTR_OVER_TABLE + "import sys\nsys.meta_path.append(Finder())\n", False),
    ],
)
def test_a_table_is_read_only_where_nothing_changes_it(source: str, exact: bool) -> None:
    facts = analyze_source(source, "pkg", True)
    complete = facts["lazy"] is not None and facts["lazy"]["exact"]
    assert complete is exact, facts["lazy"]
    if not exact:
        assert facts["getattr"] is None or "b" in str(facts) or not complete


@pytest.mark.parametrize(
    "body",
    [
        # .get with a default is never None
        "    found = _T.get(name, 0)\n    if found is None:\n        raise AttributeError(name)\n"
        "    return found\n",
        # bound twice: the second table's lookup is not the first's
        "    found = _T.get(name)\n    if found is None:\n        found = _U.get(name)\n"
        "    if found is None:\n        raise AttributeError(name)\n    return found\n",
        # another module's namespace is not this one's
        "    ns = _impl.__dict__\n    if name in ns:\n        return ns[name]\n"
        "    raise AttributeError(name)\n",
        # the name asked for made another
        "    name = name.lower()\n    if name in _T:\n        return 1\n    raise AttributeError(name)\n",
    ],
)
def test_narrowing_envsync_cannot_prove_answers_for_any(body: str) -> None:
    source = '_T = {"a": 1}\n_U = {"b": 2}\n\n\ndef __getattr__(name):\n' + body
    (node,) = [n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef)]
    from envsync.hostside.graph.answers import literal_keys

    assert answered(node, literal_keys(ast.parse(source))) is None
