"""Drift over time on the built-in example with its real runtime: ct129 deploys ready (its
last good state is recorded), someone installs an old xgrammar by hand with real pip;
`diff ct129@good ct129` names exactly that change with its install time, the next deploy
crashes and is traced against ct129@good (the inventory's reference is ct129 itself, and
then there is none), `repair ct129@good ct129 --apply` brings the recorded state back and
the deploy after it is ready; `history` lists the states."""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path

import pytest

from envsync.cli import main
from tests.helpers import REPO, build_example, site_packages
from tests.helpers import run_cli as run
from tests.sshd import free_port

pytestmark = pytest.mark.slow
HOWTO = REPO / "docs" / "how-to" / "history.md"
# What differs from run to run in a documented line: elided text, times, durations.
_VARIES = re.compile(r"(…|\d+\.\d+s|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)")


def documented(section: str) -> list[str]:
    """The lines of the first `text` block under a heading of the how-to page."""
    after = HOWTO.read_text().split(f"## {section}\n", 1)[1]
    return after.split("```text\n", 1)[1].split("```", 1)[0].splitlines()


def pattern(line: str) -> str:
    out = ""
    for i, piece in enumerate(_VARIES.split(line)):
        if i % 2 == 0:
            out += re.escape(piece)
        else:
            out += ".*" if piece == "…" else r"[0-9.]+s" if piece.endswith("s") else r"\S+Z"
    return "^" + out


@pytest.fixture(scope="module")
def example(tmp_path_factory: pytest.TempPathFactory, wheel_cache: Path) -> Path:
    dest = tmp_path_factory.mktemp("drift")
    build_example(dest, wheel_cache, runtime=REPO / "examples" / ".hosts" / "runtime")
    text = (REPO / "examples" / "envsync.toml").read_text().replace('".hosts/', f'"{dest}/')
    text = text.replace(
        '"{inventory_dir}/demo_server.py"', f'"{REPO / "examples" / "demo_server.py"}"'
    )
    text = text.replace("port = 30001", f"port = {free_port()}")
    text = text.replace("port = 30002", f"port = {free_port()}")
    # The pin comes from the real wheels, as it would from the host's index.
    text = text.replace(
        f'python = "{dest}/ct129/bin/python"\n',
        f'python = "{dest}/ct129/bin/python"\n'
        f'pip_options = ["--no-index", "--find-links", "{wheel_cache}"]\n',
    )
    inv = dest / "envsync.toml"
    inv.write_text(text)
    # the same hosts with no reference at all
    (dest / "noref.toml").write_text(text.replace('reference = "ct129"\n', ""))
    return inv


def test_a_host_against_its_own_last_good_state(
    capsys: pytest.CaptureFixture[str], example: Path, wheel_cache: Path, tmp_path: Path
) -> None:
    inv, noref = str(example), str(example.parent / "noref.toml")
    states = tmp_path / "states"
    s = ("--state-dir", str(states))
    python = example.parent / "ct129" / "bin" / "python"
    try:
        code, out, err = run(
            capsys, "--inventory", inv, "-q", "deploy", "ct129", "--deadline", "120", *s
        )
        assert code == 0 and "ct129: ready in " in out, out + err
        (good,) = states.glob("ct129~*/*-ready-*.json")
        state = json.loads(good.read_text())
        # recorded after the collection: the two times can fall in different seconds
        recorded, collected = state["at"], state["snapshot"]["collected_at"]
        code, out, _ = run(capsys, "--inventory", inv, "diff", "ct129@good", "ct129", *s)
        assert code == 0 and "no drift" in out

        # by hand, on the host: an old xgrammar, with real pip
        subprocess.run(
            [str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-index",
             "--find-links", str(wheel_cache), "xgrammar==0.1.10"],
            check=True,
            capture_output=True,
        )  # fmt: skip
        record = site_packages(python) / "xgrammar-0.1.10.dist-info" / "RECORD"
        installed = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(record.stat().st_mtime))
        code, out, err = run(
            capsys, "--inventory", inv, "diff", "ct129@good", "ct129", "--format", "json", *s
        )
        assert code == 1, err
        report = json.loads(out)
        assert report["reference"] == "ct129@good" and report["target"] == "ct129"
        assert [
            (f["kind"], f["subject"], f["reference"], f["target"], f["severity"])
            for f in report["findings"]
        ] == [("version", "xgrammar", "0.1.32", "0.1.10", "fatal")]
        assert (
            f"since ct129@good (collected {collected}): xgrammar 0.1.32 → 0.1.10 (installed {installed} by pip)"
            in report["notes"]
        )
        # the table says it too
        code, out, _ = run(capsys, "--inventory", inv, "diff", "ct129@good", "ct129", *s)
        assert code == 1 and f"(installed {installed} by" in " ".join(out.split())
        # check gates on the recorded state as on a lock
        code, out, _ = run(
            capsys, "--inventory", inv, "-q", "check", "--lock", "ct129@good", "ct129", *s
        )
        assert code == 1 and "xgrammar" in out

        # the next deploy crashes: the inventory's reference is ct129 itself, and then none
        for inventory in (inv, noref):
            code, out, err = run(
                capsys, "--inventory", inventory, "-q", "deploy", "ct129", "--deadline", "120", *s
            )
            assert code == 5, out + err
            assert "ImportError: cannot import name 'StructuralTag' from 'xgrammar'" in out
            assert f"  traced against ct129@good, recorded {recorded}" in out
            assert "cause (fatal finding of envsync diff ct129@good ct129)" in out
            assert "xgrammar 0.1.10 lacks StructuralTag" in out
            assert "next: envsync repair ct129@good ct129 --prefer fix --apply" in out
            for line in documented("A crash with no reference"):  # the how-to shows a real run
                assert re.search(pattern(line), out, re.MULTILINE), line
        # the states (the folder also holds identity.json): a crash records nothing
        assert len(list(states.glob("ct129~*/[0-9]*.json"))) == 1

        # the repair puts the recorded state back: a pin (files would need a live reference)
        code, out, _ = run(
            capsys, "--inventory", inv, "repair", "ct129@good", "ct129", "--prefer", "fix", *s
        )
        assert code == 1 and "pin xgrammar==0.1.32" in out
        assert "the reference is a state file, not a live host with installed files" in out
        code, out, err = run(
            capsys, "--inventory", inv, "-q", "repair", "ct129@good", "ct129", "--prefer", "fix",
            "--apply", "--deadline", "120", *s,
        )  # fmt: skip
        assert code == 0 and "ct129: ready in " in out, out + err
        code, out, _ = run(capsys, "--inventory", inv, "diff", "ct129@good", "ct129", *s)
        assert code == 0 and "no drift" in out
        code, out, _ = run(
            capsys, "--inventory", inv, "-q", "deploy", "ct129", "--deadline", "120", *s
        )
        assert code == 0 and "ct129: ready in " in out
        # the environment is the recorded one again: no new state
        assert list(states.glob("ct129~*/[0-9]*.json")) == [good]

        # history: what the host holds now (the default, --live), with install times, then
        # its states
        code, out, _ = run(capsys, "--inventory", inv, "history", "ct129", *s)
        assert code == 0
        assert re.search(rf"ct129@latest +{recorded} +ready +good", out)
        code, out, _ = run(
            capsys, "--inventory", inv, "-q", "history", "ct129", "--live", "--format", "json", *s
        )
        data = json.loads(out)
        assert [e["ref"] for e in data["entries"]] == ["ct129", "ct129@latest"]
        assert data["entries"][0]["why"] == "now" and data["entries"][0]["changes"] == []
        xgrammar = next(p for p in data["packages"] if p["name"] == "xgrammar")
        assert xgrammar["version"] == "0.1.32" and xgrammar["installer"] == "pip"
        assert xgrammar["installed_at"] >= installed  # the repair installed it again
    finally:
        main(["--inventory", inv, "-q", "stop", "ct129"])
