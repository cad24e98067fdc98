"""Prometheus report: node_exporter's textfile format (the text exposition format), one
vocabulary for `check --format prometheus` and `watch --prometheus`.

Both commands write the metrics of `METRICS`, with the labels it names, through
`hosts_textfile`, so that one textfile (and one dashboard, one alert rule) serves either:

    envsync_host_up{host="gpu002"} 0                 # could not be collected
    envsync_findings{host="gpu001",reference="ct129",severity="fatal"} 1
    envsync_blocking_findings{host="gpu001",reference="ct129"} 1
    envsync_check_ok{host="gpu001",reference="ct129"} 0
    envsync_host_info{host="gpu001",digest="9f2c..."} 1
    envsync_last_run_timestamp_seconds 1.796e+09

`watch` adds what only it knows (`envsync_changes`, `envsync_last_good_timestamp_seconds`),
`check` the multi-node servers' gates (`envsync_server_findings`); never one name with
other labels. `family` and `sample` are the format itself.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from envsync.model.findings import Report
from envsync.model.vocab import FAIL_ON_DEFAULT, SEVERITIES, SEVERITY_RANK, Severity
from envsync.report.base import View


@dataclass(frozen=True, slots=True, kw_only=True)
class Metric:
    """A gauge of the vocabulary: its whole name, its HELP text, its labels in order."""

    name: str
    help: str
    labels: tuple[str, ...]


HOST_UP = Metric(
    name="envsync_host_up",
    help="1 when envsync could collect the host on its last run, else 0.",
    labels=("host",),
)
FINDINGS = Metric(
    name="envsync_findings",
    help="Findings of the host against its reference on the last run, by severity.",
    labels=("host", "reference", "severity"),
)
BLOCKING = Metric(
    name="envsync_blocking_findings",
    help="Findings at or above --fail-on on the last run (what fails `check`).",
    labels=("host", "reference"),
)
CHECK_OK = Metric(
    name="envsync_check_ok",
    help="1 when the host has no finding at or above --fail-on, else 0.",
    labels=("host", "reference"),
)
HOST_INFO = Metric(
    name="envsync_host_info",
    help="Always 1: the digest of the host's environment (it changes when anything the "
    "diff compares changes).",
    labels=("host", "digest"),
)
LAST_RUN = Metric(
    name="envsync_last_run_timestamp_seconds",
    help="When envsync last wrote this file.",
    labels=(),
)
CHANGES = Metric(
    name="envsync_changes",
    help="Changes to the host's environment seen on the last run (watch).",
    labels=("host",),
)
LAST_GOOD = Metric(
    name="envsync_last_good_timestamp_seconds",
    help="When the host's last good state (ready or locked) was recorded (watch).",
    labels=("host",),
)
SERVER_FINDINGS = Metric(
    name="envsync_server_findings",
    help="Findings among the nodes of one multi-node server, per severity (check).",
    labels=("server", "severity"),
)
# Every metric envsync writes, in the order a textfile has them.
METRICS = (
    HOST_UP,
    FINDINGS,
    BLOCKING,
    CHECK_OK,
    HOST_INFO,
    CHANGES,
    LAST_GOOD,
    SERVER_FINDINGS,
    LAST_RUN,
)


@dataclass(frozen=True, slots=True, kw_only=True)
class HostMetrics:
    """A host as a run left it, in the vocabulary's terms (check and watch make these)."""

    host: str
    up: bool
    reference: str | None = None  # what its findings were compared with (None: nothing)
    counts: Mapping[str, int] = field(default_factory=dict)  # findings by severity
    blocking: int = 0  # findings at or above --fail-on
    digest: str | None = None  # the environment's digest (identity.environment)
    changes: int | None = None  # changes seen since the last run (watch)
    last_good: float | None = None  # when its last good state was recorded (watch)


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


def _samples(
    host: HostMetrics, fail_on: Severity
) -> Iterable[tuple[Metric, tuple[str, ...], float]]:
    yield HOST_UP, (host.host,), 1.0 if host.up else 0.0
    if host.up and host.reference is not None:
        for severity in SEVERITIES:
            yield FINDINGS, (host.host, host.reference, severity), host.counts.get(severity, 0)
        yield BLOCKING, (host.host, host.reference), host.blocking
        yield CHECK_OK, (host.host, host.reference), 0.0 if host.blocking else 1.0
    if host.up and host.digest:
        yield HOST_INFO, (host.host, host.digest), 1.0
    if host.up and host.changes is not None:
        yield CHANGES, (host.host,), host.changes
    if host.last_good is not None:
        yield LAST_GOOD, (host.host,), host.last_good


def hosts_textfile(
    hosts: Sequence[HostMetrics],
    *,
    fail_on: Severity = FAIL_ON_DEFAULT,
    servers: Sequence[Report] = (),
    now: float | None = None,
) -> str:
    """The textfile of a run: each host's metrics, the servers' gates, and `now` (the
    run's end, epoch seconds; None leaves LAST_RUN out)."""
    found: dict[str, list[str]] = {m.name: [] for m in METRICS}
    for host in hosts:
        for metric, values, value in _samples(host, fail_on):
            found[metric.name].append(
                sample(metric.name, dict(zip(metric.labels, values, strict=True)), value)
            )
    for gate in servers:
        name = gate.target.removeprefix("server ")
        for severity in SEVERITIES:
            labels = dict(zip(SERVER_FINDINGS.labels, (name, severity), strict=True))
            found[SERVER_FINDINGS.name].append(
                sample(SERVER_FINDINGS.name, labels, gate.summary[severity])
            )
    if now is not None:
        found[LAST_RUN.name].append(sample(LAST_RUN.name, {}, now))
    lines: list[str] = []
    for metric in METRICS:
        help_text = metric.help.replace("--fail-on", f"--fail-on ({fail_on})")
        lines += family(metric.name, help_text, found[metric.name])
    return "\n".join(lines) + "\n"


def report_metrics(
    report: Report, *, digest: str | None = None, fail_on: Severity = FAIL_ON_DEFAULT
) -> HostMetrics:
    """A report of `check` (or `diff`) in the vocabulary's terms."""
    threshold = SEVERITY_RANK[fail_on]
    return HostMetrics(
        host=report.target,
        up=True,
        reference=report.reference,
        counts=report.summary,
        blocking=sum(1 for f in report.findings if SEVERITY_RANK[f.severity] <= threshold),
        digest=digest,
    )


def textfile(
    reports: Sequence[Report],
    *,
    digests: Mapping[str, str] | None = None,
    fail_on: Severity = FAIL_ON_DEFAULT,
    unreachable: Sequence[str] = (),
    servers: Sequence[Report] = (),
    now: float | None = None,
) -> str:
    """The metrics of a check: `reports` (one per host), each host's environment digest,
    the hosts that could not be collected, the servers' gates (gate.py)."""
    digests = digests or {}
    hosts = [report_metrics(r, digest=digests.get(r.target), fail_on=fail_on) for r in reports]
    hosts += [HostMetrics(host=host, up=False) for host in unreachable]
    return hosts_textfile(hosts, fail_on=fail_on, servers=servers, now=now)


def render(reports: Sequence[Report], view: View) -> str:
    return textfile(reports, fail_on=view.fail_on)
