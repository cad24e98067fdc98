"""Requirements as evidence, on real wheels: a package the same on both hosts whose
Requires-Dist the target violates (issue 31, shape 1), each case from a public report.

- gpustack/gpustack#2769: vLLM 0.10.1's `vllm/v1/spec_decode/ngram_proposer.py:6` runs
  `from numba import jit`; beside NumPy 2.3, numba 0.61.2 (`numpy<2.3,>=1.24`) checks
  NumPy's version at import and raises "ImportError: Numba needs NumPy 2.2 or less. Got
  NumPy 2.3.", and `vllm serve` dies.
- jawah/charset_normalizer#252: requests 2.28.1 (`charset-normalizer<3,>=2`) beside
  charset_normalizer 3.0.1 only warns (RequestsDependencyWarning) and works: a violated
  requirement that really starts, the negative control.
- numba beside NumPy 2.1, which its range allows: the same kind of difference, kept.

The service runs the reported statement. A real import decides first, on both venvs;
then envsync, statically and with --import-check: a violated requirement is cited (the
requirement, the dependent, the import of it startup runs) and never below `risky`; it
is `fatal` only where the real import breaks, traced through the raising frame's
distribution (the same on both hosts) to its requirement. numba's own check
(numba/__init__.py:42, `if numpy_version > (2, 2):`, then line 45 `raise ImportError(msg)`,
in `_ensure_critical_deps()`, which line 59 calls) is read statically as numba compares
(the first two parts of NumPy's version as integers): fatal before any import, citing
line 45; NumPy 2.1.3 passes it. The counts go to the reliability figures.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from envsync.cli import main
from tests.corpus import table
from tests.figures import add
from tests.helpers import fetch, make_venv, make_wheel, pip_install, site_packages

pytestmark = pytest.mark.slow

SECTION = "requirements as evidence (real wheels, a real import decides)"


@dataclass(frozen=True, slots=True, kw_only=True)
class Case:
    id: str
    report: str  # the public report
    service: str  # svc/main.py: the statement the report's service runs
    same: tuple[str, ...]  # on both hosts
    reference: str  # the culprit on the reference (NAME==VERSION)
    target: str  # and on the target
    requirement: str | None  # the dependent's Requires-Dist the target violates (None: kept)
    dependent: str  # "numba 0.61.2"
    raises: str | None = None  # the last line a real import on the target ends with
    raised_in: tuple[str, int] = ("", 0)  # the raising frame: file under site-packages, line
    # the dependent's own version check that raises, as its source writes it: the `if`
    # line and statement, then the raise (read statically, it makes the static verdict fatal)
    checks: tuple[int, str, str] | None = None


CASES = (
    Case(
        id="numba-numpy-2.3",
        report="gpustack/gpustack#2769",
        service="from numba import jit  # vllm/v1/spec_decode/ngram_proposer.py:6\n",
        same=("numba==0.61.2", "llvmlite==0.44.0"),
        reference="numpy==2.2.6",
        target="numpy==2.3.1",
        requirement="numpy<2.3,>=1.24",
        dependent="numba 0.61.2",
        raises="ImportError: Numba needs NumPy 2.2 or less. Got NumPy 2.3.",
        raised_in=("numba/__init__.py", 45),
        # numba/__init__.py:42 in _ensure_critical_deps(), which line 59 calls; line 26
        # reads `tuple(map(int, mod.__version__.split('.')[:2]))`: NumPy 2.2.6 passes
        checks=(42, "if numpy_version > (2, 2):", "raise ImportError(msg)"),
    ),
    Case(
        id="requests-charset-normalizer-3",
        report="jawah/charset_normalizer#252",
        service="import requests\n",
        same=("requests==2.28.1", "urllib3==1.26.13", "idna==3.4", "certifi==2022.12.7"),
        reference="charset-normalizer==2.1.1",
        target="charset-normalizer==3.0.1",
        requirement="charset-normalizer (<3,>=2)",  # as its METADATA writes it
        dependent="requests 2.28.1",
    ),
    Case(
        id="numba-numpy-2.1-kept",
        report="gpustack/gpustack#2769, a NumPy numba accepts",
        service="from numba import jit\n",
        same=("numba==0.61.2", "llvmlite==0.44.0"),
        reference="numpy==2.2.6",
        target="numpy==2.1.3",
        requirement=None,
        dependent="numba 0.61.2",
    ),
)


def _really_imports(python: Path) -> str | None:
    done = subprocess.run(
        [str(python), "-W", "ignore", "-c", "import svc.main"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    return None if done.returncode == 0 else done.stderr.strip().splitlines()[-1]


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
    for side, culprit in (("ref", case.reference), ("tgt", case.target)):
        pip_install(make_venv(root / side), svc, *same, fetch(wheel_cache, culprit))
    (root / "envsync.toml").write_text(
        '[defaults]\nreference = "ref"\ntarget = "tgt"\n'
        '[service]\ncommand = ["{python}", "-m", "svc.main"]\n'
        f'[hosts.ref]\npython = "{root / "ref" / "bin" / "python"}"\n'
        f'[hosts.tgt]\npython = "{root / "tgt" / "bin" / "python"}"\n'
    )
    return case, root


def _culprit(case: Case) -> str:
    return case.target.partition("==")[0]


def _diff(capsys: pytest.CaptureFixture[str], root: Path, *extra: str) -> dict[str, dict]:
    code = main(
        ["--inventory", str(root / "envsync.toml"), "-q", "diff", "--format", "json", *extra]
    )
    assert code == 1
    return {f["subject"]: f for f in json.loads(capsys.readouterr().out)["findings"]}


def test_a_real_import_decides_first(pair: tuple[Case, Path]) -> None:
    case, root = pair
    ref, tgt = (_really_imports(root / side / "bin" / "python") for side in ("ref", "tgt"))
    assert ref is None
    assert tgt == case.raises
    table.part(
        case.id,
        report=case.report,
        culprit=_culprit(case),
        reference=table.outcome(ref),
        target=table.outcome(tgt),
        expected="fatal" if case.raises else table.NOT_FATAL,
        test="tests/corpus/test_required.py",
    )
    site = site_packages(root / "tgt" / "bin" / "python")
    name, _, version = case.dependent.partition(" ")
    metadata = (site / f"{name}-{version}.dist-info" / "METADATA").read_text()
    if case.requirement is not None:
        assert f"Requires-Dist: {case.requirement}" in metadata
    if case.raises is not None:
        file, line = case.raised_in
        lines = (site / file).read_text().splitlines()
        assert lines[line - 1].strip() == "raise ImportError(msg)"
        if case.checks is not None:
            test_line, test, raised = case.checks
            assert (lines[test_line - 1].strip(), lines[line - 1].strip()) == (test, raised)


def test_the_static_verdict_cites_the_requirement(
    pair: tuple[Case, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    case, root = pair
    found = _diff(capsys, root)
    assert set(found) == {_culprit(case)}, found
    culprit = found[_culprit(case)]
    table.part(case.id, static=culprit["severity"])
    cited = [e for e in culprit["evidence"] if e["source"] == "requirements"]
    checked = [e for e in culprit["evidence"] if e["source"] == "version-check"]
    words = f"{case.dependent} requires {case.requirement}"
    if case.checks is not None:
        # the dependent's own check, read as it compares, raises on the target alone
        assert (culprit["severity"], culprit["decided_by"]) == ("fatal", "version-check"), culprit
        test_line, test, raised = case.checks
        (check,) = checked
        file, line = case.raised_in
        assert check["file"].endswith(file) and check["line"] == line, check
        assert check["statement"] == raised and f"line {test_line}: {test}" in check["context"]
        have = case.target.partition("==")[2]
        passes = case.reference.partition("==")[2]
        assert f"`{test}` holds for the target's {have}" in culprit["reason"], culprit["reason"]
        assert f"the reference's {passes} passes it" in culprit["reason"]
        add(SECTION, "a version check that raises on the target, read statically: fatal")
    else:
        # the dependent imports the culprit: never benign or degraded, never fatal unread
        assert culprit["severity"] == "risky", culprit
        assert not checked, checked
    if case.requirement is None:
        assert not cited, cited
        return
    if case.checks is None:
        assert words in culprit["reason"], culprit["reason"]
    (req,) = cited
    have = case.target.partition("==")[2]
    assert f"the reference satisfies it, the target has {have}" in req["detail"]
    assert req["file"].endswith("svc/main.py") and req["line"] == 1
    assert req["statement"] == case.service.strip()


def test_the_import_check_is_fatal_only_where_the_import_breaks(
    pair: tuple[Case, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    case, root = pair
    found = _diff(capsys, root, "--import-check")
    culprit = found[_culprit(case)]
    table.part(case.id, import_check=culprit["severity"])
    violated = "violated" if case.requirement else "kept"
    if case.raises is None:
        assert all(f["severity"] != "fatal" for f in found.values()), found
        add(SECTION, f"{violated}, imports cleanly: not fatal")
        return
    # the static reading of the version check decided already; the import check confirms
    decided = "version-check" if case.checks else "import-check"
    assert (culprit["severity"], culprit["decided_by"]) == ("fatal", decided), culprit
    first = culprit["evidence"][0]
    assert first["detail"] == f"import svc.main: {case.raises}"
    file, line = case.raised_in
    assert first["file"].endswith(file) and first["line"] == line
    have = case.target.replace("==", " ")
    assert (
        f"{case.dependent} requires {case.requirement}, which the target's {have} violates"
        in (first["context"])
    ), first
    add(SECTION, f"{violated}, a real import breaks: fatal")
