"""The reliability figures: a whole default run is recognised as one (pyproject's addopts
leave two sets out with -m), and it adds the cases of the last `pytest -m matrix` run (the
kill matrix beyond the default run's moments) from the file that run wrote."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from tests import figures
from tests.helpers import REPO

KILLS, DISKS = figures.MATRIX_SECTIONS
COLLECT = [sys.executable, "-m", "pytest", "--co", "-q", "-p", "no:cacheprovider"]


def test_a_whole_run_adds_the_matrix_runs_cases(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from docsgen.figures import reliability

    matrix = tmp_path / "kill-matrix.json"
    monkeypatch.setattr(figures, "FIGURES", defaultdict(dict))
    figures.add(KILLS, "apply: agent at pip writing")
    figures.add(KILLS, "rollback: envsync at staging")
    figures.add(DISKS, "the disk under the state full")
    figures.add("hostile input", "not the matrix's")
    figures.write_matrix(matrix, {"passed": 3, "failed": 0, "skipped": 0})
    kept = json.loads(matrix.read_text())
    assert kept["command"].endswith("pytest -q -m matrix") and kept["commit"] is not None
    assert set(kept["figures"]) == {KILLS, DISKS}  # the matrix's sections alone
    # a later whole run: its own cases, and the matrix run's that it did not run
    monkeypatch.setattr(figures, "FIGURES", defaultdict(dict))
    figures.add(KILLS, "apply: envsync at pip writing")
    figures.add(KILLS, "apply: agent at pip writing")  # in both: counted once
    figures.add(DISKS, "the environment's disk full")
    out = tmp_path / "docs" / "generated" / "reliability.json"
    figures.write(out, {"passed": 10, "failed": 0, "skipped": 1}, matrix)
    data = json.loads(out.read_text())
    assert data["figures"][KILLS] == {
        "apply: agent at pip writing": 1,
        "apply: envsync at pip writing": 1,
        "rollback: envsync at staging": 1,
    }
    assert data["totals"][KILLS] == 3 and data["totals"][DISKS] == 2
    assert data["matrix_run"]["cases_added"] == 2 and data["matrix_run"]["tests"]["passed"] == 3
    page = reliability(tmp_path)
    assert "2 cases added from `.venv/bin/python -m pytest -q -m matrix`" in page
    assert f"| {KILLS}: rollback: envsync at staging | 1 |" in page
    # no matrix file: the run's own figures alone
    figures.write(out, {"passed": 10, "failed": 0, "skipped": 1}, tmp_path / "absent.json")
    assert "matrix_run" not in json.loads(out.read_text())


@pytest.mark.slow
def test_the_default_run_is_a_whole_run_and_a_matrix_run_is_not(tmp_path: Path) -> None:
    """The default run's -m comes from addopts: it must still count as the whole suite (it
    did not, so no whole run wrote the figures); `-m matrix`, a path or -k never do."""
    plugin = tmp_path / "whole_probe.py"
    plugin.write_text(
        "def pytest_collection_finish(session):\n"
        "    from tests.conftest import _whole_suite\n"
        "    print('WHOLE', _whole_suite(session.config))\n"
    )
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{REPO}"}

    def whole(*args: str) -> bool:
        out = subprocess.run(
            [*COLLECT, "-p", "whole_probe", *args],
            capture_output=True,
            text=True,
            cwd=REPO,
            env=env,
            timeout=600,
        ).stdout
        (line,) = [ln for ln in out.splitlines() if ln.startswith("WHOLE ")]
        return line == "WHOLE True"

    assert whole()
    assert not whole("-m", "matrix")
    assert not whole("-k", "nodeset")
