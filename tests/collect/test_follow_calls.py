"""Calls made at import, followed across modules (envsync/hostside/graph/follow.py): how
surely an import in a function of another module runs, read from modules written here,
each shape's truth by a real import in a child interpreter."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from envsync.hostside.graph import follow as follow_module
from envsync.hostside.graph.finder import ModuleFinder
from envsync.hostside.graph.follow import follow
from envsync.model.vocab import Context

pytestmark = pytest.mark.quick

LIB = """\
def load():
    import missing_mod


def setup(flag):
    if not flag:
        return
    import missing_mod


class Kit:
    @staticmethod
    def make():
        load()

    @classmethod
    def build(cls):
        return cls()

    def __init__(self):
        self.loader = load

    def go(self):
        self.loader()


def guarded(path):
    try:
        open(path)
    except OSError:
        return
    import missing_mod


def again(n):
    if n:
        again(n - 1)
    load()
"""

# (the app's source, the context envsync must give lib.py's line 2, or None for not run;
# whether a real import of the app dies)
SHAPES = {
    "plain": ("import lib\n\nlib.load()\n", "module", True),
    # after an early return the rest runs under a condition (here it returns): never sure
    "early-return": ("import lib\n\nlib.setup(False)\n", "if", False),
    "in-a-loop": ("import lib\n\nfor _ in []:\n    lib.load()\n", "if", False),
    "static": ("from lib import Kit\n\nKit.make()\n", "module", True),
    "held-on-self": ("from lib import Kit\n\nKit.build().go()\n", "module", True),
    "recursive": ("import lib\n\nlib.again(3)\n", "module", True),
    # a return in an except body: what follows runs only where the try went through
    "after-an-except-return": ("import lib\n\nlib.guarded('/nonexistent')\n", "if", False),
    "suppressed": (
        "import contextlib\n\nimport lib\n\nwith contextlib.suppress(ImportError):\n"
        "    lib.load()\n",
        "try",
        False,
    ),
    "main-block": ('import lib\n\nif __name__ == "__main__":\n    lib.load()\n', None, False),
    # a callee envsync cannot tell is not followed: nothing is said to run that may not
    "computed": ('import lib\n\ngetattr(lib, "lo" + "ad")()\n', None, True),
    "defined-only": ("import lib\n\n\ndef later():\n    lib.load()\n", None, False),
}


def _tree(tmp_path: Path, app: str) -> ModuleFinder:
    (tmp_path / "lib.py").write_text(LIB)
    (tmp_path / "app.py").write_text(app)
    return ModuleFinder([str(tmp_path)], {})


def _dies(tmp_path: Path, main: bool = False) -> bool:
    argv = [sys.executable, "-m", "app"] if main else [sys.executable, "-c", "import app"]
    ran = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True)
    if ran.returncode:
        assert "No module named 'missing_mod'" in ran.stderr, ran.stderr
    return ran.returncode != 0


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_how_surely_a_call_into_another_module_runs_its_import(tmp_path: Path, shape: str) -> None:
    app, context, dies = SHAPES[shape]
    finder = _tree(tmp_path, app)
    assert _dies(tmp_path) is dies
    allowed: dict[str, Context] = {"app": "module", "lib": "module"}
    targets = [("lib", 2), ("lib", 8), ("lib", 32)]
    got = follow(finder, allowed, targets)["answers"]
    found = got.get("lib:2") or got.get("lib:8") or got.get("lib:32")
    assert (found and found["context"]) == context, got
    if found and context == "module":
        # the chain starts at the app's own statement
        assert found["chain"][0][0].endswith("app.py"), found


def test_an_early_return_makes_the_rest_run_under_a_condition(tmp_path: Path) -> None:
    finder = _tree(tmp_path, "import lib\n\nlib.setup(True)\n")
    assert _dies(tmp_path)
    got = follow(finder, {"app": "module", "lib": "module"}, [("lib", 8)])["answers"]
    assert got["lib:8"]["context"] == "if", got


def test_the_main_block_runs_only_for_the_module_run_as_main(tmp_path: Path) -> None:
    finder = _tree(tmp_path, SHAPES["main-block"][0])
    assert _dies(tmp_path, main=True)
    got = follow(finder, {"app": "module", "lib": "module"}, [("lib", 2)], main="app")
    assert got["answers"]["lib:2"]["context"] == "module", got


def test_a_console_scripts_function_runs_after_its_module(tmp_path: Path) -> None:
    finder = _tree(tmp_path, "import lib\n\n\ndef main():\n    lib.load()\n")
    allowed: dict[str, Context] = {"app": "module", "lib": "module"}
    got = follow(finder, allowed, [("lib", 2)], runs={"app": ["main"]})["answers"]
    assert got["lib:2"]["context"] == "module"
    assert got["lib:2"]["chain"][0][1:] == [0, "main() (the console script calls it)"]
    assert follow(finder, allowed, [("lib", 2)])["answers"] == {}


def test_modules_not_allowed_are_not_read(tmp_path: Path) -> None:
    finder = _tree(tmp_path, "import lib\n\nlib.load()\n")
    got = follow(finder, {"app": "module"}, [("lib", 2)])
    assert (got["answers"], got["parsed"]) == ({}, 1)


def test_a_question_over_its_budget_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    finder = _tree(tmp_path, "import lib\n\nlib.again(3)\n")
    monkeypatch.setattr(follow_module, "RUNS", 1)
    got = follow(finder, {"app": "module", "lib": "module"}, [("lib", 2)])
    assert got["exhausted"] is True and got["answers"] == {}, got


@pytest.mark.parametrize(
    "app",
    [
        # calls deeper than envsync follows
        "".join(f"def f{i}():\n    f{i + 1}()\n\n\n" for i in range(60))
        + "def f60():\n    lib.load()\n\n\nf0()\n",
        # an expression nested deeper than the stack allows reading it
        "X = " + " + ".join(['"a"'] * 2000) + "\nlib.load()\n",
    ],
    ids=["deep-calls", "deep-expression"],
)
def test_what_is_too_deep_to_follow_ends_the_question_not_the_run(tmp_path: Path, app: str) -> None:
    finder = _tree(tmp_path, "import lib\n\n" + app)
    got = follow(finder, {"app": "module", "lib": "module"}, [("lib", 2)])
    assert got["answers"] == {} and got["exhausted"] is True, got
