"""The Prometheus textfile, read back by the real Prometheus client's parser."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from envsync.model.findings import Report
from envsync.report.prometheus import textfile
from tests.report.test_formats import OMEGA, REPORT, XGRAMMAR


def families(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    return {
        f.name: [(dict(s.labels), s.value) for s in f.samples]
        for f in text_string_to_metric_families(text)
    }


def test_a_gauge_per_host_and_severity_with_the_digest() -> None:
    other = Report(reference="ct129", target="gpu002", findings=(OMEGA,))
    gate = Report(reference="one another (gpu[001-002])", target="server a", findings=(XGRAMMAR,))
    text = textfile(
        [REPORT, other],
        digests={"ct200": "0123456789abcdef"},
        unreachable=["gpu003"],
        servers=[gate],
    )
    found = families(text)
    fatal = {lab["host"]: v for lab, v in found["envsync_findings"] if lab["severity"] == "fatal"}
    assert fatal == {"ct200": 1.0, "gpu002": 0.0}
    assert len(found["envsync_findings"]) == 10  # 2 hosts x 5 severities
    ok = {lab["host"]: v for lab, v in found["envsync_check_ok"]}
    assert ok == {"ct200": 0.0, "gpu002": 1.0}
    # The digest is a label of its own metric (a series per host, whatever it is).
    assert found["envsync_host_info"] == [({"host": "ct200", "digest": "0123456789abcdef"}, 1.0)]
    assert {lab["host"]: v for lab, v in found["envsync_host_up"]} == {
        "ct200": 1.0,
        "gpu002": 1.0,
        "gpu003": 0.0,
    }
    gates = {
        lab["severity"]: v for lab, v in found["envsync_server_findings"] if lab["server"] == "a"
    }
    assert gates["fatal"] == 1.0
    assert "# TYPE envsync_findings gauge" in text and text.endswith("\n")


def test_label_values_are_escaped() -> None:
    evil = Report(reference='ref"\\\nx', target='h"1\\\n', findings=(OMEGA,))
    found = families(textfile([evil]))
    (labels, _) = found["envsync_check_ok"][0]
    assert labels["host"] == 'h"1\\\n' and labels["reference"] == 'ref"\\\nx'


def test_fail_on_decides_check_ok() -> None:
    benign_only = Report(reference="r", target="h", findings=(OMEGA,))
    assert families(textfile([benign_only]))["envsync_check_ok"][0][1] == 1.0
    assert families(textfile([benign_only], fail_on="benign"))["envsync_check_ok"][0][1] == 0.0


def test_a_check_textfile_says_when_it_was_written_only_when_told() -> None:
    assert "envsync_last_run_timestamp_seconds" not in textfile([REPORT])
    found = families(textfile([REPORT], now=1796126003.25))
    assert found["envsync_last_run_timestamp_seconds"] == [({}, 1796126003.25)]


def test_watchs_textfile_is_written_by_the_same_format() -> None:
    from envsync.report.watch import HostStatus, WatchRun
    from envsync.report.watch import textfile as watch_textfile

    run = WatchRun(
        at="2026-12-01T10:00:00Z",
        events=(),
        statuses=(
            HostStatus(host='h"1\\\n', up=True, against="h@good", counts={"fatal": 2}),
            HostStatus(host="down", up=False, last_good=1796126003.5),
        ),
    )
    found = families(watch_textfile(run))
    assert {lab["host"]: v for lab, v in found["envsync_host_up"]} == {'h"1\\\n': 1.0, "down": 0.0}
    fatal = [v for lab, v in found["envsync_findings"] if lab["severity"] == "fatal"]
    assert fatal == [2.0]
    assert found["envsync_last_good_timestamp_seconds"] == [({"host": "down"}, 1796126003.5)]
    ((labels, ended),) = found["envsync_last_run_timestamp_seconds"]
    assert labels == {} and ended > 1796126003.5 - 10**9
