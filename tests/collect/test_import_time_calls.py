"""Functions a module calls while it is imported run at startup, however Python calls them:
a decorator (`@f`, `@f(...)` and the function it returns, `@app.post(...)` on an instance
the module made), a class body, a default argument, a class made at module level (its
`__init__`). Their imports are read in the context of the call (analyze_source), where
they used to be lazy imports that "fail later". A function nothing calls while the
module runs keeps its imports in "function": nothing is said to run that may not."""

from __future__ import annotations

import textwrap

import pytest

from envsync.hostside.graph.analyse import analyze_source
from tests.figures import add

SECTION = "startup truth (issue 45, cases held)"

# FastAPI's ensure_multipart_is_installed (fastapi/dependencies/utils.py), which a route
# with Form() parameters runs while its decorator is applied.
ENSURE = """\
def ensure():
    try:
        from python_multipart import __version__
        assert __version__ > "0.0.12"
    except (ImportError, AssertionError):
        raise RuntimeError("Form data requires python-multipart to be installed") from None
"""

RUN = [
    (  # a decorator
        ENSURE + "def form(fn):\n    ensure()\n    return fn\n\n@form\ndef upload():\n    pass\n",
        "ensure",
    ),
    (  # a decorator factory: it runs, and so does the decorator it returns
        ENSURE + "def route(path):\n    def deco(fn):\n        ensure()\n        return fn\n"
        "    return deco\n\n@route('/upload')\ndef upload():\n    pass\n",
        "ensure",
    ),
    (  # a route decorator on an instance the module made
        ENSURE + "class App:\n    def post(self, path):\n        def deco(fn):\n"
        "            self.add_route(fn)\n            return fn\n        return deco\n\n"
        "    def add_route(self, fn):\n        ensure()\n\n\napp = App()\n\n\n"
        "@app.post('/upload')\nasync def upload():\n    pass\n",
        "ensure",
    ),
    (  # a class body
        ENSURE + "class Form:\n    checked = ensure()\n",
        "ensure",
    ),
    (  # a default argument
        ENSURE + "def upload(checked=ensure()):\n    pass\n",
        "ensure",
    ),
    (  # a class made at module level: its __init__ runs
        ENSURE + "class Parser:\n    def __init__(self):\n        ensure()\n\nPARSER = Parser()\n",
        "ensure",
    ),
]

LATER = [
    # defined, never applied
    ENSURE + "def route(path):\n    def deco(fn):\n        ensure()\n        return fn\n"
    "    return deco\n\ndef upload():\n    pass\n",
    # a factory that runs, but whose decorator is never applied: only what it runs itself
    ENSURE + "def route(path):\n    def deco(fn):\n        ensure()\n        return fn\n"
    "    return deco\n\nmaker = route('/upload')\n",
    # a method of a class never made, nor called
    ENSURE + "class App:\n    def post(self):\n        ensure()\n",
    # a decorator the module did not define: not followed, nothing invented
    ENSURE + "import functools\n\n@functools.lru_cache\ndef upload():\n    pass\n",
    # a lambda's body runs when it is called
    ENSURE + "handler = lambda: ensure()\n",
]


def context_of_multipart(source: str) -> set[str]:
    facts = analyze_source(textwrap.dedent(source), "svc.main", False)
    return {e["context"] for e in facts["imports"] if e["module"] == "python_multipart"}


@pytest.mark.parametrize("source, function", RUN)
def test_a_function_called_while_the_module_runs_imports_at_startup(
    source: str, function: str
) -> None:
    facts = analyze_source(source, "svc.main", False)
    (edge,) = [e for e in facts["imports"] if e["module"] == "python_multipart"]
    assert edge["context"] == "module", edge  # the re-raising handler guards nothing
    assert edge["condition"].startswith(f"{function}() runs while the module runs"), edge
    add(SECTION, "3 calls at import time: each form, a unit case")


@pytest.mark.parametrize("source", LATER)
def test_a_function_nothing_calls_while_the_module_runs_stays_lazy(source: str) -> None:
    assert context_of_multipart(source) == {"function"}
    add(SECTION, "3 calls at import time: a unit negative control")


def test_a_method_and_a_function_of_one_name_are_told_apart() -> None:
    """A method named as a module-level function is not that function: calling one runs
    neither the other's imports."""
    source = (
        "def build():\n    import alpha\n\n"
        "class Plugin:\n    def build(self):\n        import beta\n\nbuild()\n"
    )
    facts = analyze_source(source, "svc.main", False)
    contexts = {e["module"]: e["context"] for e in facts["imports"]}
    assert contexts == {"alpha": "module", "beta": "function"}


def test_a_call_under_a_condition_in_a_called_function_runs_under_it() -> None:
    """FastAPI checks for python-multipart only for a route with form parameters: the
    check runs at startup under a condition envsync cannot decide ("if"), not surely."""
    source = ENSURE + (
        "def route(fn):\n    if getattr(fn, 'form', False):\n        ensure()\n    return fn\n\n"
        "@route\ndef upload():\n    pass\n"
    )
    assert context_of_multipart(source) == {"if"}
