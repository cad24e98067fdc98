"""Reachability by demand (envsync/collect/reach.py) against the whole walk, its oracle.

A real venv holds a small service whose imports take every form the whole walk follows:
absolute, relative, `from package import module`, a parent package, a lazy module's
table, a computed import opened to a package's modules, a condition, a guard, a function,
a type checker's import, a .pth line, a missing module, modules nothing imports. The probe
walks it whole; the reachability program asks about every module, one at a time, from the
module up. Both must give the same context for each (and a path of that context that the
whole graph has), with grep and with Python reading the files.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from envsync.classify.graph import GraphIndex, Reach
from envsync.classify.rules import Root
from envsync.classify.startup import site_roots
from envsync.collect import ProbeOptions, collect
from envsync.collect.reach import Reached, reach
from envsync.model.environment import StartupGraph
from envsync.model.vocab import CONTEXT_RANK
from envsync.runner.local import LocalRunner
from envsync.sources.inventory import HostSpec
from tests.helpers import make_venv, site_packages


def lazy(table: str) -> str:
    """A module whose __getattr__ serves names from a table of submodules."""
    return (
        f"_LAZY = {table}\n"
        "def __getattr__(name):\n"
        "    if name in _LAZY:\n"
        "        import importlib\n"
        "        return getattr(importlib.import_module(_LAZY[name], __name__), name)\n"
        "    raise AttributeError(name)\n"
    )


FILES = {
    "svc/__init__.py": "VERSION = 1\n",
    "svc/main.py": (
        "import os\n"
        "import svc.core\n"
        "from svc import views\n"
        "from .lazy import Engine\n"
        "from . import tools as _tools\n"
        "from typing import TYPE_CHECKING\n"
        "try:\n"
        "    import optional_dep\n"
        "except ImportError:\n"
        "    optional_dep = None\n"
        'if os.environ.get("SVC_EXTRA"):\n'
        "    import cond_dep\n"
        "if TYPE_CHECKING:\n"
        "    import typing_dep\n"
        "import gone_dep\n"
        "from lz import Thing\n"
        "from ch import Foo\n"
        "from dl import Baz\n"
        "from cm import X\n"
        "import edpkg.core\n"
        "\n"
        "def later():\n"
        "    import fn_dep\n"
        "    from svc.plugins import loader\n"
    ),
    "svc/core.py": (
        "import importlib\n"
        "from . import util\n"
        "from .sub.deep import thing\n"
        'for _n in ("alpha",):\n'
        '    importlib.import_module("svc.models." + _n)\n'
    ),
    "svc/util.py": "import leaf\n",
    "svc/views.py": "from svc.sub import deep2\n",
    "svc/tools.py": "import tools_dep\n",
    "svc/sub/__init__.py": "",
    "svc/sub/deep.py": "thing = 1\n",
    "svc/sub/deep2.py": "import deep2_dep\n",
    "svc/models/__init__.py": "",
    "svc/models/alpha.py": "import model_dep\n",
    "svc/models/beta.py": "",
    "svc/lazy/__init__.py": (
        '_LAZY = {"Engine": ".engine"}\n'
        "def __getattr__(name):\n"
        "    if name in _LAZY:\n"
        "        import importlib\n"
        "        return getattr(importlib.import_module(_LAZY[name], __name__), name)\n"
        "    raise AttributeError(name)\n"
    ),
    "svc/lazy/engine.py": "import engine_dep\nEngine = 1\n",
    "svc/plugins/__init__.py": "",
    "svc/plugins/loader.py": "import plugin_dep\nimport fn_dep\n",
    "leaf.py": "import leafdep\n",
    "leafdep/__init__.py": "",
    "optional_dep/__init__.py": "",
    "cond_dep.py": "",
    "typing_dep.py": "",
    "fn_dep.py": "import shared_dep\n",
    "tools_dep.py": "import shared_dep\n",
    "deep2_dep.py": "",
    "model_dep.py": "",
    "engine_dep.py": "",
    "plugin_dep.py": "",
    "shared_dep.py": "",
    "pth_dep.py": "",
    "orphan.py": "import leaf\nimport fn_dep\n",
    "unrelated/__init__.py": "import orphan\n",
    "site_hook.pth": "import pth_dep\n",
    # a lazy table's owner in a subpackage: lz.sub runs only through impl's own import
    "lz/__init__.py": lazy('{"Thing": ".sub.impl"}'),
    "lz/sub/__init__.py": "",
    "lz/sub/impl.py": "from . import helper\nThing = 1\n",
    "lz/sub/helper.py": "import lzdep\n",
    "lzdep.py": "",
    # a table sending a name to another table
    "ch/__init__.py": lazy('{"Foo": ".inner"}'),
    "ch/inner/__init__.py": lazy('{"Foo": ".impl"}'),
    "ch/inner/impl.py": "import chdep\nFoo = 1\n",
    "chdep.py": "",
    # a table made from the package's folder: it names no submodule
    "dl/__init__.py": (
        "import sys\n"
        "from typing import TYPE_CHECKING\n"
        "from .utils import _LazyModule, define_import_structure\n"
        "if TYPE_CHECKING:\n"
        "    from .impl import *\n"
        "else:\n"
        "    _file = globals()['__file__']\n"
        "    sys.modules[__name__] = _LazyModule(__name__, _file, define_import_structure(_file))\n"
    ),
    "dl/utils.py": "def _LazyModule(*a): pass\ndef define_import_structure(f): return {}\n",
    "dl/impl.py": "import dldep\n__all__ = ['Baz']\nBaz = 1\n",
    "dldep.py": "",
    # a chain of tables that ends in a missing module: two owners, each only "if"
    "cm/__init__.py": lazy('{"X": ".inner"}'),
    "cm/inner/__init__.py": lazy('{"X": ".gone"}'),
    # an editable install's package, mapped by its finder (written by the fixture)
    "edleaf.py": "",
}
EDITABLE = {"edpkg/__init__.py": "", "edpkg/core.py": "import edleaf\n"}
NOT_IN_THE_WALK = ("orphan", "unrelated", "typing_dep", "json")
ROOTS = (
    (Root(module="svc.main", reason="the service", label="entry"),),
    (
        Root(module="svc.main", reason="the service", label="entry"),
        Root(module="svc.plugins.loader", reason="a flag", label="flag", context="if"),
    ),
)


@pytest.fixture(scope="module")
def python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    python = make_venv(tmp_path_factory.mktemp("reach") / "venv")
    site = site_packages(python)
    for rel, text in FILES.items():
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        (site / rel).write_text(text)
    src = python.parent.parent.parent / "src"
    for rel, text in EDITABLE.items():
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_text(text)
    (site / "__editable___edpkg_0_1_finder.py").write_text(
        f"MAPPING = {{'edpkg': {str(src / 'edpkg')!r}}}\n"
    )
    return python


def walk(python: Path, roots: Sequence[Root]) -> StartupGraph:
    options = ProbeOptions(roots=tuple(r.module for r in roots), internal=("svc",), cache_dir="")
    graph = collect(HostSpec(name="t", python=str(python)), LocalRunner("t"), options).startup
    assert graph is not None
    return graph


def ask(
    python: Path,
    roots: Sequence[Root],
    modules: Sequence[str],
    *,
    governed: Sequence[str] = (),
    grep: bool = True,
    wide: int | None = None,
) -> dict[str, Reached]:
    options = ProbeOptions(roots=tuple(r.module for r in roots), internal=("svc",), cache_dir="")
    spec = HostSpec(name="t", python=str(python))
    pairs = [(r.module, r.context) for r in roots]
    found = reach(
        spec, LocalRunner("t"), options, pairs, modules, governed=governed, grep=grep, wide=wide
    )
    return found.reached


def holds_path(index: GraphIndex, roots: Sequence[Root], got: Reached) -> bool:
    """The path starts at a root's module and every step of it is one of the graph's,
    no weaker than the context it claims."""
    assert got.context is not None and got.path
    rank = CONTEXT_RANK[got.context]
    first = got.path[0]
    starts = [r for r in roots if first in _seeds(index, r)]
    if not starts or min(CONTEXT_RANK[r.context] for r in starts) > rank:
        return False
    for a, b in zip(got.path, got.path[1:], strict=False):
        ranks = [own for _, targets in index.steps(a) for t, own in targets if t == b]
        if not ranks or min(ranks) > rank:
            return False
    return True


def _seeds(index: GraphIndex, root: Root) -> list[str]:
    from envsync.classify.graph import seeds

    return seeds(index.graph, root)


@pytest.mark.parametrize("grep", [True, False], ids=["grep", "python"])
@pytest.mark.parametrize("which", range(len(ROOTS)), ids=["one root", "a flag's root too"])
@pytest.mark.parametrize("governed", [(), ("fn_dep",)], ids=["", "governed"])
def test_each_module_is_reached_as_surely_as_the_whole_walk_says(
    python: Path, grep: bool, which: int, governed: tuple[str, ...]
) -> None:
    roots = ROOTS[which]
    graph = walk(python, roots)
    index = GraphIndex(graph, frozenset(governed))
    oracle: dict[str, Reach] = index.reach(site_roots(graph) + roots)
    present = [n for n, m in graph.modules.items() if m.kind != "missing" and ":" not in n]
    asked = sorted({*present, *NOT_IN_THE_WALK})
    answers = ask(python, roots, asked, governed=governed, grep=grep)
    wrong = {}
    for name in asked:
        want = oracle[name].context if name in oracle else None
        got = answers[name]
        assert got.wide is None, (name, got.wide)
        everything = site_roots(graph) + roots
        if got.context != want or (want is not None and not holds_path(index, everything, got)):
            wrong[name] = (want, got.context, got.path)
    assert wrong == {}
    # every form was asked about, and the walk reaches through each
    assert oracle["svc.models.alpha"].context == "if"  # the computed import, opened
    assert oracle["engine_dep"].context == "module"  # through the lazy table
    assert oracle["optional_dep"].context == "try"
    assert oracle["pth_dep"].context == "module"  # a .pth line, at every start
    assert "orphan" not in oracle and "typing_dep" not in oracle
    assert oracle["lz.sub"].parent == "lz.sub.impl"  # not run with its owner: through impl
    assert oracle["chdep"].context == "if"  # a table's table: two owners, each only "if"
    assert oracle["dldep"].context == "module"
    assert oracle["cm.inner"].context == "if"  # one of two owners, one of them missing
    assert oracle["edleaf"].context == "module"  # through the editable package
    if governed:  # never through svc.main's function: through the plugin that imports it
        assert oracle["fn_dep"].parent == "svc.plugins.loader"


def test_a_missing_module_is_answered_by_its_importers(python: Path) -> None:
    roots = ROOTS[0]
    graph = walk(python, roots)
    index = GraphIndex(graph)
    oracle = index.reach(site_roots(graph) + roots)
    failing = {f.importer for f in index.failures(oracle, roots) if f.module == "gone_dep"}
    assert failing == {"svc.main"}
    options = ProbeOptions(roots=("svc.main",), internal=("svc",), cache_dir="")
    spec = HostSpec(name="t", python=str(python))
    answers = reach(spec, LocalRunner("t"), options, [("svc.main", "module")], ["gone_dep"])
    got = answers.reached["gone_dep"]
    assert got.absent and got.context is None and got.wide is None
    assert {i.module: i.context for i in got.importers} == {m: oracle[m].context for m in failing}


def test_a_word_in_too_many_files_is_left_to_the_whole_walk(python: Path) -> None:
    got = ask(python, ROOTS[0], ["shared_dep"], wide=1)["shared_dep"]
    assert got.wide is not None and "may import shared_dep" in got.wide
    assert got.context is None


def test_a_script_run_as_main_is_climbed_to(python: Path, tmp_path: Path) -> None:
    script = tmp_path / "run.py"
    script.write_text("import leaf\n")
    options = ProbeOptions(roots=(f"script:{script}",), internal=("run",), cache_dir="")
    spec = HostSpec(name="t", python=str(python))
    graph = collect(spec, LocalRunner("t"), options).startup
    assert graph is not None
    root = Root(module="__main__", reason="the script", label="script")
    oracle = GraphIndex(graph).reach((*site_roots(graph), root))
    assert oracle["leafdep"].context == "module"
    answers = reach(spec, LocalRunner("t"), options, [("__main__", "module")], ["leaf", "leafdep"])
    got = answers.reached
    assert (got["leaf"].context, got["leafdep"].context) == ("module", "module")
    assert got["leafdep"].path == ("__main__", "leaf", "leafdep")
