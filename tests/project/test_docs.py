"""The docs say what the code does: the built reference against --help, the README against
the parser, ExitCode and a real run, the man page against groff, the install against uv."""

from __future__ import annotations

import html
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from docsgen import invocations, man, tables
from docsgen.cli import commands
from envsync.cli import main
from envsync.cli.parser import build_parser
from envsync.exitcodes import ExitCode
from tests.helpers import REPO

README = (REPO / "README.md").read_text()
ENVSYNC = str(Path(sys.executable).parent / "envsync")


def help_options(command: str) -> set[str]:
    """Every option string `envsync COMMAND --help` shows (as a user runs it)."""
    out = subprocess.run(
        [ENVSYNC, command, "--help"], capture_output=True, text=True, check=True
    ).stdout
    body = out.split("\noptions:", 1)[1]
    return set(re.findall(r"(?:^  |, )(--?[a-zA-Z][\w-]*)", body, re.M))


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site as CI builds it (strict), with the real hook; outputs may be absent here."""
    folder = tmp_path_factory.mktemp("site")
    env = {k: v for k, v in os.environ.items() if k != "ENVSYNC_DOCS_REQUIRE_OUTPUTS"}
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(folder)],
        cwd=REPO,
        env={**env, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return folder


def page_options(site: Path, command: str) -> set[str]:
    """The option strings in the first column of a command's table on the built page."""
    page = (site / "reference" / "cli.html").read_text()
    start = page.index(f'id="envsync-{command}"')
    end = page.find("<h2", start)
    section = page[start : end if end != -1 else len(page)]
    cells = re.findall(r"<tr>\s*<td><code>(.*?)</code></td>", section, re.S)
    return {
        opt
        for cell in cells
        for opt in re.findall(r"(?:^|, )(--?[a-zA-Z][\w-]*)", html.unescape(cell))
    }


@pytest.mark.parametrize("command", [c.name for c in commands(build_parser())])
def test_the_reference_page_has_every_option_of_help(site: Path, command: str) -> None:
    shown = help_options(command) - {"-h", "--help"}
    globals_ = {"--inventory", "-q", "--quiet"}  # on the page once, under Global options
    assert page_options(site, command) == shown - globals_


def test_the_site_has_the_man_page_and_the_completion_scripts(site: Path) -> None:
    roff = (site / "envsync.1").read_text()
    assert all(f"envsync {c.name}" in roff for c in commands(build_parser()))
    assert (site / "completion" / "envsync.bash").read_text().strip()
    assert "#compdef envsync" in (site / "completion" / "_envsync").read_text()


def test_the_man_page_renders_without_a_groff_warning(tmp_path: Path) -> None:
    roff = man.manpage()
    assert man.check(roff) == []
    page = tmp_path / "envsync.1"
    page.write_text(roff)
    shown = subprocess.run(
        ["man", "-l", str(page)],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "MANWIDTH": "100", "MANPAGER": "cat"},
    )
    assert "EXIT STATUS" in shown.stdout and not shown.stderr
    # a help text that wraps onto a leading dot is escaped, not read as a macro
    assert man.check(man._guard(".toml) or pinned requirements\n")) == []


def test_the_readme_is_a_front_door() -> None:
    lines = README.splitlines()
    assert len(lines) <= 200
    first_screen = "\n".join(lines[:50])
    for needed in (
        "bash examples/quickstart.sh",
        ".venv/bin/python -m pytest -q",
        "uv tool install dist/envsync-*.whl",
    ):
        assert needed in first_screen
    # the quick start's two commands are exactly what CI runs
    ci = (REPO / ".ci" / "run").read_text()
    assert "bash examples/quickstart.sh\n" in ci and ".venv/bin/python -m pytest -q\n" in ci


def test_the_readme_performance_section_is_generated_from_the_benchmark() -> None:
    """The README's figures are benchmarks/all.py's last run (docs/generated/
    performance.json), never edited by hand: a stale or edited section fails here."""
    from docsgen.figures import README_BEGIN, readme_performance, readme_with_performance

    assert readme_with_performance(README, REPO) == README, (
        "the README's performance section is not the benchmark's: run "
        "`.venv/bin/python -m benchmarks.all --runs 5`"
    )
    section = README.split(README_BEGIN + "\n", 1)[1]
    assert section.startswith(readme_performance(REPO))
    assert "diff warm / pip check" in section and "target" in section


def _table(heading: str) -> list[list[str]]:
    section = README.split(f"## {heading}\n", 1)[1].split("\n## ", 1)[0]
    rows = [ln for ln in section.splitlines() if ln.startswith("| ") and "---" not in ln]
    return [[c.strip() for c in row.strip("|").split(" | ")] for row in rows[1:]]


def test_the_readme_command_table_is_the_parser() -> None:
    named = [re.match(r"`envsync (\w+)", row[0]).group(1) for row in _table("Commands")]  # type: ignore[union-attr]  # every row of the README's table starts with `envsync NAME` (a row that does not fails the test)
    assert named == [c.name for c in commands(build_parser())]


def test_the_readme_exit_codes_are_exitcode() -> None:
    assert [int(row[0]) for row in _table("Exit codes")] == [c.value for c in ExitCode]


def test_every_envsync_line_in_the_readme_and_contributing_is_real() -> None:
    parser = build_parser()
    folders = ("lockfiles/README.md", "reports/README.md", "examples/README.md")
    for name in ("README.md", "CONTRIBUTING.md", *folders):  # the CHANGELOG may name the past
        assert invocations.problems((REPO / name).read_text(), parser) == [], name


def test_the_invocation_check_catches_what_the_parser_lacks() -> None:
    parser = build_parser()
    text = (
        "Run `envsync diff --no-such-flag ct129`, then:\n\n```sh\n$ envsync lint ct200\n"
        ".venv/bin/envsync check --lock env.lock --fail-on fatal   # fine\n```\n"
    )
    wrong = invocations.problems(text, parser)
    assert len(wrong) == 2
    assert any("--no-such-flag" in w for w in wrong) and any("`envsync lint`" in w for w in wrong)


def test_the_words_must_cover_the_codes_keys() -> None:
    with pytest.raises(tables.DriftError, match=r"not described: NEW.*gone from the code: OLD"):
        tables.covered("X", {"A": "a", "OLD": "o"}, ["A", "NEW"])


@pytest.mark.slow
def test_the_readme_diff_is_a_real_runs_output(
    example_hosts: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    inventory = tmp_path / "envsync.toml"
    text = (REPO / "examples" / "envsync.toml").read_text()
    inventory.write_text(text.replace('".hosts/', f'"{example_hosts}/'))
    assert main(["--inventory", str(inventory), "-q", "diff", "ct129", "ct200"]) == 1
    real = [line.rstrip() for line in capsys.readouterr().out.splitlines()]
    block = README.split("The diff,\nabridged (`…`):\n\n```\n", 1)[1].split("\n```", 1)[0]
    at = 0
    for line in block.splitlines():
        if line == "…":
            continue
        assert line.rstrip() in real[at:], f"not in the real output (in order): {line!r}"
        at = real.index(line.rstrip(), at) + 1


@pytest.mark.slow
def test_the_wheel_installs_as_a_uv_tool_and_completes(tmp_path: Path) -> None:
    """The README's install: a wheel built from the checkout, `uv tool install`."""
    dist = tmp_path / "dist"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(dist), str(REPO)],
        check=True,
        capture_output=True,
    )
    (wheel,) = dist.glob("envsync-*.whl")
    env = {
        **os.environ,
        "UV_TOOL_DIR": str(tmp_path / "tools"),
        "UV_TOOL_BIN_DIR": str(tmp_path / "bin"),
    }
    uv = str(Path(sys.executable).parent / "uv")
    subprocess.run([uv, "tool", "install", str(wheel)], env=env, check=True, capture_output=True)
    tool = str(tmp_path / "bin" / "envsync")
    version = subprocess.run([tool, "--version"], capture_output=True, text=True, check=True)
    assert version.stdout.startswith("envsync ")
    script = subprocess.run([tool, "completion", "bash"], capture_output=True, text=True)
    assert "complete " in script.stdout and script.returncode == 0


def test_the_readme_opening_claim_is_a_measured_figure() -> None:
    """The README's "says it in …" is the benchmarks' median, written from
    docs/generated/performance.json (the test above keeps it current)."""
    from docsgen.figures import diff_claim

    assert "two seconds" not in README
    assert (
        f"`envsync diff ct129 ct200`\n<!-- figure:diff -->{diff_claim(REPO)}<!-- /figure -->"
        in README
    )


TOP_LEVEL = ("pyproject.toml", "envsync/", "lockfiles/", "reports/", "tests/", "examples/")


def test_the_top_level_is_the_designs_and_says_what_each_entry_is_for() -> None:
    tracked = subprocess.run(
        ["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    layout = README.split("## Layout\n", 1)[1].split("\n## ", 1)[0]
    for entry in TOP_LEVEL:
        assert any(p == entry or p.startswith(entry) for p in tracked), f"{entry} is not in git"
        assert f"| `{entry}` |" in layout, f"the README's layout does not say what {entry} is"
    for folder in ("lockfiles", "reports"):
        assert f"{folder}/README.md" in tracked
    contributing = (REPO / "CONTRIBUTING.md").read_text()
    for entry in TOP_LEVEL:
        assert f"`{entry}`" in contributing, f"CONTRIBUTING's map lacks {entry}"


@pytest.mark.parametrize(
    ("path", "ignored"),
    [
        ("reports/README.md", False),
        ("reports/check.md", True),
        ("reports/quickstart/diff.txt", True),
        ("reports/fleet.png", True),
        ("lockfiles/ct129.lock", False),
    ],
)
def test_reports_is_tracked_and_what_lands_there_is_ignored(path: str, ignored: bool) -> None:
    proc = subprocess.run(["git", "check-ignore", "-q", path], cwd=REPO, check=False)
    assert (proc.returncode == 0) is ignored


def test_the_quick_start_figures_come_from_the_recorded_runs(tmp_path: Path) -> None:
    import json

    from docsgen import quickstart

    assert quickstart.sentence(tmp_path).startswith("How long a run takes is not recorded")
    assert quickstart.story_ratio({}) is None
    run = {
        "date": "2026-12-01T22:00:00+00:00",
        "machine": {"cores": 2},
        "fetched": {"runtime_bytes": 2_211_153_220, "wheel_bytes": 130_129_471},
    }
    recorded = {
        "first": {**run, "first": True, "ms": {"story": 200_000, "total": 662_000}},
        "later": {**run, "first": False, "ms": {"story": 50_000, "total": 61_000}},
    }
    (tmp_path / "docs" / "generated").mkdir(parents=True)
    (tmp_path / quickstart.QUICKSTART).write_text(json.dumps(recorded))
    assert quickstart.sentence(tmp_path) == (
        "The first run downloads and installs the example's runtime (2.2 GB installed: torch "
        "for CPUs, transformers, triton, …) and 130 MB of the hosts' wheels, and took 11 min "
        "2 s (the envsync steps 3 min 20 s); a later run took 1 min 1 s (the envsync steps "
        "50 s), on 2 cores on 2026-12-01 (`bash examples/quickstart.sh --record`)"
    )
    assert quickstart.story_ratio(recorded) == 0.25


def test_a_sample_is_linked_when_its_script_made_it_else_a_note(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from docsgen import hooks

    monkeypatch.setattr(hooks, "ROOT", tmp_path)
    note = hooks.sample(["reports/fleet.html", "reports/fleet.png"], "how-to/fleet.md")
    assert note.startswith("!!! note") and "`bash examples/fleet.sh`" in note
    (tmp_path / "reports").mkdir()
    for name in ("fleet.html", "fleet.png"):
        (tmp_path / "reports" / name).write_text("x")
    shown = hooks.sample(["reports/fleet.html", "reports/fleet.png"], "how-to/fleet.md")
    assert shown == "[fleet.html](../samples/fleet.html)\n\n![fleet.png](../samples/fleet.png)\n"
