"""`envsync diff` and `envsync check` end to end, and their bad input."""

from __future__ import annotations

import json
import re
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest

from envsync.cli import main
from tests.helpers import REPO
from tests.helpers import run_cli as run

DATA = Path(__file__).resolve().parent.parent / "data"
SNAPSHOT = DATA / "snapshots" / "ct129.json"


def drifted(tmp_path: Path) -> Path:
    data = json.loads(SNAPSHOT.read_text())
    data["host"] = "ct200"
    for dist in data["distributions"]:
        if dist["name"] == "xgrammar":
            dist["version"] = "0.1.10"
    data["distributions"] = [d for d in data["distributions"] if d["name"] != "soundfile"]
    path = tmp_path / "ct200.json"
    path.write_text(json.dumps(data))
    return path


def test_diff_of_snapshot_files_without_graph(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out, err = run(capsys, "diff", str(SNAPSHOT), str(drifted(tmp_path)), "--format", "json")
    assert code == 1
    data = json.loads(out)
    got = {f["subject"]: (f["kind"], f["severity"], f["decided_by"]) for f in data["findings"]}
    # without an import graph, only metadata speaks: sglang requires both packages
    assert got == {
        "soundfile": ("missing", "risky", "requirements"),
        "xgrammar": ("version", "risky", "requirements"),
    }
    assert any("no service entrypoint" in n for n in data["notes"])
    assert "ct200 against ct129: 2 risky" in err


def test_identical_sides_are_clean(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "diff", str(SNAPSHOT), str(SNAPSHOT))
    assert code == 0
    assert "no drift" in out


def test_diff_markdown_and_junit_to_files(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    md = tmp_path / "drift.md"
    code, out, _ = run(
        capsys, "diff", str(SNAPSHOT), str(drifted(tmp_path)), "--format", "markdown", "-o", str(md)
    )
    assert (code, out) == (1, "")
    assert md.read_text().startswith("## envsync: ct200 against ct129")
    xml = tmp_path / "drift.xml"
    # the JUnit report fails what check fails: fatal by default, so two risky findings pass
    run(capsys, "diff", str(SNAPSHOT), str(drifted(tmp_path)), "--format", "junit", "-o", str(xml))
    root = ET.parse(xml).getroot()
    assert (root.get("tests"), root.get("failures")) == ("2", "0")


def test_requirements_file_as_reference(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    req = tmp_path / "requirements.txt"
    req.write_text("xgrammar==0.1.32\nsglang==0.5.11\n")
    code, out, _ = run(capsys, "diff", str(req), str(drifted(tmp_path)), "--format", "json")
    assert code == 1
    findings = json.loads(out)["findings"]
    # a partial reference: only its own packages are compared (no soundfile, no host facts)
    assert [(f["subject"], f["kind"]) for f in findings] == [("xgrammar", "version")]


@pytest.mark.parametrize(
    ("setup", "argv", "message"),
    [
        (None, ["diff"], "diff: name REF and TGT, or set defaults.reference and defaults.target"),
        (None, ["diff", "ct129", "ct200"], "unknown host 'ct129'"),
        ("c.lock", ["diff", "{d}/c.lock", str(SNAPSHOT)], "c.lock: corrupt lock file"),
        ("n.lock", ["diff", "{d}/n.lock", str(SNAPSHOT)], "lock-version 9.0 is not supported"),
        ("s.json", ["diff", "{d}/s.json", str(SNAPSHOT)], "schema_version 7 is not supported"),
        (None, ["diff", str(SNAPSHOT), str(SNAPSHOT), "-o", "{d}/none/x.md"], "x.md: cannot write"),
        (
            "rules-missing",
            ["--inventory", "{d}/inv.toml", "diff"],
            "nope.toml: rule pack not found",
        ),
        (
            "rules-bad",
            ["--inventory", "{d}/inv.toml", "diff"],
            "bad.toml: .*flags\\[0\\].default 'x' is not one of its values",
        ),
        (
            None,
            ["check", "--lock", "{d}/missing.lock", "local"],
            "missing.lock: lock file not found",
        ),
        (
            None,
            ["check", "--lock", str(REPO / "lockfiles" / "ct129.lock")],
            "check: name the HOSTs",
        ),
        ("c.lock", ["check", "--lock", "{d}/c.lock", "local"], "c.lock: corrupt lock file"),
    ],
)
def test_bad_input(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    setup: str | None,
    argv: list[str],
    message: str,
) -> None:
    import re

    monkeypatch.chdir(tmp_path)
    files = {
        "c.lock": 'lock-version = "1.0"\n[[packages]\n',
        "n.lock": 'lock-version = "9.0"\n',
        "s.json": '{"schema_version": 7}',
    }
    if setup in files:
        (tmp_path / setup).write_text(files[setup])
    elif setup == "rules-missing":
        (tmp_path / "inv.toml").write_text(
            f'[defaults]\nreference = "a"\ntarget = "a"\nrules = ["nope.toml"]\n[hosts.a]\npython = "{SNAPSHOT}"\n'
        )
    elif setup == "rules-bad":
        (tmp_path / "bad.toml").write_text(
            '[pack]\nname = "b"\n[[flags]]\nflag = "--x"\ndefault = "x"\n'
        )
        (tmp_path / "inv.toml").write_text(
            '[defaults]\nreference = "a"\ntarget = "a"\nrules = ["bad.toml"]\n[hosts.a]\npython = "python3"\n'
        )
    code, out, err = run(capsys, *(a.replace("{d}", str(tmp_path)) for a in argv))
    assert (code, out) == (2, ""), err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("envsync: ")
    assert re.search(message, lines[0]), lines[0]


@pytest.mark.slow
def test_check_gates_on_the_lock(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, example_hosts: Path
) -> None:
    inv = tmp_path / "envsync.toml"
    inv.write_text(
        (REPO / "examples" / "envsync.toml").read_text().replace('".hosts/', f'"{example_hosts}/')
    )
    lock = tmp_path / "env.lock"
    assert main(["--inventory", str(inv), "-q", "lock", "ct129", "-o", str(lock)]) == 0
    junit, md = tmp_path / "check.xml", tmp_path / "check.md"
    code, out, err = run(
        capsys,
        "--inventory",
        str(inv),
        "check",
        "--lock",
        str(lock),
        "ct200",
        "ct129",
        "--junit",
        str(junit),
        "--markdown",
        str(md),
    )
    assert code == 1
    assert "ct200 against ct129: 2 fatal, 2 risky, 1 benign" in err
    assert "ct129 against ct129: no drift" in err
    said = rf"check: compared \S+ with {re.escape(str(lock))} \(ct129\); 2 finding\(s\) at or "
    assert re.search(said + "above fatal: failing", err), err
    suites = ET.parse(junit).getroot()
    assert suites.get("failures") == "2"  # the JUnit report fails what --fail-on fails
    assert "## envsync: ct129 against ct129" in md.read_text()
    # the reference itself passes; ct200 passes only a gate that tolerates everything
    assert run(capsys, "--inventory", str(inv), "check", "--lock", str(lock), "ct129")[0] == 0
    code, _, _ = run(
        capsys,
        "--inventory",
        str(inv),
        "check",
        "--lock",
        str(lock),
        "ct200",
        "--fail-on",
        "fatal",
        "--format",
        "json",
    )
    assert code == 1
    # one host that cannot be collected fails the gate with exit 3; the others still report
    broken = tmp_path / "broken.toml"
    broken.write_text(inv.read_text() + '\n[hosts.gone]\npython = "/nonexistent/python"\n')
    code, out, err = run(
        capsys,
        "--inventory",
        str(broken),
        "check",
        "--lock",
        str(lock),
        "gone",
        "ct129",
        "--format",
        "json",
    )
    assert code == 3
    assert "gone: python '/nonexistent/python' not found" in err
    assert json.loads(out)["target"] == "ct129"


@pytest.mark.slow
def test_sglang_serve_gets_the_verdicts_of_launch_server(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, example_hosts: Path
) -> None:
    """`sglang serve` (a console script whose main() reaches run_server only through calls
    the subcommand selects, sglang/cli/serve.py:123) is read as `-m sglang.launch_server`."""
    base = (
        (REPO / "examples" / "envsync.toml").read_text().replace('".hosts/', f'"{example_hosts}/')
    )
    base = base.replace('entrypoint = "sglang.launch_server"\n', "")
    model = tmp_path / "model"  # the served model: a folder with its config.json
    model.mkdir()
    (model / "config.json").write_text('{"architectures": ["LlamaForCausalLM"]}')
    reports = {}
    for name, command in (
        (
            "module",
            '["{python}", "-m", "sglang.launch_server", "--model-path", "M", "--port", "P"]',
        ),
        ("console", '["sglang", "serve", "--model-path", "M", "--port", "P"]'),
    ):
        command = command.replace('"M"', f'"{model}"').replace('"P"', '"{port}"')
        inv = tmp_path / f"{name}.toml"
        start = base.index("command = [")
        end = base.index("]", base.index('"DFLASH"')) + 1
        inv.write_text(base[:start] + f"command = {command}" + base[end:])
        code, out, err = run(capsys, "--inventory", str(inv), "-q", "diff", "--format", "json")
        assert code == 1, err
        reports[name] = json.loads(out)
    verdicts = {
        name: {(f["subject"], f["severity"], f["reason"]) for f in r["findings"]}
        for name, r in reports.items()
    }

    # The same verdicts, for the same statements; the way startup reaches a statement is
    # each entry's own (the console script reaches run_server in http_server through
    # main(), -m through launch_server.py:48), so reasons are compared up to it.
    def upto_path(reasons: set[tuple[str, str, str]]) -> set[tuple[str, str, str]]:
        return {(s, v, r.split("; startup reaches it from ")[0]) for s, v, r in reasons}

    assert upto_path(verdicts["console"]) == upto_path(verdicts["module"])
    (console,) = [r for s, _, r in verdicts["console"] if s == "soundfile"]
    (module,) = [r for s, _, r in verdicts["module"] if s == "soundfile"]
    assert "startup reaches it from sglang/launch_server.py:48: sglang.launch_server ->" in module
    assert "startup reaches it from sglang/srt/entrypoints/http_server.py:105" in console
    assert ("xgrammar", "fatal") in {(s, v) for s, v, _ in verdicts["console"]}
    assert reports["console"]["entrypoint"] == "sglang serve, which runs sglang.launch_server"
    assert reports["console"]["notes"] == []


def test_diff_of_several_targets_is_one_matrix(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    ct200 = drifted(tmp_path)
    same = tmp_path / "same" / "ct201.json"
    same.parent.mkdir()
    same.write_text(SNAPSHOT.read_text())
    code, out, err = run(capsys, "diff", str(SNAPSHOT), str(ct200), str(same), "--format", "json")
    assert code == 1
    data = json.loads(out)
    assert data["schema_version"] == 2 and data["hosts"] == 2
    # each snapshot's host, a class each (their environments differ), drifted one first
    assert [(c["hosts"], c["count"]) for c in data["classes"]] == [("ct200", 1), ("ct129", 1)]
    assert len(data["classes"][0]["digest"]) == 16
    assert sorted(f["subject"] for f in data["classes"][0]["findings"]) == [
        "soundfile",
        "xgrammar",
    ]
    assert data["classes"][1]["headline"] == "as the reference"
    assert "ct200 against ct129: 2 risky" in err
    page = tmp_path / "fleet.html"
    code, out, _ = run(
        capsys, "diff", str(SNAPSHOT), str(ct200), str(same), "--format", "html", "-o", str(page)
    )
    assert (code, out) == (1, "")
    assert page.read_text().startswith("<!DOCTYPE html>")
    # Every name is checked before anything is collected.
    code, _, err = run(capsys, "diff", str(SNAPSHOT), str(ct200), str(tmp_path / "nope.json"))
    assert code == 2 and "nope.json: snapshot file not found" in err


def test_a_host_that_fails_does_not_hide_the_others(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    inventory = tmp_path / "envsync.toml"
    inventory.write_text(f'[hosts.gone]\npython = "{tmp_path}/no/bin/python"\n')
    code, out, err = run(
        capsys,
        "--inventory",
        str(inventory),
        "diff",
        str(SNAPSHOT),
        "gone",
        str(drifted(tmp_path)),
        "--format",
        "json",
    )
    assert code == 3
    assert "gone" in err
    assert [c["members"] for c in json.loads(out)["classes"]] == [["ct200"]]
