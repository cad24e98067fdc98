"""A check that a route decorator makes while the module is imported is startup.

The shape of FastAPI's: a route whose parameters are form data makes the framework check
for python-multipart as the route decorator runs, turning the ImportError into a
RuntimeError (fastapi/dependencies/utils.py, ensure_multipart_is_installed). Here the
service's own module holds the framework's shape (an app made at module level, a route
decorator that registers the route, a check that imports the optional package); the
target lacks the optional package. Ground truth is a real import on each side: where the
route is decorated at module level the target dies while the module is imported, and
envsync must not call the missing package `degraded` ("fails later"); where the route
is only added when a function is called, it starts, and `degraded` is right.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.figures import add
from tests.helpers import import_service, make_venv, make_wheel, pair_findings, pip_install

pytestmark = pytest.mark.slow

SECTION = "startup truth (issue 45, cases held)"

APP = """\
def ensure_multipart_is_installed():
    try:
        from formparts import __version__

        assert __version__ > "0.0.12"
    except (ImportError, AssertionError):
        raise RuntimeError(
            'Form data requires "formparts" to be installed.'
        ) from None


class App:
    def __init__(self):
        self.routes = []

    def post(self, path):
        def decorator(func):
            self.add_route(path, func)
            return func

        return decorator

    def add_route(self, path, func):
        if getattr(func, "form", False):
            ensure_multipart_is_installed()
        self.routes.append((path, func))


def form(func):
    func.form = True
    return func


app = App()
"""

AT_IMPORT = (
    APP
    + """

@app.post("/upload")
@form
def upload():
    return "ok"
"""
)

WHEN_CALLED = (
    APP
    + """

def upload():
    return "ok"


def setup():
    app.post("/upload")(form(upload))
"""
)


@pytest.fixture(scope="module")
def bed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("decorator")
    w = root / "wheels"
    parts = make_wheel(
        w, "formparts", "0.0.20", {"formparts/__init__.py": '__version__ = "0.0.20"\n'}
    )
    for name, text in (("at_import", AT_IMPORT), ("when_called", WHEN_CALLED)):
        svc = make_wheel(w / name, "svc", "1.0", {"svc/__init__.py": "", "svc/main.py": text})
        pip_install(make_venv(root / name / "ref"), svc, parts)
        pip_install(make_venv(root / name / "tgt"), svc)
    return root


def _verdict(bed: Path, name: str, capsys: pytest.CaptureFixture[str], *args: str) -> dict:
    return pair_findings(capsys, bed / name, *args)["formparts"]


def _starts(bed: Path, name: str, side: str) -> subprocess.CompletedProcess[str]:
    return import_service(bed / name / side / "bin" / "python")


def test_a_route_decorator_that_checks_an_optional_package_is_startup(
    bed: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _starts(bed, "at_import", "ref").returncode == 0
    dies = _starts(bed, "at_import", "tgt")
    assert dies.returncode != 0
    assert 'RuntimeError: Form data requires "formparts" to be installed.' in dies.stderr
    # read, never run: the check runs under the route's `if` (a form route), which envsync
    # cannot decide; startup provably reaches it, so not "fails later"
    found = _verdict(bed, "at_import", capsys)
    assert found["severity"] == "risky", found
    (evidence,) = [e for e in found["evidence"] if e["line"] == 3]
    assert evidence["statement"] == "from formparts import __version__"
    assert evidence["file"].endswith("svc/main.py")
    assert "ensure_multipart_is_installed() runs while the module runs" in evidence["context"]
    # imported, it is decided
    found = _verdict(bed, "at_import", capsys, "--import-check")
    assert (found["severity"], found["decided_by"]) == ("fatal", "import-check"), found
    add(SECTION, "3 calls at import time: a route decorator's check, on real venvs")


def test_the_same_route_added_when_a_function_runs_fails_later(
    bed: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for side in ("ref", "tgt"):
        assert _starts(bed, "when_called", side).returncode == 0
    found = _verdict(bed, "when_called", capsys)
    assert found["severity"] == "degraded", found
    add(SECTION, "3 calls at import time: its negative control, on real venvs")
