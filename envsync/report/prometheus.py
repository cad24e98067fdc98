"""Prometheus report: node_exporter's textfile format (the text exposition format).

`check --format prometheus -o /var/lib/node_exporter/textfile/envsync.prom` writes it
atomically (node_exporter's textfile collector reads every `*.prom` of its folder); a timer
runs it (docs/how-to/prometheus.md). One gauge per host and severity, the host's
environment digest as a label, so that a dashboard sees both "how bad" and "did it change":

    envsync_findings{host="gpu001",reference="ct129",severity="fatal",digest="9f2c..."} 1
    envsync_check_ok{host="gpu001",reference="ct129",digest="9f2c..."} 0
    envsync_host_up{host="gpu002"} 0                 # could not be collected
    envsync_server_findings{server="sglang_a",severity="fatal"} 2

`textfile()` is the function other stages call (a watch that checks on a schedule).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from envsync.findings import Report
from envsync.vocab import FAIL_ON_DEFAULT, SEVERITIES, SEVERITY_RANK, Severity

PREFIX = "envsync"


def _label(value: str) -> str:
    """A label value as the exposition format escapes it."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _sample(name: str, labels: Mapping[str, str], value: int) -> str:
    inner = ",".join(f'{k}="{_label(v)}"' for k, v in labels.items())
    return f"{PREFIX}_{name}{{{inner}}} {value}"


def _family(name: str, help_text: str, samples: Iterable[str]) -> list[str]:
    lines = list(samples)
    if not lines:
        return []
    return [f"# HELP {PREFIX}_{name} {help_text}", f"# TYPE {PREFIX}_{name} gauge", *lines]


def textfile(
    reports: Sequence[Report],
    *,
    digests: Mapping[str, str] | None = None,
    fail_on: Severity = FAIL_ON_DEFAULT,
    unreachable: Sequence[str] = (),
    servers: Sequence[Report] = (),
) -> str:
    """The metrics of a check: `reports` (one per host), each host's environment digest,
    the hosts that could not be collected, the servers' gates (gate.py). No timestamp:
    node_exporter exports the file's own (node_textfile_mtime_seconds)."""
    digests = digests or {}
    threshold = SEVERITY_RANK[fail_on]
    findings: list[str] = []
    ok: list[str] = []
    for report in reports:
        labels = {"host": report.target, "reference": report.reference}
        digest = digests.get(report.target)
        summary = report.summary
        for severity in SEVERITIES:
            findings.append(
                _sample(
                    "findings",
                    {**labels, "severity": severity, "digest": digest or ""},
                    summary[severity],
                )
            )
        blocked = any(SEVERITY_RANK[f.severity] <= threshold for f in report.findings)
        ok.append(_sample("check_ok", {**labels, "digest": digest or ""}, 0 if blocked else 1))
    up = [_sample("host_up", {"host": r.target}, 1) for r in reports]
    up += [_sample("host_up", {"host": host}, 0) for host in unreachable]
    gates = [
        _sample(
            "server_findings",
            {"server": r.target.removeprefix("server "), "severity": severity},
            r.summary[severity],
        )
        for r in servers
        for severity in SEVERITIES
    ]
    lines = [
        *_family(
            "findings",
            "Findings of envsync against the reference, per host and severity.",
            findings,
        ),
        *_family("check_ok", f"1 when the host has no finding at or above {fail_on}, else 0.", ok),
        *_family("host_up", "1 when envsync could collect the host, else 0.", up),
        *_family(
            "server_findings",
            "Findings among the nodes of one multi-node server, per severity.",
            gates,
        ),
    ]
    return "\n".join(lines) + "\n"


def render(reports: Sequence[Report], *, fail_on: Severity = FAIL_ON_DEFAULT) -> str:
    return textfile(reports, fail_on=fail_on)
