"""The web and packaging layer under an inference server (issue 45, item 4): new real cases
of the failure classes last round's replay missed, each from a public report, on real
wheels, with a real import on both sides as ground truth, and a negative control of the
same shape that really starts.

The service is a tiny module of our own, `svc.main`, started as `{python} -m svc.main`,
that runs the statement the report's server ran against the real libraries.

(a) A web framework's optional dependency, checked while the module is imported.

- sgl-project/sglang#895: `python -m sglang.launch_server` died in sglang/srt/server.py:162,
  `async def openai_v1_files(file: UploadFile = File(...), purpose: str = Form("batch"))`:
  FastAPI's route decorator builds the route's body field at import and, for form
  parameters, runs fastapi/dependencies/utils.py `ensure_multipart_is_installed`, which turns
  the ImportError of python-multipart into "RuntimeError: Form data requires
  "python-multipart" to be installed." (the same in hummingbot/hummingbot-api#41,
  sky-shift/skyshift#47, invoke-ai/InvokeAI#3141). The target lacks python-multipart.
- Its negative control: the same app, the same missing python-multipart, a route whose body
  is JSON (sglang's `/generate`): the decorator runs, checks nothing, and the server starts
  (starlette's formparsers guards its own import of python_multipart).

(b) `typing_extensions` too old for a name a package imports.

- pydantic/pydantic#12407 and pydantic/pydantic-core#1847: `import pydantic` (2.12) dies in
  pydantic_core/__init__.py:6, `from typing_extensions import Sentinel`, "ImportError: cannot
  import name 'Sentinel' from 'typing_extensions'" where typing_extensions predates 4.14.
- Its negative control: typing_extensions 4.14.1 on the target, 4.15.0 on the reference,
  both defining `Sentinel`.

(c) A name moved or removed behind a module `__getattr__`.

- twopirllc/pandas-ta#880 (femtotrader/pandas_talib#26): pandas_ta/momentum/squeeze_pro.py
  runs `from numpy import NaN as npNaN`; NumPy 2 removed `NaN`, and its module
  `__getattr__` (numpy/__init__.py) raises AttributeError for every name of its table
  `__expired_attributes__` (numpy/_expired_attrs_2_0.py, `"NaN": "Use `np.nan` instead."`),
  which the import statement turns into "ImportError: cannot import name 'NaN' from
  'numpy'".
- Its negative control: `from numpy import nan`, defined by both NumPys.
- pydantic/pydantic#6777 (oughtinc/ice#319, verveguy/tana-helper#2): `from pydantic import
  BaseModel, BaseSettings` on pydantic 2: pydantic/__init__.py's `__getattr__` finds
  `BaseSettings` in none of its lazy tables (`_dynamic_imports`) and hands it to
  `getattr_migration`, whose wrapper raises for that exact name (pydantic/_migration.py,
  `if import_path == 'pydantic:BaseSettings': raise PydanticImportError(`), an ImportError:
  "`BaseSettings` has been moved to the `pydantic-settings` package."
- Its negative control: `from pydantic import BaseModel`, which pydantic 2 lists in
  `_dynamic_imports`: the service starts on pydantic 1 and on pydantic 2.

(d) A package that takes over sys.stdout and sys.stderr while it is imported.

- chatchat-space/Langchain-Chatchat#1314 ("fix the standard output overwritten by
  fastchat"; lm-sys/FastChat#3797 describes the same `build_logger`): fastchat/serve/
  controller.py runs `logger = build_logger("controller", "controller.log")` at module level,
  and fastchat/utils.py's build_logger sets `sys.stdout = sl` and `sys.stderr = sl`, stream
  objects that write every line to a logger, with a date and level prefix. The service
  extends FastChat's controller app with an upload route (form data) and the target lacks
  python-multipart: the server dies after its stdout was taken over, and the import check
  must still answer, with the failure.
- Its negative control: python-multipart 0.0.9 on the target, 0.0.20 on the reference, both
  accepted by FastAPI's check: the server starts, and the import check still answers.

A real import decides first, on both venvs: what each side really did (exit, exception type
and message, the raising frame) and the line of the wheel's own source that the failure
comes from. Then envsync, statically and with --import-check: fatal only where the real
start dies, degraded and benign never where it dies, and the failing start fatal with the
import check.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from envsync.cli import main
from tests.corpus import table
from tests.figures import add
from tests.helpers import fetch, make_venv, make_wheel, pip_install, site_packages

pytestmark = pytest.mark.slow

SECTION = "startup truth (issue 45, the web and packaging layer on real wheels)"

# what `from fastapi import ...` imports, on both hosts
FASTAPI = (
    "fastapi==0.115.12",
    "starlette==0.46.2",
    "pydantic==2.11.4",
    "pydantic-core==2.33.2",
    "typing-extensions==4.13.2",
    "annotated-types==0.7.0",
    "typing-inspection==0.4.0",
    "anyio==4.9.0",
    "sniffio==1.3.1",
    "idna==3.10",
)
# and what fastchat.serve.controller imports besides
FASTCHAT = (
    *FASTAPI,
    "fschat==0.2.36",
    "numpy==1.26.4",
    "requests==2.32.3",
    "urllib3==2.3.0",
    "certifi==2025.1.31",
    "charset-normalizer==3.4.1",
    "uvicorn==0.34.0",
    "click==8.1.8",
    "h11==0.14.0",
)
PYDANTIC_212 = (
    "pydantic==2.12.0",
    "pydantic-core==2.41.1",
    "annotated-types==0.7.0",
    "typing-inspection==0.4.0",
)

# sglang/srt/server.py:162 (sgl-project/sglang#895), the route that checks for form data
FORM_ROUTE = """\
from fastapi import FastAPI, File, Form, UploadFile

app = FastAPI()


@app.post("/v1/files")
async def openai_v1_files(file: UploadFile = File(...), purpose: str = Form("batch")):
    return {"purpose": purpose}
"""
# the same app, a route whose body is JSON, as sglang's /generate
JSON_ROUTE = """\
from fastapi import FastAPI

app = FastAPI()


@app.post("/generate")
async def generate_request(obj: dict):
    return obj
"""
# FastChat's controller (its logger takes over stdout and stderr), with an upload route
FASTCHAT_FORM_ROUTE = """\
from fastapi import File, UploadFile

from fastchat.serve.controller import app, logger


@app.post("/upload")
async def upload(file: UploadFile = File(...)):
    logger.info("upload %s", file.filename)
    return {"ok": True}
"""

MULTIPART_MISSING = 'Form data requires "python-multipart" to be installed.'
FASTAPI_RAISES = (
    "fastapi/dependencies/utils.py",
    115,
    "raise RuntimeError(multipart_not_installed_error) from None",
)

# the import FastAPI's check makes (fastapi/dependencies/utils.py, in
# ensure_multipart_is_installed, which the route decorator runs for form parameters)
CHECKED_AT_IMPORT = (
    "fastapi/dependencies/utils.py",
    93,
    "from python_multipart import __version__",
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Case:
    id: str
    report: str  # the public report
    service: str  # svc/main.py
    same: tuple[str, ...]  # on both hosts
    reference: tuple[str, ...]  # only on the reference (NAME==VERSION)
    target: tuple[str, ...]  # only on the target
    culprit: str  # the finding's subject that answers for the failure
    # how a real import on the target fails: the exception's type and how its message
    # begins (None: it imports on both)
    raises: tuple[str, str] | None = None
    # the raising frame of that failure: file (under site-packages, or svc/main.py), line,
    # statement
    raised_in: tuple[str, int, str] = ("", 0, "")
    # the wheel's own source the failure comes from: file under site-packages on the side
    # named, line, the line's text
    source: tuple[tuple[str, str, int, str], ...] = ()
    # text that side's source does not hold: side, file, text
    absent: tuple[tuple[str, str, str], ...] = ()
    # the target's failure is provably decided without running it: fatal statically
    decidable: bool = False
    # the import-time check the failure comes from, in a function that a decorator runs
    # while the module is imported: file under site-packages, line, statement
    checked_at_import: tuple[str, int, str] | None = None
    # the module replaces sys.stdout and sys.stderr while it is imported (on both sides)
    takes_over_stdout: bool = False


CASES = (
    Case(
        id="fastapi-form-route-no-multipart",
        report="sgl-project/sglang#895",
        service=FORM_ROUTE,
        same=FASTAPI,
        reference=("python-multipart==0.0.20",),
        target=(),
        culprit="python-multipart",
        raises=("RuntimeError", MULTIPART_MISSING),
        raised_in=FASTAPI_RAISES,
        checked_at_import=CHECKED_AT_IMPORT,
        source=(
            (
                "tgt",
                "fastapi/dependencies/utils.py",
                93,
                "        from python_multipart import __version__",
            ),
            (
                "tgt",
                "fastapi/dependencies/utils.py",
                91,
                "def ensure_multipart_is_installed() -> None:",
            ),
        ),
    ),
    Case(
        id="fastapi-json-route-no-multipart",
        report="sgl-project/sglang#895, a route without form data (sglang's /generate)",
        service=JSON_ROUTE,
        same=FASTAPI,
        reference=("python-multipart==0.0.20",),
        target=(),
        culprit="python-multipart",
        # starlette imports the old name `multipart` in the handler of an inner try, the
        # whole inside an outer try whose handler binds None: guarded, it starts
        source=(
            ("tgt", "starlette/formparsers.py", 16, "        try:"),
            ("tgt", "starlette/formparsers.py", 20, "            import multipart"),
            (
                "tgt",
                "starlette/formparsers.py",
                22,
                "    except ModuleNotFoundError:  # pragma: no cover",
            ),
            ("tgt", "starlette/formparsers.py", 24, "        parse_options_header = None"),
        ),
    ),
    Case(
        id="pydantic-core-sentinel-old-typing-extensions",
        report="pydantic/pydantic#12407, pydantic/pydantic-core#1847",
        service="from pydantic import BaseModel\n\n\nclass Request(BaseModel):\n    text: str\n",
        same=PYDANTIC_212,
        reference=("typing-extensions==4.15.0",),
        target=("typing-extensions==4.13.2",),
        culprit="typing-extensions",
        raises=("ImportError", "cannot import name 'Sentinel' from 'typing_extensions'"),
        raised_in=("pydantic_core/__init__.py", 6, "from typing_extensions import Sentinel"),
        source=(("ref", "typing_extensions.py", 4210, "class Sentinel:"),),
        absent=(("tgt", "typing_extensions.py", "class Sentinel"),),
        decidable=True,
    ),
    Case(
        id="pydantic-core-sentinel-kept",
        report="pydantic/pydantic#12407, a typing_extensions that defines Sentinel",
        service="from pydantic import BaseModel\n\n\nclass Request(BaseModel):\n    text: str\n",
        same=PYDANTIC_212,
        reference=("typing-extensions==4.15.0",),
        target=("typing-extensions==4.14.1",),
        culprit="typing-extensions",
    ),
    Case(
        id="numpy2-expired-nan",
        report="twopirllc/pandas-ta#880",
        service="from numpy import NaN as npNaN  # pandas_ta/momentum/squeeze_pro.py\n\nVALUE = npNaN\n",
        same=(),
        reference=("numpy==1.26.4",),
        target=("numpy==2.4.6",),
        culprit="numpy",
        raises=("ImportError", "cannot import name 'NaN' from 'numpy'"),
        raised_in=(
            "svc/main.py",
            1,
            "from numpy import NaN as npNaN  # pandas_ta/momentum/squeeze_pro.py",
        ),
        source=(
            ("tgt", "numpy/_expired_attrs_2_0.py", 40, '    "NaN": "Use `np.nan` instead.",'),
            ("tgt", "numpy/__init__.py", 777, "        if attr in __expired_attributes__:"),
            ("tgt", "numpy/__init__.py", 778, "            raise AttributeError("),
        ),
        decidable=True,
    ),
    Case(
        id="numpy2-nan-lowercase",
        report="twopirllc/pandas-ta#880, the name NumPy 2 keeps (`nan`)",
        service="from numpy import nan as npNaN\n\nVALUE = npNaN\n",
        same=(),
        reference=("numpy==1.26.4",),
        target=("numpy==2.4.6",),
        culprit="numpy",
    ),
    Case(
        id="pydantic2-moved-basesettings",
        report="pydantic/pydantic#6777",
        service="from pydantic import BaseModel, BaseSettings\n\n\nclass Settings(BaseSettings):\n"
        "    model: str = 'm'\n",
        same=("typing-extensions==4.13.2",),
        reference=("pydantic==1.10.21",),
        target=(
            "pydantic==2.11.4",
            "pydantic-core==2.33.2",
            "annotated-types==0.7.0",
            "typing-inspection==0.4.0",
        ),
        culprit="pydantic",
        raises=(
            "pydantic.errors.PydanticImportError",
            "`BaseSettings` has been moved to the `pydantic-settings` package.",
        ),
        raised_in=("pydantic/_migration.py", 296, "raise PydanticImportError("),
        source=(
            ("tgt", "pydantic/__init__.py", 426, "        return _getattr_migration(attr_name)"),
            (
                "tgt",
                "pydantic/_migration.py",
                295,
                "        if import_path == 'pydantic:BaseSettings':",
            ),
        ),
        decidable=True,
    ),
    Case(
        id="pydantic2-lazy-basemodel",
        report="pydantic/pydantic#6777, a name pydantic 2 still exports (its _dynamic_imports)",
        service="from pydantic import BaseModel\n\n\nclass Request(BaseModel):\n    text: str\n",
        same=("typing-extensions==4.13.2",),
        reference=("pydantic==1.10.21",),
        target=(
            "pydantic==2.11.4",
            "pydantic-core==2.33.2",
            "annotated-types==0.7.0",
            "typing-inspection==0.4.0",
        ),
        culprit="pydantic",
    ),
    Case(
        id="fastchat-logger-form-route-no-multipart",
        report="chatchat-space/Langchain-Chatchat#1314, sgl-project/sglang#895",
        service=FASTCHAT_FORM_ROUTE,
        same=FASTCHAT,
        reference=("python-multipart==0.0.20",),
        target=(),
        culprit="python-multipart",
        raises=("RuntimeError", MULTIPART_MISSING),
        raised_in=FASTAPI_RAISES,
        checked_at_import=CHECKED_AT_IMPORT,
        source=(
            (
                "tgt",
                "fastchat/serve/controller.py",
                31,
                'logger = build_logger("controller", "controller.log")',
            ),
            ("tgt", "fastchat/utils.py", 51, "    sys.stdout = sl"),
            ("tgt", "fastchat/utils.py", 56, "    sys.stderr = sl"),
        ),
        takes_over_stdout=True,
    ),
    Case(
        id="fastchat-logger-form-route-multipart-kept",
        report="chatchat-space/Langchain-Chatchat#1314, a python-multipart FastAPI accepts",
        service=FASTCHAT_FORM_ROUTE,
        same=FASTCHAT,
        reference=("python-multipart==0.0.20",),
        target=("python-multipart==0.0.9",),
        culprit="python-multipart",
        takes_over_stdout=True,
    ),
)

# Imports the service as its start does, and writes what happened to a file of its own
# (the service may take over stdout and stderr): the exception's type, message and raising
# frame, and the class of sys.stdout after the import.
PROBE = """\
import json, sys, traceback

out = sys.argv[1]
try:
    import svc.main
except BaseException as e:
    frame = traceback.extract_tb(e.__traceback__)[-1]
    kind = type(e).__qualname__
    if type(e).__module__ != "builtins":
        kind = type(e).__module__ + "." + kind
    seen = {"type": kind, "message": str(e), "file": frame.filename,
            "line": frame.lineno, "statement": frame.line}
else:
    seen = None
stdout = type(sys.stdout).__module__ + "." + type(sys.stdout).__qualname__
with open(out, "w") as f:
    json.dump({"raised": seen, "stdout": stdout}, f)
"""


def _python(root: Path, side: str) -> Path:
    return root / side / "bin" / "python"


def _really_starts(root: Path, side: str) -> tuple[int, dict]:
    """The real start (`python -m svc.main`, its exit status), and a real import of the
    service by PROBE: what it raised, and what sys.stdout became."""
    python = _python(root, side)
    work = root / f"run-{side}"  # FastChat's loggers write their files here
    work.mkdir(exist_ok=True)
    start = subprocess.run(
        [str(python), "-W", "ignore", "-m", "svc.main"],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=300,
    )
    out = work / "probe.json"
    subprocess.run(
        [str(python), "-W", "ignore", "-c", PROBE, str(out)],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    return start.returncode, json.loads(out.read_text())


def _inventory(root: Path) -> Path:
    inv = root / "envsync.toml"
    inv.write_text(
        '[defaults]\nreference = "ref"\ntarget = "tgt"\n'
        '[service]\ncommand = ["{python}", "-m", "svc.main"]\n'
        f'[hosts.ref]\npython = "{_python(root, "ref")}"\n'
        f'[hosts.tgt]\npython = "{_python(root, "tgt")}"\n'
    )
    return inv


def _diff(capsys: pytest.CaptureFixture[str], root: Path, *extra: str) -> dict[str, dict]:
    """`envsync diff` of the pair as JSON findings by subject; the diff answers (exit 1:
    differences found), whatever the imported code did to stdout."""
    capsys.readouterr()
    here = os.getcwd()
    os.chdir(root)  # the import check's FastChat writes controller.log here
    try:
        code = main(
            ["--inventory", str(root / "envsync.toml"), "-q", "diff", "--format", "json", *extra]
        )
    finally:
        os.chdir(here)
    out, err = capsys.readouterr()
    assert code == 1, (code, err[-2000:])
    return {f["subject"]: f for f in json.loads(out)["findings"]}


@pytest.fixture(scope="module", params=CASES, ids=lambda c: c.id)
def pair(
    request: pytest.FixtureRequest, wheel_cache: Path, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Case, Path]:
    case: Case = request.param
    root = tmp_path_factory.mktemp(case.id)
    svc = make_wheel(
        root / "wheels", "svc", "1.0", {"svc/__init__.py": "", "svc/main.py": case.service}
    )
    same = [fetch(wheel_cache, r) for r in case.same]
    for side, only in (("ref", case.reference), ("tgt", case.target)):
        pip_install(make_venv(root / side), svc, *same, *(fetch(wheel_cache, r) for r in only))
    _inventory(root)
    return case, root


def _xfail(case_ids: dict[str, str]) -> Callable[[pytest.FixtureRequest, Case], None]:
    """Mark the cases of `case_ids` (id: what envsync says now, and why it is wrong) as
    expected failures of the engine, strictly: a case that starts passing fails the run."""

    def apply(request: pytest.FixtureRequest, case: Case) -> None:
        if case.id in case_ids:
            request.applymarker(pytest.mark.xfail(strict=True, reason=case_ids[case.id]))

    return apply


def _outcome(code: int, seen: dict) -> str:
    """What a real start did, in a few words, for the corpus table."""
    raised = seen["raised"]
    if code == 0 and raised is None:
        return "starts"
    if raised is None:
        return f"exit {code}"
    return f"{raised['type']}: {raised['message']}"[:160]


def test_a_real_start_decides_first(pair: tuple[Case, Path]) -> None:
    case, root = pair
    code, seen = _really_starts(root, "ref")
    reference = _outcome(code, seen)
    assert (code, seen["raised"]) == (0, None), seen
    code, seen = _really_starts(root, "tgt")
    table.part(
        case.id,
        report=case.report,
        culprit=case.culprit,
        reference=reference,
        target=_outcome(code, seen),
        expected="fatal" if case.raises else table.NOT_FATAL,
        test="tests/corpus/test_web_layer.py",
    )
    if case.raises is None:
        assert (code, seen["raised"]) == (0, None), seen
    else:
        assert code == 1, code
        raised = seen["raised"]
        kind, message = case.raises
        assert raised["type"] == kind and raised["message"].startswith(message), raised
        file, line, statement = case.raised_in
        assert (raised["file"].endswith(file), raised["line"]) == (True, line), raised
        assert raised["statement"] == statement, raised
    # the wheels say so: the lines the failure comes from, in the installed source
    for side, file, line, text in case.source:
        site = site_packages(_python(root, side))
        assert (site / file).read_text().splitlines()[line - 1] == text, (file, line)
    for side, file, text in case.absent:
        assert text not in (site_packages(_python(root, side)) / file).read_text(), file
    if case.takes_over_stdout:
        for side in ("ref", "tgt"):
            assert _really_starts(root, side)[1]["stdout"] == "fastchat.utils.StreamToLogger"
    add(SECTION, "real starts on both sides, as the reports say")


STATIC_NOW: dict[str, str] = {}


FATAL_WHERE_IT_STARTS: dict[str, str] = {}


def test_the_static_verdict_never_says_startup_works_where_it_dies(
    pair: tuple[Case, Path], capsys: pytest.CaptureFixture[str], request: pytest.FixtureRequest
) -> None:
    """Fatal only where the real start dies; degraded and benign never where it dies."""
    case, root = pair
    _xfail(FATAL_WHERE_IT_STARTS)(request, case)
    found = _diff(capsys, root)
    culprit = found[case.culprit]
    table.part(case.id, static=culprit["severity"])
    if case.raises is None:
        assert all(f["severity"] != "fatal" for f in found.values()), found
        add(SECTION, "a negative control, read: not fatal")
        return
    assert culprit["severity"] in ("fatal", "risky"), culprit
    add(SECTION, "a real start that dies, read: never degraded or benign")


def test_a_provably_missing_name_is_fatal_statically(
    pair: tuple[Case, Path], capsys: pytest.CaptureFixture[str], request: pytest.FixtureRequest
) -> None:
    """Where the target's failure is decided by what its wheels define (a name no
    statement binds, a `__getattr__` table that names it and a fallback that raises for
    it), envsync says fatal without running anything."""
    case, root = pair
    if not case.decidable:
        pytest.skip(
            "no failure that the wheels decide without running (a control, or a check behind a framework's if)"
        )
    _xfail(STATIC_NOW)(request, case)
    culprit = _diff(capsys, root)[case.culprit]
    assert culprit["severity"] == "fatal", culprit
    add(SECTION, "a provably missing name, read: fatal")


def test_the_import_check_is_fatal_exactly_where_the_start_dies(
    pair: tuple[Case, Path], capsys: pytest.CaptureFixture[str], request: pytest.FixtureRequest
) -> None:
    case, root = pair
    _xfail(FATAL_WHERE_IT_STARTS)(request, case)
    found = _diff(capsys, root, "--import-check")
    table.part(case.id, import_check=found[case.culprit]["severity"])
    if case.raises is None:
        assert all(f["severity"] != "fatal" for f in found.values()), found
        add(SECTION, "a negative control, imported: not fatal")
        return
    culprit = found[case.culprit]
    assert culprit["severity"] == "fatal", culprit
    _, message = case.raises
    (checked,) = [e for e in culprit["evidence"] if e["source"] == "import-check"]
    assert message in checked["detail"], checked
    add(SECTION, "a real start that dies, imported: fatal")


def test_the_check_a_decorator_runs_at_import_is_read_as_startup(
    pair: tuple[Case, Path], capsys: pytest.CaptureFixture[str], request: pytest.FixtureRequest
) -> None:
    """The optional dependency's import that the framework's route decorator makes while
    the module is imported is evidence of startup, not of a function that runs later."""
    case, root = pair
    if case.checked_at_import is None:
        pytest.skip("no check that a decorator runs at import")
    culprit = _diff(capsys, root)[case.culprit]
    file, line, statement = case.checked_at_import
    (read,) = [
        e
        for e in culprit["evidence"]
        if e["source"] == "import-graph" and e["file"].endswith(file) and e["line"] == line
    ]
    assert read["statement"] == statement, read
    assert not read["context"].startswith("function"), read
    add(SECTION, "a check a route decorator runs at import, read as startup")
