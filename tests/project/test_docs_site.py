"""The built docs site in a real headless Chromium, opened from a folder (file://) as a
user who built it would (issue 34): its search finds a command, it loads nothing from the
network, and a table of envsync's piped width fits the content column whole."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from envsync.report import DEFAULT_WIDTH, render
from tests.helpers import REPO
from tests.report.test_html_browser import chromium
from tests.report.test_table_width import WIDE_REPORT

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
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


def dom(tmp_path: Path, url: str, *, width: int = 1280) -> str:
    """The page's DOM once its scripts ran (the search worker included)."""
    proc = subprocess.run(
        [
            chromium(),
            "--headless",
            "--no-sandbox",  # CI runs as root
            "--disable-gpu",
            "--disable-background-networking",
            f"--user-data-dir={tmp_path / 'profile'}",
            f"--window-size={width},900",
            "--virtual-time-budget=15000",
            "--dump-dom",
            url,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    return proc.stdout


@pytest.mark.parametrize(
    ("query", "anchor"), [("rollback", "envsync-rollback"), ("watch", "envsync-watch")]
)
def test_search_finds_a_command_from_a_folder(
    site: Path, tmp_path: Path, query: str, anchor: str
) -> None:
    # Material opens the search with ?q= as if typed into its box.
    page = dom(tmp_path, (site / "index.html").as_uri() + f"?q={query}")
    assert 'data-md-component="search-query"' in page  # the search box is there
    found = re.findall(r'<a href="([^"]+)" class="md-search-result__link"', page)
    assert any(f"reference/cli.html?h={query}#{anchor}" in link for link in found), found[:10]
    assert re.search(r'md-search-result__meta">\d+ matching documents?<', page)


def test_the_site_loads_nothing_from_the_network(site: Path) -> None:
    for page in site.rglob("*.html"):
        text = page.read_text()
        assert not re.search(r'<script[^>]+src="(https?:)?//', text), page
    assert (site / "search" / "search_index.js").is_file()  # the index, inlined for file://


def test_a_table_of_the_piped_width_fits_the_content_column(site: Path, tmp_path: Path) -> None:
    """A report at the width piped output has (what the docs show) in a block of program
    output on a real page, measured by the browser at 1280 and 1920 pixels."""
    table = render("table", [WIDE_REPORT], width=DEFAULT_WIDTH)
    assert max(len(line) for line in table.splitlines()) == DEFAULT_WIDTH
    source = site / "how-to" / "containers.html"
    text = source.read_text()
    assert 'class="envsync-output highlight"' in text  # docsgen's block of program output
    probe = (
        "<script>addEventListener('load', () => {"
        "const code = document.querySelector('.envsync-output pre > code');"
        f"code.textContent = {json.dumps(table)};"
        "document.body.setAttribute('data-fits', "
        "code.scrollWidth + '/' + code.clientWidth);});</script></body>"
    )
    page = source.with_name("probe.html")
    page.write_text(text.replace("</body>", probe, 1))
    for width in (1280, 1920):
        fits = re.search(r'data-fits="(\d+)/(\d+)"', dom(tmp_path, page.as_uri(), width=width))
        assert fits, "the probe did not run"
        needed, shown = map(int, fits.groups())
        assert needed <= shown, f"at {width} px the table needs {needed} px, the column has {shown}"
