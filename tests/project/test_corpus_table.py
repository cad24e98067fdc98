"""The corpus table (tests/corpus/table.py): rows recorded by the corpus tests travel from
a worker to the controller, are written with where they were observed, and the accuracy
page renders them; the committed table's every row agrees with its expectation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from docsgen.figures import CORPUS, agrees, corpus
from tests.corpus import table
from tests.helpers import REPO

ROW = {
    "report": "vllm-project/vllm#22178",
    "culprit": "transformers",
    "reference": "starts; on a CPU it stops at RuntimeError: Failed to infer device type",
    "target": "ValueError: 'aimv2' is already used by a Transformers config",
    "static": "risky",
    "import_check": "fatal",
    "expected": "fatal",
    "test": "tests/corpus/test_stacks.py::test_a_real_start_decides_then_envsync[x]",
}


def test_rows_travel_are_written_and_render(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(table, "ROWS", {})
    monkeypatch.setattr(table, "_PARTS", {})
    table.record("aimv2", **ROW)
    # a case whose tests observe one part each: a row once the last part comes
    table.part("kept", report="r", culprit="numpy", reference="imports", target="imports")
    table.part("kept", expected=table.NOT_FATAL, test="tests/corpus/test_required.py")
    table.part("kept", static="risky")
    assert "kept" not in table.ROWS
    table.part("kept", import_check="risky")
    exported = table.export()
    # the controller's rows: what the worker exported
    monkeypatch.setattr(table, "ROWS", {})
    table.merge(json.loads(json.dumps(exported)))
    assert table.ROWS["aimv2"] == ROW and table.ROWS["kept"]["import_check"] == "risky"
    table.write(tmp_path / CORPUS, "ENVSYNC_WRITE_CORPUS=1 pytest tests/corpus")
    data = json.loads((tmp_path / CORPUS).read_text())
    assert data["command"] == "ENVSYNC_WRITE_CORPUS=1 pytest tests/corpus" and data["commit"]
    assert [r["case"] for r in data["rows"]] == ["aimv2", "kept"]
    page = corpus(tmp_path)
    assert "**2 cases, 2 agreeing with their expectation**" in page
    assert "envsync's verdict (with `--import-check` where it ran): fatal 1, risky 1." in page
    assert (
        "| `aimv2` | vllm-project/vllm#22178 | starts; on a CPU it stops at RuntimeError: "
        "Failed to infer device type | ValueError: 'aimv2' is already used by a Transformers "
        "config | risky | fatal | fatal | yes |"
    ) in page
    # a verdict that is not the expected one is said, and counted
    table.record("missed", **{**ROW, "import_check": None})  # type: ignore[arg-type]  # ROW is a dict[str, str] of record's keywords
    table.write(tmp_path / CORPUS, "pytest")
    page = corpus(tmp_path)
    assert "**3 cases, 2 agreeing" in page
    assert "| risky | not run | fatal | **no** |" in page


def test_not_fatal_agrees_with_all_but_fatal() -> None:
    row = {**ROW, "expected": table.NOT_FATAL}
    assert not agrees(row)
    assert agrees({**row, "import_check": "risky"})
    assert agrees({**row, "import_check": None, "static": "benign"})


def test_an_outcome_keeps_no_path_of_the_run() -> None:
    """What a real run printed, without the paths of the test's venvs."""
    assert table.outcome(None) == "imports" and table.outcome(None, ok="starts") == "starts"
    assert (
        table.outcome("ImportError: cannot import name 'x' from 'y' (/tmp/p/site/y/__init__.py)")
        == "ImportError: cannot import name 'x' from 'y'"
    )
    assert (
        table.outcome("/tmp/p/site/kernel/ops.so: undefined symbol: f")
        == "ops.so: undefined symbol: f"
    )


def test_the_accuracy_page_renders_the_committed_table_and_every_row_agrees() -> None:
    data = json.loads((REPO / CORPUS).read_text())
    page = corpus(REPO)
    assert f"**{len(data['rows'])} cases, {len(data['rows'])} agreeing" in page
    for row in data["rows"]:
        assert f"| `{row['case']}` | " in page, row["case"]
        assert agrees(row), row
    assert "<!-- envsync:corpus -->" in (REPO / "docs" / "explanation" / "accuracy.md").read_text()
