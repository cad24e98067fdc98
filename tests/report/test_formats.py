"""Each report format against its golden file; the formats' own invariants."""

from __future__ import annotations

import json
import os
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest

from envsync.model.findings import Evidence, Finding, FlagFix, PinFix, Report, SyncFileFix
from envsync.model.vocab import Severity
from envsync.report import FORMATS, render

GOLDEN = Path(__file__).resolve().parent.parent / "data" / "golden"

XGRAMMAR = Finding(
    subject="xgrammar",
    kind="version",
    reference="0.1.32",
    target="0.1.10",
    severity="fatal",
    reason="xgrammar 0.1.10 lacks StructuralTag, which sglang.srt.constrained.xgrammar_backend "
    "imports from xgrammar at module level; startup runs that module (--grammar-backend xgrammar, the default).",
    decided_by="name-check",
    evidence=(
        Evidence(
            source="name-check",
            detail="sglang.srt.constrained.xgrammar_backend imports xgrammar at module level: "
            "cannot import name 'StructuralTag' from 'xgrammar' on the target",
            file="/opt/venv/lib/python3.11/site-packages/sglang/srt/constrained/xgrammar_backend.py",
            line=22,
            statement="from xgrammar import ( ...",
            context="module; startup path: sglang.srt.constrained.xgrammar_backend",
        ),
        Evidence(
            source="rule-pack", detail="sglang.srt.constrained.xgrammar_backend runs at startup"
        ),
    ),
    fixes=(
        PinFix(
            summary="pin xgrammar==0.1.32 (pip install --no-deps)",
            requirement="xgrammar==0.1.32",
            dist="xgrammar",
        ),
        FlagFix(
            summary="launch with --grammar-backend none (gives up: structured output)",
            flag="--grammar-backend",
            value="none",
            gives_up="structured output",
        ),
    ),
)
PATCH = Finding(
    subject="sglang/srt/server_args.py",
    kind="file",
    reference="6eae81afbc428b31ecbf288e79f888bc4f4ebbd30924b1e30480b32ec012d331",
    target="70a0bbd4d8e04ea93774c4b0973084393f3e335d60bfb877d95a9c9720bae254",
    severity="risky",
    reason="sglang/srt/server_args.py differs (a local patch on the reference): startup imports sglang.srt.server_args.",
    decided_by="import-graph",
    evidence=(
        Evidence(
            source="import-graph",
            detail="startup path: sglang.launch_server -> sglang.srt.server_args",
            context="module",
        ),
    ),
    fixes=(
        SyncFileFix(
            summary="copy sglang/srt/server_args.py from the reference",
            dist="sglang",
            path="sglang/srt/server_args.py",
        ),
    ),
)
OMEGA = Finding(
    subject="omega",
    kind="version",
    reference="2.0",
    target="1.0",
    severity="benign",
    reason="omega 2.0 on the reference, 1.0 on the target: nothing the service imports at startup uses it.",
    decided_by="import-graph",
)
REPORT = Report(
    reference="ct129",
    target="ct200",
    entrypoint="sglang.launch_server",
    command=("{python}", "-m", "sglang.launch_server", "--port", "{port}"),
    findings=(XGRAMMAR, PATCH, OMEGA),
    notes=(
        "import probe: import sglang.launch_server: ModuleNotFoundError: No module named 'numpy' (not caused by a difference from the reference)",
    ),
)
CLEAN = Report(reference="ct129", target="ct129-clone", entrypoint=None)

SUFFIX = {
    "table": "txt",
    "json": "json",
    "markdown": "md",
    "junit": "xml",
    "html": "html",
    "prometheus": "prom",
}


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_format_matches_golden(fmt: str) -> None:
    text = render(fmt, [REPORT])
    path = GOLDEN / f"report.{SUFFIX[fmt]}"
    if os.environ.get("UPDATE_GOLDEN"):
        path.write_text(text)
    assert text == path.read_text()


def test_json_carries_schema_summary_and_findings() -> None:
    data = json.loads(render("json", [REPORT]))
    assert data["schema_version"] == 1
    assert data["summary"] == {"fatal": 1, "risky": 1, "unknown": 0, "degraded": 0, "benign": 1}
    assert [f["subject"] for f in data["findings"]] == [
        "xgrammar",
        "sglang/srt/server_args.py",
        "omega",
    ]
    several = json.loads(render("json", [REPORT, CLEAN]))
    assert [r["target"] for r in several["reports"]] == ["ct200", "ct129-clone"]


def test_junit_fails_what_check_fails_by_default() -> None:
    # one default (vocab.FAIL_ON_DEFAULT): a JUnit report fails what `check` fails
    root = ET.fromstring(render("junit", [REPORT, CLEAN]))
    assert (root.get("tests"), root.get("failures")) == ("4", "1")
    cases = {c.get("name"): c for c in root.iter("testcase")}
    assert cases["xgrammar [fatal]"].find("failure") is not None
    assert cases["omega [benign]"].find("failure") is None
    assert cases["ct129-clone matches ct129"].find("failure") is None


@pytest.mark.parametrize(
    ("fail_on", "failures"), [("fatal", "1"), ("risky", "2"), ("degraded", "2"), ("benign", "3")]
)
def test_junit_fails_what_fail_on_fails(fail_on: Severity, failures: str) -> None:
    root = ET.fromstring(render("junit", [REPORT, CLEAN], fail_on=fail_on))
    assert root.get("failures") == failures
    cases = {c.get("name"): c for c in root.iter("testcase")}
    risky = cases["sglang/srt/server_args.py [risky]"].find("failure")
    assert (risky is not None) == (fail_on != "fatal")


def test_table_groups_and_colors_only_on_request() -> None:
    plain = render("table", [REPORT])
    assert "\x1b[" not in plain
    assert plain.index("fatal") < plain.index("risky") < plain.index("benign")
    assert "\x1b[" in render("table", [REPORT], color=True)
    assert "no drift" in render("table", [CLEAN])


@pytest.mark.parametrize("fmt", [f for f in FORMATS if f not in ("json", "prometheus")])
def test_a_newline_in_a_file_name_is_shown_as_an_escape(fmt: str) -> None:
    """A file's name from a host may hold a newline: every format that shows names (JSON
    escapes it itself; Prometheus counts) shows it as \\x0a, never as a line break, nor
    wrapped into a space."""
    name = "sglang/srt/evil\nname.py"
    finding = Finding(
        subject=name,
        kind="file",
        reference="a" * 64,
        target=None,
        severity="benign",
        reason=f"{name} missing on the target: no import path from startup reaches it.",
        decided_by="import-graph",
        evidence=(Evidence(source="import-graph", detail="not imported", file=name),),
    )
    report = Report(reference="ct129", target="ct200", findings=(finding,))
    text = render(fmt, [report], width=400)
    assert "evil\\x0aname.py" in text
    assert "evil\nname" not in text and "evil name" not in text
