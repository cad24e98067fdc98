"""The table fits the width it is given: the terminal's (COLUMNS, the tty), or a stable
default when piped; no line wider, and every fix whole (issue 34, point 2)."""

from __future__ import annotations

import dataclasses
import io
import json
import re
from pathlib import Path

import pytest

from envsync.cli.output import report_width
from envsync.model.findings import Finding, PinFix
from envsync.report import DEFAULT_WIDTH, render
from envsync.report.table import WIDE
from tests.helpers import run_cli
from tests.report.test_formats import REPORT

WIDTHS = (80, 100, 200)
SNAPSHOT = Path(__file__).resolve().parent.parent / "data" / "snapshots" / "ct129.json"

# A finding with a word longer than any column (a path), and a long fix.
LONG = Finding(
    subject="sglang/srt/layers/attention/flashinfer_backend_with_a_very_long_name.py",
    kind="file",
    reference="a" * 64,
    target="b" * 64,
    severity="fatal",
    reason="/opt/venv/lib/python3.11/site-packages/sglang/srt/layers/attention/"
    "flashinfer_backend_with_a_very_long_name.py differs and startup imports it.",
    decided_by="import-graph",
    fixes=(
        PinFix(
            summary="pin flashinfer-python==0.2.14.post1 with the constraints of every other "
            "package kept at its version (pip install --no-deps)",
            requirement="flashinfer-python==0.2.14.post1",
            dist="flashinfer-python",
        ),
    ),
)
WIDE_REPORT = dataclasses.replace(REPORT, findings=(*REPORT.findings, LONG))


def _squeezed(text: str) -> str:
    """The text without the table's frame and without whitespace: what a reader reads,
    whichever way it was wrapped."""
    return re.sub(r"[\s│┃]", "", text)


def assert_fits(text: str, width: int, fixes: list[str]) -> None:
    lines = text.splitlines()
    too_wide = [line for line in lines if len(line) > width]
    assert not too_wide, f"{len(too_wide)} line(s) wider than {width}: {too_wide[0]!r}"
    assert not [line for line in lines if line != line.rstrip()], "trailing blanks"
    # Each fix, in the column (or block) of the reason: read down that column.
    column = "\n".join(line.rsplit("│", 2)[1] if line.count("│") > 2 else line for line in lines)
    for fix in fixes:
        assert _squeezed(fix) in _squeezed(column), f"fix cut at {width}: {fix!r}"


@pytest.mark.parametrize("width", [*WIDTHS, 120, 119, 99, 60])
def test_the_table_fits_every_width(width: int) -> None:
    text = render("table", [WIDE_REPORT], width=width)
    fixes = [f"→ {x.kind}: {x.summary}" for f in WIDE_REPORT.findings for x in f.fixes]
    assert_fits(text, width, fixes)
    for note in WIDE_REPORT.notes:
        assert _squeezed(f"note: {note}") in _squeezed(text)


def test_the_reason_keeps_its_room_and_the_layout_changes_below_a_width() -> None:
    wide = render("table", [WIDE_REPORT], width=WIDE)
    header = next(line for line in wide.splitlines() if "why, and the fix" in line)
    # The last column is the widest: the subject and values gave way first.
    cells = header.split("┃")[1:-1]
    assert len(cells[-1]) == max(len(c) for c in cells) and len(cells[-1]) >= 60
    for width in (80, WIDE - 1):
        narrow = render("table", [WIDE_REPORT], width=width)
        assert "┃" not in narrow  # one block per finding, a blank line before each
        assert "\n\nfatal version xgrammar: 0.1.32 → 0.1.10\n" in narrow
        assert "\n  → pin: pin xgrammar==0.1.32 (pip install --no-deps)\n" in narrow
    # A fix's own lines hang under its arrow.
    narrow = render("table", [WIDE_REPORT], width=80)
    fix = narrow[narrow.index("  → pin: pin flashinfer") :].splitlines()
    assert fix[1].startswith("    ") and not fix[1][4].isspace()


def test_a_note_wraps_with_a_hanging_indent_never_mid_word() -> None:
    text = render("table", [REPORT], width=WIDE)
    note = text[text.index("note: ") :].splitlines()
    assert len(note) == 2 and note[1].startswith("      ") and not note[1][6].isspace()
    words = REPORT.notes[0].split()
    assert " ".join(" ".join(note).split()) == "note: " + " ".join(words)


@pytest.mark.parametrize("width", [80, WIDE])
def test_colour_adds_no_width(width: int) -> None:
    text = render("table", [WIDE_REPORT], width=width, color=True)
    plain = re.sub(r"\x1b\[[0-9;]*m", "", text)
    assert "\x1b[" in text and max(len(line) for line in plain.splitlines()) <= width


@pytest.mark.parametrize(
    ("environ", "width"),
    [
        ({"COLUMNS": "80"}, 80),
        ({"COLUMNS": "200"}, 200),
        ({"COLUMNS": "wide"}, DEFAULT_WIDTH),
        ({}, DEFAULT_WIDTH),
    ],
)
def test_the_width_is_columns_else_a_stable_default(environ: dict[str, str], width: int) -> None:
    assert report_width(io.StringIO(), environ) == width


def test_a_terminals_own_width_when_columns_is_unset() -> None:
    import os
    import pty

    leader, follower = pty.openpty()
    try:
        import fcntl
        import struct
        import termios

        fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 93, 0, 0))
        with os.fdopen(follower, "w", closefd=False) as stream:
            assert report_width(stream, {}) == 93
            assert report_width(stream, {"COLUMNS": "81"}) == 81
    finally:
        os.close(leader)
        os.close(follower)


def _drifted(tmp_path: Path) -> Path:
    data = json.loads(SNAPSHOT.read_text())
    data["host"] = "ct200"
    for dist in data["distributions"]:
        if dist["name"] == "xgrammar":
            dist["version"] = "0.1.10"
    data["distributions"] = [d for d in data["distributions"] if d["name"] != "soundfile"]
    path = tmp_path / "ct200.json"
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize("width", WIDTHS)
def test_diff_renders_at_the_terminals_width(
    width: int,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    target = _drifted(tmp_path)
    code, out, _ = run_cli(capsys, "-q", "diff", str(SNAPSHOT), str(target), "--format", "json")
    fixes = [
        f"→ {x['kind']}: {x['summary']}" for f in json.loads(out)["findings"] for x in f["fixes"]
    ]
    assert code == 1 and fixes
    monkeypatch.setenv("COLUMNS", str(width))
    code, out, _ = run_cli(capsys, "-q", "diff", str(SNAPSHOT), str(target))
    assert code == 1
    assert_fits(out, width, fixes)


def test_piped_diff_has_the_stable_default_width(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    target = str(_drifted(tmp_path))
    monkeypatch.delenv("COLUMNS", raising=False)
    _, piped, _ = run_cli(capsys, "-q", "diff", str(SNAPSHOT), target)
    for width, same in ((DEFAULT_WIDTH, True), (200, False), (80, False)):
        monkeypatch.setenv("COLUMNS", str(width))
        _, out, _ = run_cli(capsys, "-q", "diff", str(SNAPSHOT), target)
        assert (out == piped) is same, width


@pytest.mark.slow
@pytest.mark.parametrize("width", WIDTHS)
def test_the_examples_diff_fits(
    width: int,
    example_hosts: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The example's real ct129/ct200 diff: the long reasons and fixes of real findings."""
    from tests.helpers import REPO

    inventory = tmp_path / "envsync.toml"
    text = (REPO / "examples" / "envsync.toml").read_text()
    inventory.write_text(text.replace('".hosts/', f'"{example_hosts}/'))
    base = ["--inventory", str(inventory), "-q", "diff", "ct129", "ct200"]
    _, out, _ = run_cli(capsys, *base, "--format", "json")
    fixes = [
        f"→ {x['kind']}: {x['summary']}" for f in json.loads(out)["findings"] for x in f["fixes"]
    ]
    monkeypatch.setenv("COLUMNS", str(width))
    code, out, _ = run_cli(capsys, *base)
    assert code == 1
    assert_fits(out, width, fixes)
