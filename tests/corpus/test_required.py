"""Replay of a public failure in unchanged code: a package, the same on both hosts, raises
at import because a distribution it requires changed (issue 31, shape 1), on real wheels.

gpustack/gpustack#2769: vLLM 0.10.1's `vllm/v1/spec_decode/ngram_proposer.py:6` runs
`from numba import jit`; with NumPy 2.3 beside numba 0.61.2, `vllm serve` dies of
"ImportError: Numba needs NumPy 2.2 or less. Got NumPy 2.3.": numba/__init__.py checks
NumPy's version at import and raises, and its metadata says so (`numpy<2.3,>=1.24`).
The service here runs that same statement. A real import decides first, on both venvs;
then envsync: statically `risky` on numpy, citing numba's requirement and the import of
numba startup runs; with --import-check `fatal` on numpy, with the exception, traced
through the raising frame's distribution (numba, the same on both) to its requirement.
The negative control is the same kind of difference that really starts (NumPy 2.1 on the
target, which numba accepts): no `fatal`.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from envsync.cli import main
from tests.helpers import fetch, make_venv, make_wheel, pip_install

pytestmark = pytest.mark.slow

THREAD = "gpustack/gpustack#2769"
SERVICE = "from numba import jit  # vllm/v1/spec_decode/ngram_proposer.py:6 (vLLM 0.10.1)\n"
SAME = ("numba==0.61.2", "llvmlite==0.44.0")


@dataclass(frozen=True, slots=True, kw_only=True)
class Pair:
    id: str
    reference: str  # numpy on the reference
    target: str  # numpy on the target
    raises: str | None  # the last line a real import on the target ends with


PAIRS = (
    Pair(
        id="numba-numpy-2.3",
        reference="numpy==2.2.6",
        target="numpy==2.3.1",
        raises="ImportError: Numba needs NumPy 2.2 or less. Got NumPy 2.3.",
    ),
    Pair(
        id="numba-numpy-2.1-control", reference="numpy==2.2.6", target="numpy==2.1.3", raises=None
    ),
)


def _really_imports(python: Path) -> str | None:
    done = subprocess.run(
        [str(python), "-c", "import svc.main"], capture_output=True, text=True, timeout=300
    )
    return None if done.returncode == 0 else done.stderr.strip().splitlines()[-1]


@pytest.fixture(scope="module", params=PAIRS, ids=lambda p: p.id)
def pair(
    request: pytest.FixtureRequest, wheel_cache: Path, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Pair, Path]:
    case: Pair = request.param
    root = tmp_path_factory.mktemp(case.id)
    svc = make_wheel(root / "wheels", "svc", "1.0", {"svc/__init__.py": "", "svc/main.py": SERVICE})
    same = [fetch(wheel_cache, r) for r in SAME]
    for side, numpy in (("ref", case.reference), ("tgt", case.target)):
        pip_install(make_venv(root / side), svc, *same, fetch(wheel_cache, numpy))
    (root / "envsync.toml").write_text(
        '[defaults]\nreference = "ref"\ntarget = "tgt"\n'
        '[service]\ncommand = ["{python}", "-m", "svc.main"]\n'
        f'[hosts.ref]\npython = "{root / "ref" / "bin" / "python"}"\n'
        f'[hosts.tgt]\npython = "{root / "tgt" / "bin" / "python"}"\n'
    )
    return case, root


def _diff(capsys: pytest.CaptureFixture[str], root: Path, *extra: str) -> dict[str, dict]:  # type: ignore[type-arg]
    code = main(
        ["--inventory", str(root / "envsync.toml"), "-q", "diff", "--format", "json", *extra]
    )
    assert code == 1
    return {f["subject"]: f for f in json.loads(capsys.readouterr().out)["findings"]}


def test_a_real_import_decides_first(pair: tuple[Pair, Path]) -> None:
    case, root = pair
    assert _really_imports(root / "ref" / "bin" / "python") is None
    assert _really_imports(root / "tgt" / "bin" / "python") == case.raises
    numba = root / "tgt" / "lib" / "python3.11" / "site-packages" / "numba"
    source = next(numba.parent.glob("numba-0.61.2.dist-info")) / "METADATA"
    assert "Requires-Dist: numpy<2.3,>=1.24" in source.read_text()
    assert (numba / "__init__.py").read_text().splitlines()[44].strip() == "raise ImportError(msg)"


def test_the_static_verdict_is_honest(
    pair: tuple[Pair, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    case, root = pair
    found = _diff(capsys, root)
    assert set(found) == {"numpy"}, found
    numpy = found["numpy"]
    # numba imports numpy at module level, unguarded: never benign or degraded
    assert numpy["severity"] == "risky", numpy
    cited = [e for e in numpy["evidence"] if e["source"] == "requirements"]
    if case.raises is None:
        assert not cited, cited  # numba's range holds on the target: nothing to cite
        return
    assert "numba 0.61.2 requires numpy<2.3,>=1.24" in numpy["reason"], numpy["reason"]
    (req,) = cited
    assert "the reference satisfies it, the target has 2.3.1" in req["detail"]
    assert req["file"].endswith("svc/main.py") and req["line"] == 1
    assert req["statement"].startswith("from numba import jit")


def test_the_import_check_is_fatal_on_the_difference(
    pair: tuple[Pair, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    case, root = pair
    found = _diff(capsys, root, "--import-check")
    if case.raises is None:
        assert all(f["severity"] != "fatal" for f in found.values()), found
        return
    numpy = found["numpy"]
    assert (numpy["severity"], numpy["decided_by"]) == ("fatal", "import-check"), numpy
    first = numpy["evidence"][0]
    assert first["detail"] == f"import svc.main: {case.raises}"
    assert first["file"].endswith("numba/__init__.py") and first["line"] == 45
    assert (
        "numba 0.61.2 requires numpy<2.3,>=1.24, which the target's numpy 2.3.1 violates"
        in (first["context"])
    ), first
    assert THREAD  # the public report this case replays
