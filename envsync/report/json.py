"""JSON report: schema_version, summary, findings (one document per comparison)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from envsync.codec import to_data
from envsync.findings import Report


def report_data(report: Report) -> dict[str, Any]:
    data = to_data(report)
    return {
        "schema_version": data.pop("schema_version"),
        "reference": data.pop("reference"),
        "target": data.pop("target"),
        "entrypoint": data.pop("entrypoint"),
        "command": data.pop("command"),
        "summary": report.summary,
        "findings": data.pop("findings"),
        "notes": data.pop("notes"),
    }


def render(reports: Sequence[Report]) -> str:
    if len(reports) == 1:
        return json.dumps(report_data(reports[0]), indent=2) + "\n"
    return (
        json.dumps({"schema_version": 1, "reports": [report_data(r) for r in reports]}, indent=2)
        + "\n"
    )
