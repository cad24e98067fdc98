"""A fatal finding names the statement that fails on the target and works on the reference.

Real venvs from real wheels. Ground truth is a real import on each host: `from beta import
needed` works on the reference and fails on the target; `from mu import absent` fails on
both, so the difference in mu is not what decides it and envsync must not call it fatal.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from envsync.cli import main
from tests.helpers import make_venv, make_wheel, pip_install

MAIN = """\
from beta import needed                        # works on the reference only
from mu import absent                          # fails on both hosts
"""


@pytest.fixture(scope="module")
def hosts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("reference-side")
    w = root / "wheels"
    svc = make_wheel(w, "svc3", "1.0", {"svc3/__init__.py": "", "svc3/main.py": MAIN})

    def dep(name: str, version: str, body: str) -> Path:
        return make_wheel(w / version, name, version, {f"{name}/__init__.py": body})

    ref, tgt = make_venv(root / "ref"), make_venv(root / "tgt")
    pip_install(
        ref, svc, dep("beta", "2.0", "def needed():\n    pass\n"), dep("mu", "1.0", "x = 1\n")
    )
    pip_install(
        tgt, svc, dep("beta", "1.0", "def other():\n    pass\n"), dep("mu", "2.0", "y = 2\n")
    )
    (root / "envsync.toml").write_text(
        '[defaults]\nreference = "ref"\ntarget = "tgt"\nwatch = ["svc3"]\n'
        '[service]\ncommand = ["{python}", "-m", "svc3.main"]\n'
        f'[hosts.ref]\npython = "{ref}"\n[hosts.tgt]\npython = "{tgt}"\n'
    )
    return root


def imports(python: Path, statement: str) -> bool:
    """Ground truth: whether the statement really runs on that host."""
    return subprocess.run([str(python), "-c", statement], capture_output=True).returncode == 0


def diff(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, dict]:
    code = main(["-q", *argv, "--format", "json"])
    assert code == 1
    return {f["subject"]: f for f in json.loads(capsys.readouterr().out)["findings"]}


def test_the_reason_names_the_statement_and_that_it_works_on_the_reference(
    hosts: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ref, tgt = hosts / "ref" / "bin" / "python", hosts / "tgt" / "bin" / "python"
    assert imports(ref, "from beta import needed") and not imports(tgt, "from beta import needed")
    got = diff(capsys, "--inventory", str(hosts / "envsync.toml"), "diff")
    beta = got["beta"]
    assert beta["severity"] == "fatal"
    assert beta["reason"].startswith(
        "beta 1.0 lacks needed, which svc3.main imports from beta at module level "
        "(svc3/main.py:1); on the reference, beta 2.0 defines needed (beta/__init__.py);"
    )
    on_ref = [e for e in beta["evidence"] if e["detail"].startswith("on the reference")]
    assert len(on_ref) == 1 and on_ref[0]["file"].startswith(str(hosts / "ref"))


def test_an_import_that_fails_on_both_hosts_is_not_this_differences_fatal(
    hosts: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ref, tgt = hosts / "ref" / "bin" / "python", hosts / "tgt" / "bin" / "python"
    assert not imports(ref, "from mu import absent") and not imports(tgt, "from mu import absent")
    mu = diff(capsys, "--inventory", str(hosts / "envsync.toml"), "diff")["mu"]
    assert mu["severity"] == "unknown", mu["reason"]
    assert "(svc3/main.py:2) as failing on the reference too" in mu["reason"]


def test_a_lock_reference_says_the_reference_side_was_not_checked(
    hosts: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    inv = str(hosts / "envsync.toml")
    lock = tmp_path / "ref.lock"
    assert main(["-q", "--inventory", inv, "lock", "ref", "-o", str(lock)]) == 0
    code = main(["-q", "--inventory", inv, "check", "--lock", str(lock), "tgt", "--format", "json"])
    assert code == 1
    data = json.loads(capsys.readouterr().out)
    (report,) = data.get("reports", [data])
    beta = next(f for f in report["findings"] if f["subject"] == "beta")
    assert beta["severity"] == "fatal"
    assert "on the reference" not in beta["reason"]
    assert any("did not check it there" in e["detail"] for e in beta["evidence"])
