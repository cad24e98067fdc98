"""JUnit XML report: one test case per finding; those at or above `fail_on` are failures."""

from __future__ import annotations

from collections.abc import Sequence
from xml.etree import ElementTree as ET

from envsync.model.findings import Report
from envsync.model.vocab import SEVERITY_RANK
from envsync.report.base import View


def render(reports: Sequence[Report], view: View) -> str:
    fail_on = view.fail_on
    threshold = SEVERITY_RANK[fail_on]
    suites = ET.Element("testsuites", name="envsync")
    total = failed = 0
    for report in reports:
        bad = sum(1 for f in report.findings if SEVERITY_RANK[f.severity] <= threshold)
        suite = ET.SubElement(
            suites,
            "testsuite",
            name=f"envsync {report.target} vs {report.reference}",
            tests=str(max(1, len(report.findings))),
            failures=str(bad),
            errors="0",
            skipped="0",
        )
        total += max(1, len(report.findings))
        failed += bad
        if not report.findings:
            ET.SubElement(
                suite,
                "testcase",
                classname="envsync.drift",
                name=f"{report.target} matches {report.reference}",
            )
        for f in report.findings:
            case = ET.SubElement(
                suite, "testcase", classname=f"envsync.{f.kind}", name=f"{f.subject} [{f.severity}]"
            )
            body = [f.reason]
            body += [
                f"evidence ({e.source}): {e.detail}" + (f" at {e.file}:{e.line}" if e.file else "")
                for e in f.evidence
            ]
            body += [f"fix ({x.kind}): {x.summary}" for x in f.fixes]
            if SEVERITY_RANK[f.severity] <= threshold:
                failure = ET.SubElement(case, "failure", message=f.reason, type=f.severity)
                failure.text = "\n".join(body)
            else:
                out = ET.SubElement(case, "system-out")
                out.text = "\n".join(body)
    suites.set("tests", str(total))
    suites.set("failures", str(failed))
    ET.indent(suites)
    return (
        '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"
    )
