"""The probe's reading of exception handlers and lazy modules (analyze_source), as a table."""

from __future__ import annotations

import textwrap

import pytest

from envsync.hostside.analyse import analyze_source


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
        (  # a module built from a variable is not an import envsync can name
            "import importlib\nname = 'x'\nimportlib.import_module(name)\n",
            {"importlib": ("module", None)},
        ),
    ],
)
def test_handler_and_import_contexts(
    source: str, expected: dict[str, tuple[str, int | None]]
) -> None:
    assert contexts(source) == expected


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
        (GETATTR_TABLE, {"Engine": "pkg.engine", "Client": "pkg.client.http"}, [], False),
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
