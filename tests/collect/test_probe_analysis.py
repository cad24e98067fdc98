"""The probe's reading of exception handlers and lazy modules (analyze_source), as a table."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest

from envsync.hostside.graph.analyse import analyze_source
from envsync.hostside.graph.finder import ModuleFinder
from envsync.hostside.graph.startup import startup_graph


def contexts(source: str) -> dict[str, tuple[str, int | None]]:
    facts = analyze_source(textwrap.dedent(source), "svc.main", False)
    return {e["module"]: (e["context"], e["group"]) for e in facts["imports"]}


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        (  # swallowed: guarded; the except body is a fallback of the same try
            "try:\n    import a\nexcept ImportError:\n    import b\n",
            {"a": ("try", 1), "b": ("fallback", 1)},
        ),
        (  # a handler that re-raises does not guard
            "try:\n    import a\nexcept ImportError:\n    log()\n    raise\n",
            {"a": ("module", 1)},
        ),
        (
            "try:\n    import a\nexcept ImportError as e:\n    raise RuntimeError('x') from e\n",
            {"a": ("module", 1)},
        ),
        (
            "import sys\ntry:\n    import a\nexcept ImportError:\n    sys.exit(1)\n",
            {"sys": ("module", None), "a": ("module", 2)},
        ),
        (  # ends by raising on every branch
            "try:\n    import a\nexcept ImportError:\n    if x:\n        raise\n    else:\n"
            "        raise SystemExit(2)\n",
            {"a": ("module", 1)},
        ),
        (  # raises only on one branch: it may swallow
            "try:\n    import a\nexcept ImportError:\n    if x:\n        raise\n",
            {"a": ("try", 1)},
        ),
        (  # the first handler that catches ImportError decides
            "try:\n    import a\nexcept ImportError:\n    raise\nexcept Exception:\n    pass\n",
            {"a": ("module", 1)},
        ),
        ("try:\n    import a\nexcept Exception:\n    a = None\n", {"a": ("try", 1)}),
        ("try:\n    import a\nexcept:\n    a = None\n", {"a": ("try", 1)}),
        (  # a handler for something else: the body runs unguarded, the handler is a fallback
            "try:\n    import a\nexcept KeyError:\n    import b\n",
            {"a": ("module", 1), "b": ("fallback", 1)},
        ),
        (
            "import contextlib\nwith contextlib.suppress(ImportError):\n    import a\n",
            {"contextlib": ("module", None), "a": ("try", 2)},
        ),
        (
            "from contextlib import suppress\nwith suppress(KeyError):\n    import a\n",
            {"contextlib": ("module", None), "a": ("module", None)},
        ),
        (
            "import importlib\nmod = importlib.import_module('pkg.sub')\n"
            "def f():\n    return importlib.import_module('lazy.one')\n",
            {
                "importlib": ("module", None),
                "pkg.sub": ("module", None),
                "lazy.one": ("function", None),
            },
        ),
        (  # a name bound once to a constant is that constant
            "import importlib\nname = 'x'\nimportlib.import_module(name)\n",
            {"importlib": ("module", None), "x": ("module", None)},
        ),
        (  # every binding the same constant, in a function's own scope
            "def f(flag):\n    name = 'x.y'\n    if flag:\n        name = 'x.y'\n"
            "    return __import__(name)\n",
            {"x.y": ("function", None)},
        ),
        (  # a name bound to anything else as well is computed: no import envsync can name
            "import importlib\nname = 'x'\nname = pick()\nimportlib.import_module(name)\n",
            {"importlib": ("module", None)},
        ),
    ],
)
def test_handler_and_import_contexts(
    source: str, expected: dict[str, tuple[str, int | None]]
) -> None:
    assert contexts(source) == expected


def doors(source: str) -> list[tuple[int, str, str | None]]:
    facts = analyze_source(textwrap.dedent(source), "pkg.algo", True)
    return [(d["line"], d["context"], d["prefix"]) for d in facts["doors"]]


# SGLang's sglang/srt/dllm/algorithm/__init__.py: every module of its own package.
ITER_MODULES = """import importlib
import pkgutil

def load():
    package_name = "pkg.algo"
    package = importlib.import_module(package_name)
    for _, name, ispkg in pkgutil.iter_modules(package.__path__, package_name + "."):
        importlib.import_module(name)

table = load()
"""


def test_a_module_list_with_a_constant_prefix_is_a_door_bounded_to_that_package() -> None:
    facts = analyze_source(ITER_MODULES, "pkg.algo", True)
    # the constant name is an import; the loop's names all start with the prefix
    edges = [(e["module"], e["context"], e["line"]) for e in facts["imports"]]
    assert ("pkg.algo", "module", 6) in edges
    assert doors(ITER_MODULES) == [(8, "function", "pkg.algo."), (8, "module", "pkg.algo.")]


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        (  # walk_packages, imported from pkgutil, a keyword prefix: the same bound
            "from pkgutil import walk_packages\nimport importlib\n"
            "for info in walk_packages(__path__, prefix='pkg.algo.'):\n"
            "    importlib.import_module(info.name)\n",
            [(4, "module", None)],  # `info.name`: not followed, still a door
        ),
        (
            "from pkgutil import walk_packages as walk\n"
            "for _, name, _ in walk(__path__, prefix='pkg.algo.'):\n"
            "    __import__(name)\n",
            [(3, "module", "pkg.algo.")],
        ),
        (  # no prefix: the names are bare, anything on sys.path
            "import pkgutil, importlib\nfor _, name, _ in pkgutil.iter_modules(paths):\n"
            "    importlib.import_module(name)\n",
            [(3, "module", None)],
        ),
        (  # a prefix computed at run time
            "import pkgutil, importlib\n"
            "for _, name, _ in pkgutil.iter_modules(paths, pick() + '.'):\n"
            "    importlib.import_module(name)\n",
            [(3, "module", None)],
        ),
        (  # the loop's name rebound inside it
            "import pkgutil, importlib\n"
            "for _, name, _ in pkgutil.iter_modules(__path__, 'pkg.algo.'):\n"
            "    name = name.replace('algo', other)\n    importlib.import_module(name)\n",
            [(4, "module", None)],
        ),
        (  # a function's parameter of the same name is another scope's
            "import pkgutil, importlib\n"
            "for _, name, _ in pkgutil.iter_modules(__path__, 'pkg.algo.'):\n"
            "    pass\ndef f(name):\n    return importlib.import_module(name)\n",
            [(5, "function", None)],
        ),
        (  # an iter_modules that is not pkgutil's can yield anything
            "import importlib\nfrom mine import iter_modules\n"
            "for _, name, _ in iter_modules(__path__, 'pkg.algo.'):\n"
            "    importlib.import_module(name)\n",
            [(4, "module", None)],
        ),
        (  # a constant name rebound by a nested function (nonlocal): not known
            "import importlib\ndef f():\n    name = 'x'\n    def g():\n"
            "        nonlocal name\n        name = pick()\n    g()\n"
            "    return importlib.import_module(name)\n",
            [(8, "function", None)],
        ),
        (  # a module's constant rebound through `global` elsewhere: not known
            "import importlib\nname = 'x'\ndef set(v):\n    global name\n    name = v\n"
            "importlib.import_module(name)\n",
            [(6, "module", None)],
        ),
        (  # a module's constant read in a function: another scope, not resolved
            "import importlib\nname = 'x'\ndef f():\n    return importlib.import_module(name)\n",
            [(4, "function", None)],
        ),
        (  # a computed name that starts with a bound constant: that constant is its prefix
            "import importlib\nbase = 'pkg.algo.'\nimportlib.import_module(base + pick())\n",
            [(3, "module", "pkg.algo.")],
        ),
    ],
)
def test_what_is_not_provably_bounded_stays_an_open_door(
    source: str, expected: list[tuple[int, str, str | None]]
) -> None:
    assert doors(source) == expected


TRANSFORMERS_STYLE = """\
from typing import TYPE_CHECKING
from .utils import _LazyModule, OptionalDependencyNotAvailable, is_torch_available

_import_structure = {
    "configuration_utils": ["PretrainedConfig"],
    "models.auto": ["AutoConfig"],
}
try:
    if not is_torch_available():
        raise OptionalDependencyNotAvailable()
except OptionalDependencyNotAvailable:
    from .utils import dummy_pt_objects
    _import_structure["utils.dummy_pt_objects"] = [n for n in dir(dummy_pt_objects)]
else:
    _import_structure["models.auto"].extend(["AutoModel", "AutoModelForCausalLM"])
    _import_structure["modeling_utils"] = ["PreTrainedModel"]
_import_structure["models.auto"].append("AutoTokenizer")

if TYPE_CHECKING:
    from .configuration_utils import PretrainedConfig
else:
    import sys
    sys.modules[__name__] = _LazyModule(
        __name__, globals()["__file__"], _import_structure, extra_objects={"__version__": "1"}
    )
"""

DEFINE_STYLE = """\
from typing import TYPE_CHECKING
from ...utils import _LazyModule
from ...utils.import_utils import define_import_structure

if TYPE_CHECKING:
    from .configuration_mllama import *
    from .image_processing_mllama import *
else:
    import sys
    _file = globals()["__file__"]
    sys.modules[__name__] = _LazyModule(__name__, _file, define_import_structure(_file))
"""

LAZY_LOADER = """\
import lazy_loader as lazy
__getattr__, __dir__, __all__ = lazy.attach(
    __name__, submodules=["io", "filters"], submod_attrs={"filters": ["gaussian", "sobel"]}
)
"""

GETATTR_TABLE = """\
_LAZY = {"Engine": ".engine", "Client": "pkg.client.http"}
def __getattr__(name):
    if name in _LAZY:
        import importlib
        return getattr(importlib.import_module(_LAZY[name], __name__), name)
    raise AttributeError(name)
"""


@pytest.mark.parametrize(
    ("source", "names", "stars", "exact"),
    [
        (
            TRANSFORMERS_STYLE,
            {
                "PretrainedConfig": "pkg.configuration_utils",
                "AutoConfig": "pkg.models.auto",
                "AutoModel": "pkg.models.auto",
                "AutoModelForCausalLM": "pkg.models.auto",
                "AutoTokenizer": "pkg.models.auto",
                "PreTrainedModel": "pkg.modeling_utils",
                "__version__": "pkg",
            },
            ["pkg.utils.dummy_pt_objects"],
            True,
        ),
        (
            DEFINE_STYLE,
            {},
            ["pkg.configuration_mllama", "pkg.image_processing_mllama"],
            True,
        ),
        (
            LAZY_LOADER,
            {
                "io": "pkg.io",
                "filters": "pkg.filters",
                "gaussian": "pkg.filters",
                "sobel": "pkg.filters",
            },
            [],
            True,
        ),
        # its __getattr__ returns only under `name in _LAZY`, and raises after: complete
        (GETATTR_TABLE, {"Engine": "pkg.engine", "Client": "pkg.client.http"}, [], True),
        (  # one that may return for other names than its table's: never complete
            GETATTR_TABLE.replace("    raise AttributeError(name)", "    return compute(name)"),
            {"Engine": "pkg.engine", "Client": "pkg.client.http"},
            [],
            False,
        ),
        (  # a replacement whose table envsync cannot read: never a complete table
            "import sys\nsys.modules[__name__] = make_lazy(globals())\n",
            {},
            [],
            False,
        ),
    ],
)
def test_lazy_tables(source: str, names: dict[str, str], stars: list[str], exact: bool) -> None:
    lazy = analyze_source(source, "pkg", True)["lazy"]
    assert lazy is not None
    assert (lazy["names"], lazy["stars"], lazy["exact"]) == (names, stars, exact)


def test_define_import_structure_is_marked_for_the_directory_listing() -> None:
    assert analyze_source(DEFINE_STYLE, "pkg", True)["lazy"]["dir"] is True


def test_a_table_mutated_in_a_way_envsync_cannot_read_is_not_exact() -> None:
    source = TRANSFORMERS_STYLE.replace(
        '_import_structure["models.auto"].append("AutoTokenizer")',
        "_import_structure.update(more)",
    )
    assert analyze_source(source, "pkg", True)["lazy"]["exact"] is False


def test_an_ordinary_module_has_no_lazy_table() -> None:
    assert analyze_source("X = 1\n", "pkg", True)["lazy"] is None


def graph_of(tmp_path: Path, init: str) -> dict[str, Any]:
    """The startup graph of a package `pkg` whose `pkg/algo/__init__.py` is `init`."""
    algo = tmp_path / "pkg" / "algo"
    algo.mkdir(parents=True)
    (tmp_path / "pkg" / "__init__.py").write_text("from pkg import algo\n")
    (algo / "__init__.py").write_text(init)
    (algo / "fast.py").write_text("import numpy\n")
    (tmp_path / "pkg" / "other.py").write_text("import torch\n")
    graph = startup_graph({"roots": ["pkg"]}, ModuleFinder([str(tmp_path)]), None, "t")
    assert graph is not None
    modules: dict[str, Any] = graph["modules"]
    return modules


def test_a_bounded_module_list_is_read_and_closed(tmp_path: Path) -> None:
    modules = graph_of(tmp_path, ITER_MODULES)
    # the door that runs (in load(), which the module calls) is read: every module of
    # pkg.algo is an edge, none of pkg's others; inside a function it would not count
    doors = [(d["context"], d.get("read")) for d in modules["pkg.algo"]["doors"]]
    assert doors == [("function", None), ("module", True)]
    assert "pkg.algo.fast" in modules and "numpy" in modules
    assert "pkg.other" not in modules and "torch" not in modules


def test_an_unbounded_module_list_stays_an_open_door(tmp_path: Path) -> None:
    modules = graph_of(tmp_path, ITER_MODULES.replace(', package_name + "."', ""))
    doors = [(d["context"], d.get("read")) for d in modules["pkg.algo"]["doors"]]
    assert doors == [("function", None), ("module", None)]
    assert "pkg.algo.fast" not in modules


# numba/core/config.py (0.61.2): _EnvReloader.update, run by `_env_reloader = _EnvReloader()`
# at import, ends with `for name, value in locals().copy().items(): ... globals()[name] =
# value`: DEVELOPER_MODE and the rest are bound at run time, never by a statement.
NUMBA_CONFIG = """
class _EnvReloader(object):
    def __init__(self):
        self.update()

    def update(self):
        DEVELOPER_MODE = 0
        for name, value in locals().copy().items():
            if name.isupper():
                globals()[name] = value

_env_reloader = _EnvReloader()
"""


@pytest.mark.parametrize(
    ("source", "dynamic"),
    [
        (NUMBA_CONFIG, True),
        ("def f():\n    globals().update(x=1)\n", True),
        ("import sys\ndef f():\n    setattr(sys.modules[__name__], 'x', 1)\n", True),
        # a function's own locals are no names of the module
        ("def f():\n    locals()['x'] = 1\n    exec('y = 1')\n", False),
        ("def f(args):\n    vars(args)['x'] = 1\n", False),
    ],
)
def test_names_a_function_binds_into_the_module_make_it_dynamic(source: str, dynamic: bool) -> None:
    assert analyze_source(source, "m", False)["dynamic"] is dynamic


def test_a_package_that_installs_an_import_hook_never_has_missing_submodules(
    tmp_path: Path,
) -> None:
    """pkg_resources/extern/__init__.py (setuptools 65.5) serves `pkg_resources.extern.X`
    from `pkg_resources._vendor` through a VendorImporter on sys.meta_path: no file of
    pkg_resources/extern/ is that module, and Python imports it all the same."""
    pkg = tmp_path / "pkg"
    (pkg / "extern").mkdir(parents=True)
    (pkg / "__init__.py").write_text(
        "from pkg.extern import appdirs\nimport pkg.extern.jaraco.text\nimport pkg.gone\n"
    )
    hook = "import sys\nclass VendorImporter:\n    def install(self):\n"
    hook += "        sys.meta_path.append(self)\nVendorImporter().install()\n"
    (pkg / "extern" / "__init__.py").write_text(hook)
    graph = startup_graph({"roots": ["pkg"]}, ModuleFinder([str(tmp_path)]), None, "t")
    assert graph is not None
    modules = graph["modules"]
    assert modules["pkg.extern"]["dynamic"] is True  # `from pkg.extern import appdirs`
    assert modules["pkg.extern.jaraco.text"] == {"kind": "provided"}
    assert modules["pkg.gone"] == {"kind": "missing"}  # no hook above it: missing
    # without the hook, the same submodule is missing
    (pkg / "extern" / "__init__.py").write_text("")
    graph = startup_graph({"roots": ["pkg"]}, ModuleFinder([str(tmp_path)]), None, "t2")
    assert graph is not None
    assert graph["modules"]["pkg.extern.jaraco.text"] == {"kind": "missing"}
