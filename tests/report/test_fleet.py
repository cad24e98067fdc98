"""The fleet matrix (pure) and its formats: table, JSON, Markdown, HTML."""

from __future__ import annotations

import json
from dataclasses import replace

from envsync.findings import Report
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


def test_rows_are_every_difference_worst_first_cells_per_host() -> None:
    fleet = build_fleet(REPORTS)
    assert fleet.hosts == ("ct200", "ct201", "ct202", "ct203")
    # xgrammar is fatal on two hosts; omega is degraded on one, benign on another.
    assert [(r.subject, r.worst) for r in fleet.rows] == [
        ("xgrammar", "fatal"),
        ("sglang/srt/server_args.py", "risky"),
        ("omega", "degraded"),
    ]
    xgrammar = fleet.rows[0]
    assert set(xgrammar.cells) == {"ct200", "ct202"}  # ct201 and ct203 match the reference
    assert xgrammar.reference == "0.1.32"
    omega = fleet.rows[2]
    assert {h: f.severity for h, f in omega.cells.items()} == {
        "ct200": "benign",
        "ct202": "degraded",
    }
    assert fleet.counts_text("ct203") == "no drift"
    assert fleet.counts_text("ct202") == "1 fatal, 1 degraded"


def test_json_matrix() -> None:
    data = json.loads(render_fleet("json", REPORTS))
    assert data["schema_version"] == 1 and data["hosts"] == ["ct200", "ct201", "ct202", "ct203"]
    row = data["rows"][0]
    assert row["subject"] == "xgrammar" and row["worst"] == "fatal"
    assert row["cells"]["ct202"]["value"] == "0.1.10"
    assert row["cells"]["ct202"]["fixes"][0] == {
        "kind": "pin",
        "summary": "pin xgrammar==0.1.32 (pip install --no-deps)",
    }
    assert data["summary"]["ct201"] == {
        "fatal": 0,
        "risky": 1,
        "unknown": 0,
        "degraded": 0,
        "benign": 0,
    }


def test_markdown_matrix() -> None:
    text = render_fleet("markdown", REPORTS)
    assert "| subject | kind | reference | ct200 | ct201 | ct202 | ct203 |" in text
    assert "| `xgrammar` | version | 0.1.32 | 🔴 fatal 0.1.10 | = | 🔴 fatal 0.1.10 | = |" in text
    assert "- **ct203**: no drift" in text
    assert "- **ct202** `xgrammar` (fatal): xgrammar 0.1.10 lacks StructuralTag" in text


def test_table_matrix_colours_only_on_request() -> None:
    plain = render_fleet("table", REPORTS, width=160)
    assert "\x1b[" not in plain
    assert "ct200 2 fatal" not in plain  # counts per host are in the title, by host
    assert "ct202 1 fatal, 1 degraded" in plain
    lines = plain.splitlines()
    assert next(i for i, ln in enumerate(lines) if "xgrammar" in ln) < next(
        i for i, ln in enumerate(lines) if "omega" in ln
    )
    assert "\x1b[" in render_fleet("table", REPORTS, color=True, width=160)


def test_html_page_is_self_contained() -> None:
    page = render_fleet("html", REPORTS)
    assert page.startswith("<!DOCTYPE html>")
    assert "<script src" not in page and "<link" not in page and "http" not in page
    assert page.count('class="fatal"') == 2  # the two fatal cells
    assert "pin xgrammar==0.1.32" in page and "lacks StructuralTag" in page
    evil = Report(reference="ct129", target="<script>alert(1)</script>", findings=(OMEGA,))
    assert "<script>alert(1)" not in render_fleet("html", [evil])


def test_two_columns_of_one_host_name_stay_apart() -> None:
    fleet = build_fleet([REPORT, REPORT])
    assert fleet.hosts == ("ct200", "ct200 (2)")
    assert set(fleet.rows[0].cells) == {"ct200", "ct200 (2)"}


def test_every_severity_has_its_colours_on_the_page() -> None:
    from envsync.report.html import COLORS
    from envsync.vocab import SEVERITIES

    assert set(COLORS) == set(SEVERITIES)
    page = render_fleet("html", REPORTS)
    assert all(f"td.{s}{{background:" in page for s in SEVERITIES)
