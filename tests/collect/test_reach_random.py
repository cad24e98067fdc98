"""Reachability by demand (envsync/collect/reach.py) against the whole walk, its oracle, on
a real venv changed at random: edits, installs, removals and patches, one at a time.

The venv holds a small service (`svc`, a console script and `-m svc`) and a few packages
of the shapes real ones take (make_wheel, installed by real pip): absolute and relative
imports, `from package import module`, `__init__` re-exports, guards, imports in
functions, under conditions and for a type checker, a lazy `__getattr__` table,
`importlib.import_module` of constant strings and of a package's prefix, a .pth line.
Each step changes the venv one way, chosen at random: a line of a module's text (an
import added in one of those forms or removed, an import moved into a function or a
try, a syntax error), a wheel installed, replaced or removed (`pip --no-deps`), a module
file removed or added, an `__init__`'s re-exports or lazy table rewritten. After each,
the whole walk (the probe's startup graph, GraphIndex's reach) and the reachability
program answer the same handful of questions (reached modules, unreached ones, missing
ones, the one just changed), and must agree: the same context and a path of it that the
whole graph has; for a missing module, the same importers as surely reached; or `wide`,
the walk's question, which is allowed but counted and must stay rare.

A failure names its seed and step: REACH_RANDOM_SEED=N (and REACH_RANDOM_STEPS=M, the
steps to replay) run the same steps again.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from envsync.classify.graph import GraphIndex, Reach
from envsync.classify.rules import Root
from envsync.classify.startup import site_roots
from envsync.collect import ProbeOptions, collect
from envsync.collect.reach import Reached, reach
from envsync.model.environment import StartupGraph
from envsync.model.vocab import Context
from envsync.runner.local import LocalRunner
from envsync.sources.inventory import HostSpec
from tests.collect.test_reach import holds_path
from tests.figures import add
from tests.helpers import make_venv, make_wheel, site_packages

SEED = int(os.environ.get("REACH_RANDOM_SEED", "44"))
STEPS = int(os.environ.get("REACH_RANDOM_STEPS", "200"))
SECTION = "reachability by demand (random steps)"


def lazy(table: str) -> str:
    """A package whose __getattr__ serves names from a table of its submodules."""
    return (
        f"_LAZY = {table}\n"
        "def __getattr__(name):\n"
        "    if name in _LAZY:\n"
        "        import importlib\n"
        "        return getattr(importlib.import_module(_LAZY[name], __name__), name)\n"
        "    raise AttributeError(name)\n"
    )


SVC = {
    "svc/__init__.py": "from .config import settings\n",
    "svc/__main__.py": "from svc.cli import main\n\nif __name__ == '__main__':\n    main()\n",
    "svc/config.py": "import os\nfrom alpha import core\n\nsettings = {}\n",
    "svc/cli.py": (
        "import argparse\n"
        "from svc import server\n"
        "\n"
        "def main():\n"
        "    from svc import routes\n"
        "    import gamma\n"
        "    from gamma import Core\n"
        "    return gamma.Engine\n"
        "\n"
        "def later():\n"
        "    import zeta.sub\n"
    ),
    "svc/server.py": (
        "import os\n"
        "import alpha\n"
        "from alpha.io import reader\n"
        "try:\n"
        "    import beta.fast as fast\n"
        "except ImportError:\n"
        "    fast = None\n"
        'if os.environ.get("SVC_DEBUG"):\n'
        "    import svc.debug\n"
        "from gamma import Tool\n"
    ),
    "svc/routes.py": "from delta import registry\nfrom . import plugins\n",
    "svc/debug.py": "import epsilon\n",
    "svc/plugins/__init__.py": (
        "import importlib\n"
        'for _n in ("auth", "cache"):\n'
        '    importlib.import_module("svc.plugins." + _n)\n'
    ),
    "svc/plugins/auth.py": "import beta\n",
    "svc/plugins/cache.py": "from zeta import sub\n",
    "svc/plugins/extra.py": "import eta\n",
    "svc-1.0.dist-info/entry_points.txt": "[console_scripts]\nsvc-serve = svc.cli:main\n",
}
PACKAGES: dict[tuple[str, str], dict[str, str]] = {
    ("svc", "1.0"): SVC,
    ("alpha", "1.0"): {
        "alpha/__init__.py": "from .core import Core\nfrom . import io\n__all__ = ['Core']\n",
        "alpha/core.py": "import json\nfrom alpha.util import helper\n\nclass Core:\n    pass\n",
        "alpha/util.py": "def helper():\n    pass\n",
        "alpha/io/__init__.py": "from .reader import read\n",
        "alpha/io/reader.py": "from ..util import helper\nimport epsilon\n\ndef read():\n    pass\n",
        "alpha/extra.py": "import zeta\n",
    },
    ("alpha", "2.0"): {
        "alpha/__init__.py": "from .core import Core\nfrom .io import stream\nfrom . import extra\n",
        "alpha/core.py": "from alpha.util import helper\nclass Core:\n    pass\n",
        "alpha/util.py": "import eta\n",
        "alpha/io/__init__.py": "",
        "alpha/io/stream.py": "from . import reader\n",
        "alpha/io/reader.py": "import epsilon\n",
        "alpha/extra.py": "try:\n    import zeta.sub\nexcept ImportError:\n    pass\n",
    },
    ("beta", "1.0"): {
        "beta/__init__.py": (
            "try:\n    from ._speedups import fast\nexcept ImportError:\n    fast = None\n"
        ),
        "beta/_speedups.py": "fast = 1\n",
        "beta/fast.py": (
            "import sys\n"
            "from typing import TYPE_CHECKING\n"
            "if TYPE_CHECKING:\n"
            "    import zeta\n"
            'if sys.platform == "win32":\n'
            "    import beta.win\n"
            "\n"
            "def slow():\n"
            "    import eta\n"
        ),
        "beta/win.py": "import omega\n",
    },
    ("gamma", "1.0"): {
        "gamma/__init__.py": lazy('{"Engine": ".engine", "Tool": ".tools"}'),
        "gamma/engine.py": "import epsilon\nEngine = 1\n",
        "gamma/tools.py": "from zeta import sub\nTool = 1\n",
    },
    ("gamma", "1.1"): {
        "gamma/__init__.py": lazy('{"Engine": ".engine2", "Tool": ".tools", "Core": ".impl.core"}'),
        "gamma/engine2.py": "from .tools import Tool\nEngine = 2\n",
        "gamma/impl/__init__.py": "import epsilon\n",
        "gamma/impl/core.py": "from .. import engine2\nCore = 1\n",
        "gamma/tools.py": "Tool = 1\n",
    },
    ("delta", "1.0"): {
        "delta/__init__.py": (
            'import importlib\n_backend = importlib.import_module("delta.backends.default")\n'
        ),
        "delta/registry.py": (
            "import importlib\n"
            'for _n in ("one", "two"):\n'
            '    importlib.import_module("delta.plugins." + _n)\n'
        ),
        "delta/backends/__init__.py": "",
        "delta/backends/default.py": "import zeta\n",
        "delta/backends/other.py": "import eta\n",
        "delta/plugins/__init__.py": "",
        "delta/plugins/one.py": "import epsilon\n",
        "delta/plugins/two.py": "from svc import config\n",
    },
    ("epsilon", "1.0"): {
        "epsilon.py": "VALUE = 1\n",
        "epsilon_boot.py": "import os\n",
        "epsilon-init.pth": "import epsilon_boot\n",
    },
    ("zeta", "1.0"): {"zeta/__init__.py": "", "zeta/sub.py": "import json\n"},
    ("zeta", "2.0"): {"zeta/__init__.py": "from . import sub\n", "zeta/sub.py": "import eta\n"},
    ("eta", "1.0"): {"eta/__init__.py": "from .core import *\n", "eta/core.py": "X = 1\n"},
}
FIRST = {"svc": "1.0", "alpha": "1.0", "beta": "1.0", "gamma": "1.0", "delta": "1.0"}
FIRST |= {"epsilon": "1.0", "zeta": "1.0"}
TOPS = ("svc", "alpha", "beta", "gamma", "delta", "epsilon", "epsilon_boot", "zeta", "eta")
# names no wheel has, some of which a step may write as files
NEVER = ("omega", "svc.gone", "alpha.missing", "gamma.nothing", "zeta.deep.er", "eta.core.x")
STDLIB = ("json", "os")
# the launches tried: (the probe's roots, envsync's roots, main)
LAUNCHES: tuple[tuple[tuple[str, ...], tuple[Root, ...], str | None], ...] = (
    (("console:svc-serve",), (Root(module="svc.cli", reason="the script", label="entry"),), None),
    (("svc",), (Root(module="svc", reason="-m svc", label="entry"),), "svc.__main__"),
    (
        ("console:svc-serve", "svc.plugins.extra"),
        (
            Root(module="svc.cli", reason="the script", label="entry"),
            Root(module="svc.plugins.extra", reason="a flag", label="flag", context="if"),
        ),
        None,
    ),
)
GOVERNED = ((), ("zeta.sub",), ("gamma",))


def universe() -> list[str]:
    """Every module name any wheel has, and some no wheel has."""
    names = set(NEVER)
    for files in PACKAGES.values():
        for rel in files:
            if rel.endswith(".py"):
                names.add(module_of(rel))
    return sorted(names)


def module_of(rel: str) -> str:
    parts = rel[: -len(".py")].split("/")
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@dataclass
class Bed:
    """The venv, its wheels, and what the steps did (replayed from the seed)."""

    python: Path
    site: Path
    wheels: dict[tuple[str, str], Path]
    rng: random.Random
    log: list[str] = field(default_factory=list)
    touched: list[str] = field(default_factory=list)  # modules the last step changed
    made: list[str] = field(default_factory=list)  # modules the steps added files for
    reached: list[str] = field(default_factory=list)  # what the last walk reached
    n: int = 0  # blocks written

    # -- what is there ----------------------------------------------------------------

    def files(self) -> dict[str, Path]:
        """Module name -> its file, for the packages of the bed."""
        out = {}
        for path in sorted(self.site.rglob("*.py")):
            rel = path.relative_to(self.site).as_posix()
            if rel.split("/")[0].removesuffix(".py") in TOPS and "__pycache__" not in rel:
                out[module_of(rel)] = path
        return out

    def installed(self) -> list[str]:
        return sorted(
            p.name.split("-")[0] for p in self.site.glob("*.dist-info") if p.name[0] != "_"
        )

    def names(self) -> list[str]:
        return sorted({*universe(), *self.made, *self.files()})

    # -- pip --------------------------------------------------------------------------

    def pip(self, *args: str) -> None:
        subprocess.run(
            [sys.executable, "-m", "pip", "--python", str(self.python), *args],
            check=True,
            capture_output=True,
        )

    def install(self, name: str, version: str) -> None:
        wheel = str(self.wheels[(name, version)])
        flags = ("-q", "--no-deps", "--no-index", "--force-reinstall")
        self.pip("install", *flags, "--disable-pip-version-check", wheel)
        self.touched = [module_of(r) for r in PACKAGES[(name, version)] if r.endswith(".py")]

    # -- the steps --------------------------------------------------------------------

    def step(self) -> str:
        """One change, chosen at random; what it did, in words."""
        steps: list[tuple[int, Callable[[], str]]] = [
            (30, self.add_import),
            (12, self.remove_import),
            (8, self.move_import),
            (4, self.syntax_error),
            (7, self.pip_step),
            (7, self.remove_file),
            (7, self.add_file),
            (8, self.reexport),
            (3, self.retable),
            (2, self.site_hook),
            (2, self.pkgutil_door),
            (3, self.repair),
        ]
        self.touched = []
        choice = self.rng.choices([s for _, s in steps], [w for w, _ in steps])[0]
        said = choice()
        self.log.append(said)
        return said

    def target(self) -> str:
        return self.rng.choice([n for n in self.names() if n != "svc.__main__"])

    def statement(self, module: str, target: str, package: str) -> str:
        """An import of `target` written in `module` (of `package`), in a form at random."""
        rng = self.rng
        parent, _, last = target.rpartition(".")
        forms = ["import", "import", "function", "try", "if", "typing", "call", "called"]
        forms += ["dunder", "fallback", "version", "suppress", "alias", "else"]
        if parent:
            forms += ["from", "from", "star"]
        if target.partition(".")[0] == module.partition(".")[0] and package:
            forms += ["relative", "relative"]
        if "." not in target and target in self.packages():
            forms.append("door")
        form = rng.choice(forms)
        if form == "from":
            return f"from {parent} import {last}\n"
        if form == "relative":
            return relative(package, target)
        if form == "function":
            return f"def _f{self.n}():\n    import {target}\n"
        if form == "try":
            return f"try:\n    import {target}\nexcept ImportError:\n    pass\n"
        if form == "if":
            return f'import os\nif os.environ.get("REACH_{self.n}"):\n    import {target}\n'
        if form == "typing":
            return f"from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import {target}\n"
        if form == "call":
            return f'import importlib\nimportlib.import_module("{target}")\n'
        if form == "called":  # a function the module calls while it is imported
            return f"def _f{self.n}():\n    import {target}\n_f{self.n}()\n"
        if form == "dunder":
            return f'__import__("{target}")\n'
        if form == "star":
            return f"from {parent} import *\n"
        if form == "fallback":
            other = self.target()
            return f"try:\n    import {target}\nexcept ImportError:\n    import {other}\n"
        if form == "version":
            return f"import sys\nif sys.version_info >= (3, 8):\n    import {target}\n"
        if form == "suppress":
            return (
                f"import contextlib\nwith contextlib.suppress(ImportError):\n    import {target}\n"
            )
        if form == "alias":
            return (
                f"from {parent} import {last} as _a{self.n}\n"
                if parent
                else f"import {target} as _a{self.n}\n"
            )
        if form == "else":
            return (
                "from typing import TYPE_CHECKING\n"
                f"if TYPE_CHECKING:\n    import {self.target()}\nelse:\n    import {target}\n"
            )
        if form == "door":
            subs = ", ".join(repr(s) for s in rng.sample(["core", "sub", "io", "tools", "x"], 2))
            return (
                f"import importlib\nfor _n in ({subs}):\n"
                f'    importlib.import_module("{target}." + _n)\n'
            )
        return f"import {target}\n"

    def packages(self) -> set[str]:
        return {m for m, p in self.files().items() if p.name == "__init__.py"}

    def pick(self) -> tuple[str, Path] | None:
        files = self.files()
        if not files:
            return None
        module = self.rng.choice(sorted(files))
        return module, files[module]

    def add_import(self) -> str:
        picked = self.pick()
        if picked is None:
            return "nothing to edit"
        module, path = picked
        target = self.target()
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        self.n += 1
        text = self.statement(module, target, package)
        block = f"# <r{self.n}>\n{text}# </r{self.n}>\n"
        old = path.read_text()
        path.write_text(old + ("" if old.endswith("\n") or not old else "\n") + block)
        self.touched = [module, target]
        return f"{module}: appended {text!r}"

    def remove_import(self) -> str:
        picked = self.pick()
        if picked is None:
            return "nothing to edit"
        module, path = picked
        lines = path.read_text().splitlines(keepends=True)
        blocks = [i for i, line in enumerate(lines) if line.startswith("# <r")]
        plain = [i for i, line in enumerate(lines) if _plain_import(line)]
        if blocks and (not plain or self.rng.random() < 0.6):
            start = self.rng.choice(blocks)
            tag = lines[start].strip()[3:-1]
            end = next(
                (i for i in range(start, len(lines)) if lines[i].strip() == f"# </{tag}>"),
                start,
            )
            gone = "".join(lines[start : end + 1])
            del lines[start : end + 1]
        elif plain:
            i = self.rng.choice(plain)
            gone = lines.pop(i)
        else:
            return f"{module}: no import to remove"
        path.write_text("".join(lines))
        self.touched = [module]
        return f"{module}: removed {gone!r}"

    def move_import(self) -> str:
        picked = self.pick()
        if picked is None:
            return "nothing to edit"
        module, path = picked
        lines = path.read_text().splitlines(keepends=True)
        plain = [i for i, line in enumerate(lines) if _plain_import(line)]
        if not plain:
            return f"{module}: no import to move"
        i = self.rng.choice(plain)
        line = lines[i].rstrip("\n")
        self.n += 1
        if self.rng.random() < 0.5:
            lines[i] = f"def _moved{self.n}():\n    {line}\n"
            where = "a function"
        else:
            lines[i] = f"try:\n    {line}\nexcept ImportError:\n    pass\n"
            where = "a try"
        path.write_text("".join(lines))
        self.touched = [module]
        return f"{module}: moved {line!r} into {where}"

    def syntax_error(self) -> str:
        picked = self.pick()
        if picked is None:
            return "nothing to edit"
        module, path = picked
        self.n += 1
        text = path.read_text()
        path.write_text(text + f"# <r{self.n}>\ndef broken(:\n# </r{self.n}>\n")
        self.touched = [module]
        return f"{module}: a syntax error appended"

    def pip_step(self) -> str:
        installed = [d for d in self.installed() if d != "svc"]
        if installed and self.rng.random() < 0.35:
            name = self.rng.choice(installed)
            self.touched = [
                module_of(r)
                for (n, _), files in PACKAGES.items()
                if n == name
                for r in files
                if r.endswith(".py")
            ]
            self.pip("uninstall", "-q", "-y", "--disable-pip-version-check", name)
            return f"pip uninstall {name}"
        name, version = self.rng.choice(sorted(PACKAGES))
        self.install(name, version)
        return f"pip install --no-deps --force-reinstall {name}=={version}"

    def remove_file(self) -> str:
        picked = self.pick()
        if picked is None:
            return "nothing to remove"
        module, path = picked
        if path.name == "__init__.py" and self.rng.random() < 0.7:
            return f"{module}: kept its __init__.py"
        path.unlink()
        self.touched = [module]
        return f"removed {path.relative_to(self.site)}"

    def add_file(self) -> str:
        rng = self.rng
        packages = sorted(self.packages())
        if packages and rng.random() < 0.8:
            package = rng.choice(packages)
            name = f"{package}.{rng.choice(['gone', 'missing', 'nothing', 'new', 'sub', 'x'])}"
        else:
            package, name = "", rng.choice(["omega", "eta", "epsilon", "fresh"])
        if name in self.files():
            return f"{name}: already there"
        path = self.site.joinpath(*name.split(".")).with_suffix(".py")
        text = "".join(
            self.statement(name, self.target(), package) for _ in range(rng.randint(0, 2))
        )
        path.write_text(text)
        self.made.append(name)
        self.touched = [name]
        return f"added {path.relative_to(self.site)}: {text!r}"

    def site_hook(self) -> str:
        """A .pth line or a sitecustomize: what site runs at every start."""
        if self.rng.random() < 0.5:
            path, text = self.site / "reach-hook.pth", f"import {self.target()}\n"
        else:
            path, text = (
                self.site / "sitecustomize.py",
                self.statement("sitecustomize", self.target(), ""),
            )
        if path.exists() and self.rng.random() < 0.5:
            path.unlink()
            return f"removed {path.name}"
        path.write_text(text)
        self.touched = ["sitecustomize"]
        return f"wrote {path.name}: {text!r}"

    def pkgutil_door(self) -> str:
        """An __init__ that imports every module of its folder (pkgutil)."""
        packages = sorted(self.packages())
        if not packages:
            return "no package"
        package = self.rng.choice(packages)
        path = self.files()[package]
        self.n += 1
        block = (
            f"# <r{self.n}>\nimport importlib, pkgutil\n"
            "for _m in pkgutil.iter_modules(__path__):\n"
            '    importlib.import_module(__name__ + "." + _m.name)\n'
            f"# </r{self.n}>\n"
        )
        old = path.read_text()
        path.write_text(old + ("" if old.endswith("\n") or not old else "\n") + block)
        self.touched = [package]
        return f"{package}: imports every module of its folder"

    def repair(self) -> str:
        """A package put back as its wheel has it (what the steps did to it undone)."""
        installed = self.installed()
        name = self.rng.choice(installed)
        version = self.rng.choice(sorted(v for n, v in PACKAGES if n == name))
        self.install(name, version)
        return f"pip install --force-reinstall {name}=={version} (a repair)"

    def reexport(self) -> str:
        packages = sorted(self.packages())
        if not packages:
            return "no package"
        package = self.rng.choice(packages)
        path = self.files()[package]
        subs = [m for m in self.names() if m.rpartition(".")[0] == package]
        sub = self.rng.choice([*subs, f"{package}.absent"]).rpartition(".")[2]
        line = self.rng.choice(
            [f"from . import {sub}\n", f"from .{sub} import *\n", f"from .{sub} import Thing\n"]
        )
        self.n += 1
        old = path.read_text()
        block = f"# <r{self.n}>\n{line}# </r{self.n}>\n"
        path.write_text(old + ("" if old.endswith("\n") or not old else "\n") + block)
        self.touched = [package, f"{package}.{sub}"]
        return f"{package}: re-exports {line!r}"

    def retable(self) -> str:
        path = self.site / "gamma" / "__init__.py"
        if not path.exists():
            return "no gamma"
        subs = [".engine", ".engine2", ".tools", ".missing", "gamma.tools", ".impl.core"]
        subs += ["zeta.sub", "eta.core", ".impl"]
        names = ("Engine", "Tool", "Core")
        table = {k: self.rng.choice(subs) for k in names if self.rng.random() < 0.8}
        path.write_text(lazy(repr(table)))
        self.touched = ["gamma", *(f"gamma{v}" if v[0] == "." else v for v in table.values())]
        return f"gamma's lazy table: {table}"


def relative(package: str, target: str) -> str:
    """`target` imported relative to `package` (their top package is the same)."""
    own = package.split(".")
    parts = target.split(".")
    common = 0
    while common < min(len(own), len(parts) - 1) and own[common] == parts[common]:
        common += 1
    dots = "." * (len(own) - common + 1)
    rest = parts[common:]
    if len(rest) == 1:
        return f"from {dots} import {rest[0]}\n"
    return f"from {dots}{'.'.join(rest[:-1])} import {rest[-1]}\n"


def _plain_import(line: str) -> bool:
    return line.startswith(("import ", "from ")) and not line.rstrip().endswith(("(", "\\"))


@pytest.fixture(scope="module")
def bed(tmp_path_factory: pytest.TempPathFactory) -> Bed:
    root = tmp_path_factory.mktemp("reach-random")
    wheels = {
        key: make_wheel(root / "wheels", key[0], key[1], files) for key, files in PACKAGES.items()
    }
    python = make_venv(root / "venv")
    bed = Bed(python, site_packages(python), wheels, random.Random(SEED))
    bed.pip(
        "install",
        "-q",
        "--no-deps",
        "--no-index",
        "--disable-pip-version-check",
        *(str(wheels[(n, v)]) for n, v in sorted(FIRST.items())),
    )
    return bed


def walk(python: Path, launch: tuple[str, ...], main: str | None) -> StartupGraph:
    options = ProbeOptions(roots=launch, internal=("svc",), cache_dir="", main=main)
    graph = collect(HostSpec(name="t", python=str(python)), LocalRunner("t"), options).startup
    assert graph is not None
    return graph


def ask(
    python: Path,
    launch: tuple[str, ...],
    main: str | None,
    roots: Sequence[Root],
    modules: Sequence[str],
    governed: Sequence[str],
) -> dict[str, Reached]:
    options = ProbeOptions(roots=launch, internal=("svc",), cache_dir="", main=main)
    spec = HostSpec(name="t", python=str(python))
    pairs: list[tuple[str, Context]] = [(r.module, r.context) for r in roots]
    return reach(spec, LocalRunner("t"), options, pairs, modules, governed=governed).reached


def disagreements(
    graph: StartupGraph, roots: Sequence[Root], governed: Sequence[str], got: dict[str, Reached]
) -> dict[str, object]:
    """What the demand answers say that the whole walk does not (empty: they agree)."""
    index = GraphIndex(graph, frozenset(governed))
    everything = (*site_roots(graph), *roots)
    oracle = index.reach(everything)
    wrong: dict[str, object] = {}
    for name, answer in got.items():
        if answer.wide is not None:
            continue
        facts = graph.modules.get(name)
        if facts is not None and facts.kind == "missing" and not answer.absent:
            wrong[name] = ("missing in the walk", answer)
            continue
        if answer.absent:
            if facts is not None and facts.kind != "missing":
                wrong[name] = (f"{facts.kind} in the walk, absent by demand", answer)
                continue
            want = importers(graph, name, oracle)
            have = {i.module: i.context for i in answer.importers if i.context is not None}
            if have != want:
                wrong[name] = ("importers", want, have)
            for i in answer.importers:
                if i.context is not None and not holds_path(index, everything, i):
                    wrong[name] = ("an importer's path", i)
            continue
        want_context = oracle[name].context if name in oracle else None
        if answer.context != want_context:
            wrong[name] = (want_context, answer.context, answer.path)
        elif want_context is not None and not holds_path(index, everything, answer):
            wrong[name] = ("path", want_context, answer.path)
    return wrong


def importers(graph: StartupGraph, name: str, oracle: Mapping[str, Reach]) -> dict[str, Context]:
    """The reached modules whose imports name the missing module `name` (or one under it),
    as surely as startup runs each."""
    parent, _, last = name.rpartition(".")
    out = {}
    for module, facts in graph.modules.items():
        how = oracle.get(module)
        if how is None:
            continue
        for edge in facts.imports:
            if edge.context != "typing" and (
                edge.module == name
                or edge.module.startswith(name + ".")
                or (edge.module == parent and last in edge.names)
            ):
                out[module] = how.context
    return out


def questions(bed: Bed) -> list[str]:
    """A handful: what the step changed, modules the walk reached the step before, modules
    there, names that may be missing."""
    rng = bed.rng
    there = sorted(bed.files())
    asked = [t for t in bed.touched if t][:4]
    asked += rng.sample(bed.reached, min(2, len(bed.reached)))
    asked += rng.sample(there, min(3, len(there)))
    asked += rng.sample(bed.names(), 3)
    if rng.random() < 0.1:
        asked.append(rng.choice(STDLIB))
    return sorted(set(asked))


@dataclass(frozen=True)
class Checked:
    said: str
    launch: tuple[str, ...]
    governed: tuple[str, ...]
    got: dict[str, Reached]
    wrong: dict[str, object]


def check(bed: Bed, pool: ThreadPoolExecutor, step: int) -> Checked:
    """Step `step` (0: none) taken, then the same questions asked of both."""
    rng = bed.rng
    said = bed.step() if step else "the venv as installed"
    launch, roots, main = rng.choice(LAUNCHES)
    governed = rng.choice(GOVERNED)
    asked = questions(bed)
    walked = pool.submit(walk, bed.python, launch, main)  # the two side by side
    got = ask(bed.python, launch, main, roots, asked, governed)
    graph = walked.result()
    wrong = disagreements(graph, roots, governed, got)
    index = GraphIndex(graph, frozenset(governed))
    bed.reached = sorted(
        n for n in index.reach((*site_roots(graph), *roots)) if n.partition(".")[0] in TOPS
    )
    return Checked(said, launch, governed, got, wrong)


@pytest.mark.slow
def test_demand_answers_as_the_whole_walk_after_each_random_step(
    bed: Bed, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the venv's sys.path is the host side's to search: not this repository's folders
    monkeypatch.delenv("PYTHONPATH", raising=False)
    compared = agreed = wide = 0
    with ThreadPoolExecutor(max_workers=1) as pool:
        for step in range(STEPS + 1):
            done = check(bed, pool, step)
            compared += len(done.got)
            wide += sum(1 for a in done.got.values() if a.wide is not None)
            agreed += sum(1 for n, a in done.got.items() if a.wide is None and n not in done.wrong)
            assert not done.wrong, (
                f"REACH_RANDOM_SEED={SEED} REACH_RANDOM_STEPS={step}: after {done.said!r}, "
                f"launch {done.launch}, governed {done.governed}: {done.wrong}\nsteps:\n"
                + "\n".join(bed.log)
            )
    add(SECTION, "steps", STEPS)
    add(SECTION, "answers compared", compared)
    add(SECTION, "answers agreeing with the whole walk", agreed)
    add(SECTION, "answers left to the whole walk (wide)", wide)
    assert wide <= compared // 50, f"{wide} of {compared} answers were left to the walk"


def test_a_missing_submodule_runs_its_package_first(tmp_path: Path) -> None:
    """The first disagreement the random steps found (seed 1, step 25: a sitecustomize
    holding `from zeta.deep import er`, zeta.deep missing): Python runs zeta/__init__.py
    before it fails to find zeta.deep, and demand said so; the whole walk read no parent
    of a missing module, and left zeta and what it imports out of startup."""
    python = make_venv(tmp_path / "venv")
    site = site_packages(python)
    files = {
        "svc/__init__.py": "",
        "svc/main.py": "from zeta.gone import x\n",
        "zeta/__init__.py": "import zdep\n",
        "zdep.py": "print('zdep ran')\n",
    }
    for rel, text in files.items():
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        (site / rel).write_text(text)
    real = subprocess.run(
        [str(python), "-c", "import svc.main"], capture_output=True, text=True, check=False
    )
    assert real.returncode == 1 and "No module named 'zeta.gone'" in real.stderr
    assert real.stdout == "zdep ran\n"  # zeta's own import ran first
    roots = (Root(module="svc.main", reason="the service", label="entry"),)
    graph = walk(python, ("svc.main",), None)
    oracle = GraphIndex(graph).reach((*site_roots(graph), *roots))
    assert (oracle["zeta"].context, oracle["zdep"].context) == ("module", "module")
    got = ask(python, ("svc.main",), None, roots, ["zeta", "zdep", "zeta.gone"], ())
    assert disagreements(graph, roots, (), got) == {}
    assert got["zdep"].path == ("svc.main", "zeta", "zdep")
