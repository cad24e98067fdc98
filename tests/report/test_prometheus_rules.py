"""One Prometheus vocabulary (issue 34, point 6): the textfiles of `check --format
prometheus` and `watch --prometheus`, written by the real commands for one real host, read
by one parser, have the same metric names and labels (and the same digest); the example
alert rules of the docs load (with promtool when it is at hand) and use only metrics and
labels that both files carry."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from envsync.report.prometheus import CHANGES, LAST_GOOD, METRICS, SERVER_FINDINGS
from tests.helpers import REPO
from tests.helpers import run_cli as run
from tests.report.test_watch import watched  # noqa: F401  (the fixture: a real venv as host `h`)

RULES = REPO / "docs" / "examples" / "envsync-alerts.yml"
VOCABULARY = {m.name: set(m.labels) for m in METRICS}
# What only one of the commands knows: watch a host's past, check a server's gate.
ONLY_WATCH = {CHANGES.name, LAST_GOOD.name}
ONLY_CHECK = {SERVER_FINDINGS.name}


def read(path: Path) -> dict[str, list[tuple[dict[str, str], float]]]:
    """A textfile through prometheus_client's parser: each family's samples."""
    return {
        family.name: [(dict(s.labels), s.value) for s in family.samples]
        for family in text_string_to_metric_families(path.read_text())
    }


def labels_of(found: dict[str, list[tuple[dict[str, str], float]]]) -> dict[str, set[str]]:
    return {name: {k for labels, _ in samples for k in labels} for name, samples in found.items()}


@pytest.fixture
def textfiles(
    capsys: pytest.CaptureFixture[str],
    watched: dict[str, Path],  # noqa: F811
    tmp_path: Path,
) -> dict[str, Path]:
    """`check` and `watch --once` of the same host against the same lock, each writing
    its textfile the way the docs say."""
    base = ["--inventory", str(watched["inv"]), "-q"]
    states = ["--state-dir", str(watched["states"])]
    lock = tmp_path / "h.lock"
    assert run(capsys, *base, "lock", "h", *states, "-o", str(lock))[0] == 0
    check, watch = tmp_path / "check.prom", tmp_path / "watch.prom"
    code, _, err = run(
        capsys, *base, "check", "--lock", str(lock), "h", *states,
        "--format", "prometheus", "-o", str(check),
    )  # fmt: skip
    assert code == 0, err
    code, _, err = run(
        capsys, *base, "watch", "--once", "--lock", str(lock), "h", *states,
        "--prometheus", str(watch),
    )  # fmt: skip
    assert code == 0, err
    return {"check": check, "watch": watch}


def test_both_commands_write_one_vocabulary(textfiles: dict[str, Path]) -> None:
    check, watch = read(textfiles["check"]), read(textfiles["watch"])
    assert set(check) - ONLY_CHECK == set(watch) - ONLY_WATCH
    shared = set(check) & set(watch)
    assert {"envsync_findings", "envsync_host_up", "envsync_check_ok"} <= shared
    for name in shared:
        assert labels_of(check)[name] == labels_of(watch)[name], name
    # Every name and label is the vocabulary's: never one name with other labels.
    for found in (check, watch):
        for name, labels in labels_of(found).items():
            assert labels == VOCABULARY[name], name
    # The same host, the same values where both say the same thing.
    for name in ("envsync_findings", "envsync_check_ok", "envsync_host_up", "envsync_host_info"):
        assert sorted(map(str, check[name])) == sorted(map(str, watch[name])), name
    ((info, _),) = check["envsync_host_info"]
    assert info["host"] == "h" and len(info["digest"]) == 16


def _exprs(rules: dict[str, object]) -> list[dict[str, object]]:
    groups = rules["groups"]
    assert isinstance(groups, list) and groups
    return [rule for group in groups for rule in group["rules"]]


def test_the_example_alert_rules_load_and_use_what_both_files_carry(
    textfiles: dict[str, Path],
) -> None:
    promtool = shutil.which("promtool")
    if promtool:
        proc = subprocess.run(
            [promtool, "check", "rules", str(RULES)], capture_output=True, text=True, check=False
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr
    rules = _exprs(yaml.safe_load(RULES.read_text()))
    fatal = next(r for r in rules if r["alert"] == "EnvsyncFatalDrift")
    assert fatal["for"] == "10m" and 'severity="fatal"' in str(fatal["expr"])
    files = [read(textfiles["check"]), read(textfiles["watch"])]
    for rule in rules:
        assert {"alert", "expr", "for", "annotations"} <= set(rule), rule
        expr = str(rule["expr"])
        names = re.findall(r"\benvsync_\w+", expr)
        assert names, expr
        for name in names:
            for found in files:
                assert name in found, f"{rule['alert']}: {name} is not in both textfiles"
            matchers = re.findall(rf"{name}\{{([^}}]*)\}}", expr)
            used = {m.split("=")[0].strip() for ms in matchers for m in ms.split(",") if m}
            said = set(re.findall(r"\$labels\.(\w+)", str(rule["annotations"])))
            assert used | said <= VOCABULARY[name], f"{rule['alert']}: {used | said}"
        # The series the fatal alert watches exists in both files (here 0: no drift).
    for found in files:
        fatal_series = [
            v for labels, v in found["envsync_findings"] if labels["severity"] == "fatal"
        ]
        assert fatal_series == [0.0]


def test_the_docs_show_the_rules_and_the_one_vocabulary() -> None:
    page = (REPO / "docs" / "how-to" / "prometheus.md").read_text()
    assert "<!-- envsync:file docs/examples/envsync-alerts.yml" in page
    assert "give node_exporter only one" not in page and "not both" not in page
