"""JSON report: schema_version, summary, findings (one document per comparison)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from envsync.exhaustive import assert_never
from envsync.model.codec import to_data
from envsync.model.findings import Fix, FlagFix, PinFix, Report, SyncDistFix, SyncFileFix
from envsync.report.base import View
from envsync.report.fleet import Fleet


def fix_data(fix: Fix) -> dict[str, Any]:
    """A fix as schema 1 of the report writes it: every field of every kind, null where
    the kind has none (consumers read one shape whatever the kind)."""
    data: dict[str, Any] = {
        "kind": fix.kind,
        "summary": fix.summary,
        "requirement": None,
        "dist": None,
        "path": None,
        "flag": None,
        "value": None,
        "gives_up": None,
        "used_when": [],
    }
    match fix:
        case PinFix():
            data.update(requirement=fix.requirement, dist=fix.dist)
        case SyncDistFix():
            data.update(dist=fix.dist)
        case SyncFileFix():
            data.update(dist=fix.dist, path=fix.path)
        case FlagFix():
            data.update(
                flag=fix.flag, value=fix.value, gives_up=fix.gives_up, used_when=list(fix.used_when)
            )
        case _:
            assert_never(fix)
    return data


def report_data(report: Report) -> dict[str, Any]:
    data = to_data(report)
    for finding, encoded in zip(report.findings, data["findings"], strict=True):
        encoded["fixes"] = [fix_data(x) for x in finding.fixes]
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


def fleet_data(fleet: Fleet) -> dict[str, object]:
    """The fleet as JSON data (schema_version 2: classes, not a column per host)."""
    return {
        "schema_version": 2,
        "reference": fleet.reference,
        "hosts": fleet.host_count,
        "classes": [
            {
                "hosts": c.nodeset,
                "members": list(c.hosts),
                "count": c.count,
                "digest": c.digest,
                "worst": c.worst,
                "headline": c.headline(),
                "summary": c.report.summary,
                "findings": report_data(c.report)["findings"],
                "notes": list(c.report.notes),
            }
            for c in fleet.classes
        ],
    }


def render(reports: Sequence[Report], view: View) -> str:
    if len(reports) == 1:
        return json.dumps(report_data(reports[0]), indent=2) + "\n"
    return (
        json.dumps({"schema_version": 1, "reports": [report_data(r) for r in reports]}, indent=2)
        + "\n"
    )


def render_fleet(fleet: Fleet, view: View) -> str:
    return json.dumps(fleet_data(fleet), indent=2) + "\n"
