"""Prometheus report: node_exporter's textfile format (the text exposition format).

`check --format prometheus -o /var/lib/node_exporter/textfile/envsync.prom` writes it
atomically (node_exporter's textfile collector reads every `*.prom` of its folder); a timer
runs it (docs/how-to/prometheus.md). One gauge per host and severity, the host's
environment digest as a label, so that a dashboard sees both "how bad" and "did it change":

    envsync_findings{host="gpu001",reference="ct129",severity="fatal",digest="9f2c..."} 1
    envsync_check_ok{host="gpu001",reference="ct129",digest="9f2c..."} 0
    envsync_host_up{host="gpu002"} 0                 # could not be collected
    envsync_server_findings{server="sglang_a",severity="fatal"} 2

`textfile()` is the function other stages call; `family` and `sample` are the format
itself, for a stage with metrics of its own (watch.py's).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from envsync.findings import Report
from envsync.vocab import FAIL_ON_DEFAULT, SEVERITIES, SEVERITY_RANK, Severity

PREFIX = "envsync"


def label(value: str) -> str:
    """A label value as the exposition format escapes it."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def number(value: float) -> str:
    """A sample's value: whole numbers without a fraction, others to the millisecond."""
    return str(int(value)) if float(value).is_integer() else f"{value:.3f}"


def sample(name: str, labels: Mapping[str, str], value: float) -> str:
    """One sample line of the metric `name` (its whole name)."""
    inner = ",".join(f'{k}="{label(v)}"' for k, v in labels.items())
    return f"{name}{{{inner}}} {number(value)}" if inner else f"{name} {number(value)}"


def family(name: str, help_text: str, samples: Iterable[str]) -> list[str]:
    """A gauge's HELP and TYPE lines and its samples; nothing for a gauge without any."""
    lines = list(samples)
    if not lines:
        return []
    return [f"# HELP {name} {help_text}", f"# TYPE {name} gauge", *lines]


def _sample(name: str, labels: Mapping[str, str], value: int) -> str:
    return sample(f"{PREFIX}_{name}", labels, value)


def _family(name: str, help_text: str, samples: Iterable[str]) -> list[str]:
    return family(f"{PREFIX}_{name}", help_text, samples)


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
