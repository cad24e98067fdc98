"""Verdicts that agree with each other and with a real import (issue 31), on small packages
written for the purpose, installed as real wheels into real venvs.

Before envsync runs, each case really imports the service on both venvs: that decides
what is true. Then the static verdict must be honest about it: a changed version that
startup imports unguarded is never `degraded` or `benign`; a requirement the target
violates for a dependent startup runs is evidence; a name every module binds is never
"missing"; and the import check traces a failure to its difference.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from envsync.cli import main
from tests.helpers import make_venv, make_wheel, pip_install

SVC_MAIN = """\
from mu.dyn import anything                 # a changed version, unguarded, unreadable names
try:
    from mu import newer                    # what only the reference's mu has, guarded
except ImportError:
    newer = None
try:
    from xi import newer as xi_newer        # the same, with no unguarded import of xi
except ImportError:
    xi_newer = None
from nu import __doc__ as nu_doc            # bound in every module: nu has no docstring
import pi                                   # unchanged, requires rho>=2
import tau                                  # unchanged, requires sigma>=3 (neither host has it)
import upsilon                              # unchanged; checks phi's version at import
"""


def _dep(wheels: Path, name: str, version: str, body: str, requires: tuple[str, ...] = ()) -> Path:
    return make_wheel(wheels, name, version, {f"{name}/__init__.py": body}, requires=requires)


def _mu(wheels: Path, version: str, body: str) -> Path:
    """mu, whose mu.dyn makes its names in a module __getattr__ envsync cannot read."""
    dyn = "def __getattr__(name):\n    return name\n"
    return make_wheel(wheels, "mu", version, {"mu/__init__.py": body, "mu/dyn.py": dyn})


UPSILON = """\
import phi
if tuple(int(p) for p in phi.__version__.split(".")) < (2, 0):
    raise ImportError(f"upsilon needs phi>=2.0, found {phi.__version__}")
"""


@pytest.fixture(scope="module")
def hosts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("one-story")
    w = root / "wheels"
    svc = make_wheel(w, "svc", "1.0", {"svc/__init__.py": "", "svc/main.py": SVC_MAIN})
    same = [
        _dep(w, "pi", "1.0", "def later():\n    import rho\n", ("rho>=2",)),
        _dep(w, "tau", "1.0", "def later():\n    import sigma\n", ("sigma>=3",)),
        _dep(w, "upsilon", "1.0", UPSILON, ("phi>=2.0",)),
    ]
    good = [
        _mu(w / "good", "2.0", "def newer():\n    pass\n"),
        _dep(w / "good", "xi", "2.0", "def newer():\n    pass\n"),
        _dep(w / "good", "nu", "2.0", "X = 2\n"),
        _dep(w / "good", "rho", "2.0", ""),
        _dep(w / "good", "sigma", "2.0", ""),
        _dep(w / "good", "phi", "2.0", "__version__ = '2.0'\n"),
    ]
    bad = [
        _mu(w / "bad", "1.0", "def older():\n    pass\n"),
        _dep(w / "bad", "xi", "1.0", "def older():\n    pass\n"),
        _dep(w / "bad", "nu", "1.0", "X = 1\n"),
        _dep(w / "bad", "rho", "1.0", ""),
        _dep(w / "bad", "sigma", "1.0", ""),
        _dep(w / "bad", "phi", "1.0", "__version__ = '1.0'\n"),
    ]
    ref, tgt = make_venv(root / "ref"), make_venv(root / "tgt")
    pip_install(ref, svc, *same, *good)
    pip_install(tgt, svc, *same, *bad)
    (root / "envsync.toml").write_text(
        '[defaults]\nreference = "ref"\ntarget = "tgt"\n'
        '[service]\ncommand = ["{python}", "-m", "svc.main"]\n'
        f'[hosts.ref]\npython = "{ref}"\n[hosts.tgt]\npython = "{tgt}"\n'
    )
    return root


def _really_imports(python: Path) -> str | None:
    """The last line of the error a real `import svc.main` ends with (None: it imports)."""
    done = subprocess.run([str(python), "-c", "import svc.main"], capture_output=True, text=True)
    return None if done.returncode == 0 else done.stderr.strip().splitlines()[-1]


def _findings(capsys: pytest.CaptureFixture[str], hosts: Path, *extra: str) -> dict[str, dict]:
    code = main(
        ["--inventory", str(hosts / "envsync.toml"), "-q", "diff", "--format", "json", *extra]
    )
    assert code == 1
    return {f["subject"]: f for f in json.loads(capsys.readouterr().out)["findings"]}


def test_the_truth_before_envsync(hosts: Path) -> None:
    assert _really_imports(hosts / "ref" / "bin" / "python") is None
    assert _really_imports(hosts / "tgt" / "bin" / "python") == (
        "ImportError: upsilon needs phi>=2.0, found 1.0"
    )


def test_a_changed_version_imported_unguarded_is_never_degraded(
    capsys: pytest.CaptureFixture[str], hosts: Path
) -> None:
    found = _findings(capsys, hosts)
    mu = found["mu"]
    # the guarded `from mu import newer` fails, and `from mu.dyn import anything` runs
    # unguarded at every start, where nothing showed what mu.dyn defines: not degraded
    assert mu["severity"] == "risky", mu
    assert "unguarded" in mu["reason"] and "svc/main.py:1" in mu["reason"]
    assert "cannot read whether mu.dyn defines it" in mu["reason"]
    assert any(e["line"] == 1 and e["statement"].startswith("from mu.dyn") for e in mu["evidence"])
    # the negative control: xi is only imported under try/except ImportError
    assert found["xi"]["severity"] == "degraded", found["xi"]


def test_a_name_every_module_binds_is_not_missing(
    capsys: pytest.CaptureFixture[str], hosts: Path
) -> None:
    nu = _findings(capsys, hosts)["nu"]
    assert nu["severity"] == "risky", nu  # imported at module level, changed: not benign
    assert "__doc__" not in nu["reason"]
    assert not any(e["source"] == "name-check" for e in nu["evidence"])


def test_a_violated_requirement_of_a_dependent_startup_runs_is_evidence(
    capsys: pytest.CaptureFixture[str], hosts: Path
) -> None:
    found = _findings(capsys, hosts)
    rho = found["rho"]
    # pi imports rho only inside a function: without its requirement, "unknown"
    assert rho["severity"] == "risky", rho
    assert "pi 1.0 requires rho>=2" in rho["reason"]
    req = next(e for e in rho["evidence"] if e["source"] == "requirements")
    assert "the reference satisfies it, the target has 1.0" in req["detail"]
    assert req["file"].endswith("svc/main.py") and req["statement"].startswith("import pi")
    assert req["line"] == 11
    # tau requires sigma>=3, which neither host has: said so, and no reason for a verdict
    sigma = found["sigma"]
    assert sigma["severity"] == "unknown", sigma
    said = next(e for e in sigma["evidence"] if e["source"] == "requirements")
    assert "violated on both hosts, so not caused by this difference" in said["detail"]


def test_every_report_here_tells_one_story(capsys: pytest.CaptureFixture[str], hosts: Path) -> None:
    import os

    from envsync.classify.consistency import STRICT_ENV

    assert os.environ[STRICT_ENV] == "raise"  # classify() raises on a contradiction
    for extra in ((), ("--import-check",)):
        found = _findings(capsys, hosts, *extra)
        assert not any(f["severity"] == "benign" for f in found.values())


def test_an_exception_in_unchanged_code_is_traced_to_what_it_requires(
    capsys: pytest.CaptureFixture[str], hosts: Path
) -> None:
    static = _findings(capsys, hosts)["phi"]
    # upsilon (the same on both hosts) requires phi>=2.0, and startup imports it
    assert static["severity"] == "risky", static
    probed = _findings(capsys, hosts, "--import-check")["phi"]
    assert (probed["severity"], probed["decided_by"]) == ("fatal", "import-check"), probed
    first = probed["evidence"][0]
    assert first["detail"] == ("import svc.main: ImportError: upsilon needs phi>=2.0, found 1.0")
    assert (
        "upsilon 1.0 requires phi>=2.0, which the target's phi 1.0 violates" in (first["context"])
    )
    assert first["file"].endswith("upsilon/__init__.py") and first["line"] == 3


def test_an_exception_no_difference_explains_says_what_was_tried(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """chi (the same on both hosts) raises when omega's new version is there, and neither
    its requirements nor its message name omega: the note says what was tried, and omega,
    which startup imports before chi, carries the exception as `unknown` or worse."""
    w = tmp_path / "wheels"
    svc = make_wheel(
        w, "svc", "1.0", {"svc/__init__.py": "", "svc/main.py": "import omega\nimport chi\n"}
    )
    chi = _dep(
        w,
        "chi",
        "1.0",
        "import sys\nif sys.modules['omega'].MODE == 2:\n    raise RuntimeError('mode 2 is not supported')\n",
    )
    ref, tgt = make_venv(tmp_path / "ref"), make_venv(tmp_path / "tgt")
    pip_install(ref, svc, chi, _dep(w / "1", "omega", "1.0", "MODE = 1\n"))
    pip_install(tgt, svc, chi, _dep(w / "2", "omega", "2.0", "MODE = 2\n"))
    (tmp_path / "envsync.toml").write_text(
        '[defaults]\nreference = "ref"\ntarget = "tgt"\n'
        '[service]\ncommand = ["{python}", "-m", "svc.main"]\n'
        f'[hosts.ref]\npython = "{ref}"\n[hosts.tgt]\npython = "{tgt}"\n'
    )
    assert _really_imports(ref) is None
    assert _really_imports(tgt) == "RuntimeError: mode 2 is not supported"
    argv = ["--inventory", str(tmp_path / "envsync.toml"), "-q", "diff", "--format", "json"]
    assert main([*argv, "--import-check"]) == 1
    data = json.loads(capsys.readouterr().out)
    (note,) = [n for n in data["notes"] if n.startswith("import check:")]
    assert "no difference from the reference explains it (tried: the distributions of its " in note
    assert "(chi 1.0, svc 1.0) are the same on both hosts" in note
    assert "each difference startup imports before it is at least unknown: omega" in note
    (omega,) = data["findings"]
    assert omega["severity"] in ("risky", "unknown"), omega
    last = omega["evidence"][-1]
    assert last["source"] == "import-check"
    assert "startup imports omega before it (svc/main.py:1 `import omega`)" in last["detail"]
