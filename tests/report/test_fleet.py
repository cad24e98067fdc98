"""The fleet view (pure): hosts folded into classes, and its formats: table, JSON, Markdown, HTML."""

from __future__ import annotations

import json
from dataclasses import replace

from envsync.compare.classes import fold_reports
from envsync.model.findings import Report
from envsync.report import render_fleet
from envsync.report.fleet import build_fleet
from tests.report.test_formats import OMEGA, PATCH, REPORT, XGRAMMAR

CT201 = Report(reference="ct129", target="ct201", findings=(PATCH,))
CT202 = Report(
    reference="ct129",
    target="ct202",
    findings=(replace(OMEGA, severity="degraded", target="1.5"), XGRAMMAR),
)
CLEAN = Report(reference="ct129", target="ct203")
REPORTS = [REPORT, CT201, CT202, CLEAN]


def test_a_class_per_report_worst_first_clean_last() -> None:
    fleet = build_fleet(REPORTS)
    assert [(c.nodeset, c.worst) for c in fleet.classes] == [
        ("ct200", "fatal"),
        ("ct202", "fatal"),
        ("ct201", "risky"),
        ("ct203", None),
    ]
    assert fleet.title() == "4 hosts in 4 classes against ct129"
    assert [c.line() for c in fleet.classes] == [
        "ct200 (1): xgrammar fatal; 1 risky, 1 benign",
        "ct202 (1): xgrammar fatal; 1 degraded",
        "ct201 (1): sglang/srt/server_args.py risky",
        "ct203 (1): as the reference",
    ]
    # a class's findings are listed worst first, whatever their order in the report
    assert [f.severity for f in fleet.classes[1].findings] == ["fatal", "degraded"]


def test_hosts_with_the_same_findings_fold_into_one_node_set() -> None:
    same = [replace(CT201, target=f"gpu{i:03d}") for i in range(1, 88)]
    bad = [replace(CT202, target=f"gpu{i:03d}") for i in (88, 89)]
    fleet = build_fleet([*same, *bad, replace(CLEAN, target="gpu090")])
    assert [c.line() for c in fleet.classes] == [
        "gpu[088-089] (2): xgrammar fatal; 1 degraded",
        "gpu[001-087] (87): sglang/srt/server_args.py risky",
        "gpu090 (1): as the reference",
    ]


def test_classes_given_by_the_comparison_are_kept_as_folded() -> None:
    """Two hosts whose reports happen to agree are still two classes when their
    environments differ (the comparison folds by digest, not by report)."""
    reports = [CT201, replace(CT201, target="ct204")]
    classes = fold_reports(reports, ["aaaa:1", "bbbb:1"])
    fleet = build_fleet(reports, classes)
    assert [(c.nodeset, c.digest) for c in fleet.classes] == [("ct201", "aaaa"), ("ct204", "bbbb")]
    assert len(build_fleet(reports).classes) == 1


def test_json_classes() -> None:
    data = json.loads(render_fleet("json", REPORTS))
    assert data["schema_version"] == 2 and data["hosts"] == 4
    first = data["classes"][0]
    assert first["hosts"] == "ct200" and first["members"] == ["ct200"] and first["count"] == 1
    assert first["worst"] == "fatal" and first["headline"].startswith("xgrammar fatal")
    assert first["summary"] == {"fatal": 1, "risky": 1, "unknown": 0, "degraded": 0, "benign": 1}
    xgrammar = next(f for f in data["classes"][1]["findings"] if f["subject"] == "xgrammar")
    assert xgrammar["target"] == "0.1.10"
    assert xgrammar["fixes"][0]["kind"] == "pin"
    assert xgrammar["fixes"][0]["requirement"] == "xgrammar==0.1.32"
    assert data["classes"][-1]["headline"] == "as the reference"


def test_markdown_classes() -> None:
    text = render_fleet("markdown", REPORTS)
    assert "## envsync: 4 hosts in 4 classes against ct129" in text
    assert "| `ct202` | 1 | 🔴 xgrammar fatal; 1 degraded |" in text
    assert "| `ct203` | 1 | ✅ as the reference |" in text
    assert "### `ct202` (1)" in text and "### `ct203`" not in text
    assert "xgrammar 0.1.10 lacks StructuralTag" in text


def test_table_classes_colours_only_on_request() -> None:
    plain = render_fleet("table", REPORTS, width=160)
    assert "\x1b[" not in plain
    assert plain.splitlines()[0].strip() == "4 hosts in 4 classes against ct129"
    assert "xgrammar 0.1.32 → 0.1.10" in plain
    lines = plain.splitlines()
    assert next(i for i, ln in enumerate(lines) if "ct200" in ln) < next(
        i for i, ln in enumerate(lines) if "ct203" in ln
    )
    assert "\x1b[" in render_fleet("table", REPORTS, color=True, width=160)


def test_html_page_is_self_contained() -> None:
    page = render_fleet("html", REPORTS)
    assert page.startswith("<!DOCTYPE html>")
    assert "<script src" not in page and "<link" not in page and "http" not in page
    assert page.count('<details class="fatal">') == 2  # xgrammar in two classes
    assert page.count("<tr data-order=") == 4
    assert "pin xgrammar==0.1.32" in page and "lacks StructuralTag" in page
    evil = Report(reference="ct129", target="<script>alert(1)</script>", findings=(OMEGA,))
    assert "<script>alert(1)" not in render_fleet("html", [evil])


def test_two_reports_of_one_host_name_fold_into_one_class_of_two() -> None:
    fleet = build_fleet([REPORT, REPORT])
    assert [(c.nodeset, c.count) for c in fleet.classes] == [("ct200", 2)]


def test_every_severity_has_its_colours_on_the_page() -> None:
    from envsync.model.vocab import SEVERITIES
    from envsync.report.html import COLORS

    assert set(COLORS) == set(SEVERITIES)
    page = render_fleet("html", REPORTS)
    assert all(f".sev.{s}{{background:" in page for s in SEVERITIES)
