"""Calls made at import into other modules, followed to the imports they make.

A web framework's shape, in a wheel of its own (`webkit`): an app made at module level,
a route decorator factory (a method) whose decorator registers the route through
another method, which makes the route through a class held on `self` (a parameter's
default, as FastAPI's `route_class`), whose `__init__` calls a function of a third
module that checks for an optional package, its ImportError turned into a
RuntimeError. The service's own module only makes the app and decorates a route: what
runs is all in the framework's modules. The target lacks the optional package.

Ground truth is a real import of the service on each side, and the framework's own
source, line by line, written here.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.figures import add
from tests.helpers import (
    import_service,
    make_venv,
    make_wheel,
    pair_findings,
    pip_install,
    site_packages,
)

pytestmark = pytest.mark.slow

SECTION = "startup truth (issue 45, calls into other modules)"

CHECKS = """\
def ensure_formparts():
    try:
        from formparts import __version__
    except ImportError:
        raise RuntimeError('Form data requires "formparts" to be installed.') from None
    return __version__
"""

ROUTING = """\
from webkit import checks


class Route:
    def __init__(self, path, endpoint):
        self.path = path
        self.form = checks.ensure_formparts()


class Router:
    def __init__(self, route_class=Route):
        self.route_class = route_class
        self.routes = []

    def route(self, path):
        def decorator(func):
            self.add_route(path, func)
            return func

        return decorator

    def add_route(self, path, func):
        route = self.route_class(path, func)
        self.routes.append(route)
"""

APPLICATION = """\
from webkit import routing


class App:
    def __init__(self):
        self.router = routing.Router()

    def post(self, path):
        return self.router.route(path)
"""

INIT = "from webkit.application import App\n"
SHARED = "from webkit.application import App\n\napp = App()\n"

FRAMEWORK = {
    "webkit/__init__.py": INIT,
    "webkit/checks.py": CHECKS,
    "webkit/routing.py": ROUTING,
    "webkit/application.py": APPLICATION,
    "webkit/shared.py": SHARED,
}

SERVICES = {
    # the app made here, its route decorated at module level: dies on the target
    "made_here": 'from webkit import App\n\napp = App()\n\n\n@app.post("/upload")\n'
    "def upload():\n    return 1\n",
    # the app made in another module (webkit.shared), imported: dies the same
    "made_there": 'from webkit.shared import app\n\nPATH = "/upload"\n\n\n@app.post("/upload")\n'
    "def upload():\n    return 1\n",
    # the route added only when a function runs: starts
    "when_called": "from webkit import App\n\napp = App()\n\n\ndef upload():\n    return 1\n\n\n"
    'def setup():\n    app.post("/upload")(upload)\n',
    # the route added only where a variable is set: starts here (unset)
    "under_if": 'import os\n\nfrom webkit import App\n\napp = App()\n\nif os.environ.get("UPLOADS"):\n\n'
    '    @app.post("/upload")\n    def upload():\n        return 1\n',
}

# the framework's lines the failure runs through, as a real start's traceback shows them
FRAMES = (
    ("svc/main.py", 6, '@app.post("/upload")'),
    ("webkit/routing.py", 17, "self.add_route(path, func)"),
    ("webkit/routing.py", 23, "route = self.route_class(path, func)"),
    ("webkit/routing.py", 7, "self.form = checks.ensure_formparts()"),
    (
        "webkit/checks.py",
        5,
        "raise RuntimeError('Form data requires \"formparts\" to be installed.') from None",
    ),
)


@pytest.fixture(scope="module")
def bed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("across")
    w = root / "wheels"
    parts = make_wheel(
        w, "formparts", "0.0.20", {"formparts/__init__.py": '__version__ = "0.0.20"\n'}
    )
    kit = make_wheel(w, "webkit", "1.0", FRAMEWORK)
    for name, text in SERVICES.items():
        svc = make_wheel(w / name, "svc", "1.0", {"svc/__init__.py": "", "svc/main.py": text})
        pip_install(make_venv(root / name / "ref"), svc, kit, parts)
        pip_install(make_venv(root / name / "tgt"), svc, kit)
    return root


def _verdict(bed: Path, name: str, capsys: pytest.CaptureFixture[str], *args: str) -> dict:
    return pair_findings(capsys, bed / name, *args)["formparts"]


def _start(bed: Path, name: str, side: str) -> subprocess.CompletedProcess[str]:
    return import_service(bed / name / side / "bin" / "python")


@pytest.mark.parametrize("name", ["made_here", "made_there"])
def test_a_check_run_through_calls_into_the_framework_is_startup(
    bed: Path, name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    site = site_packages(bed / name / "tgt" / "bin" / "python")
    for file, line, text in FRAMES:
        assert (site / file).read_text().splitlines()[line - 1].strip() == text, (file, line)
    assert _start(bed, name, "ref").returncode == 0
    dies = _start(bed, name, "tgt")
    assert 'RuntimeError: Form data requires "formparts" to be installed.' in dies.stderr
    for file, line, _ in FRAMES[1:]:
        assert f'{file}", line {line}' in dies.stderr, (file, line, dies.stderr)
    found = _verdict(bed, name, capsys)
    # read, never run: the calls are followed to the check, with the values they may take
    # (read as sets, not proven): startup can run it, so never "fails later"; not fatal
    assert found["severity"] == "risky", found
    (read,) = [e for e in found["evidence"] if e["file"] and e["file"].endswith("checks.py")]
    assert (read["line"], read["statement"]) == (3, "from formparts import __version__")
    assert read["context"].startswith("if;"), read
    # the calls, as the traceback has them: the decorator at the service's line, the
    # framework's lines after it
    assert 'svc/main.py:6 @app.post("/upload")' in read["context"], read
    steps = "webkit/routing.py:17 -> webkit/routing.py:23 -> webkit/routing.py:7"
    assert steps in read["context"], read
    # imported, it is decided
    checked = _verdict(bed, name, capsys, "--import-check")
    assert (checked["severity"], checked["decided_by"]) == ("fatal", "import-check"), checked
    add(SECTION, "a check run through calls into the framework, read as startup")


@pytest.mark.parametrize("name", ["when_called", "under_if"])
def test_the_same_route_not_decorated_at_import_is_not_fatal(
    bed: Path, name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    for side in ("ref", "tgt"):
        assert _start(bed, name, side).returncode == 0
    found = _verdict(bed, name, capsys)
    assert found["severity"] != "fatal", found
    if name == "under_if":
        # decorated where a variable is set: the check runs under that `if`
        (read,) = [e for e in found["evidence"] if e["file"] and e["file"].endswith("checks.py")]
        assert read["context"].startswith("if;"), read
    add(SECTION, "a route not decorated at import, read: not fatal")
