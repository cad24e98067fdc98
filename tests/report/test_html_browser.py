"""The fleet page in a real headless Chromium: it renders, the fatal cells are there, the
columns sort, and a screenshot comes out."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from envsync.report import render_fleet
from tests.report.test_fleet import REPORTS

pytestmark = pytest.mark.slow


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("chromium must be installed in CI (.ci/run installs it)")
        pytest.skip("chromium is not installed (apt-get install chromium)")
    return found


def headless(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            chromium(),
            "--headless",
            "--no-sandbox",  # CI runs as root
            "--disable-gpu",
            f"--user-data-dir={tmp_path / 'profile'}",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_fleet_page_renders_and_sorts_in_chromium(tmp_path: Path) -> None:
    page = tmp_path / "fleet.html"
    page.write_text(render_fleet("html", REPORTS))
    # As loaded: sorted by the worst severity; every fatal cell is in the DOM.
    dom = headless(tmp_path, "--dump-dom", page.as_uri()).stdout
    assert 'id="fleet"' in dom
    rows = re.findall(r'<tr data-order="(\d+)"', dom)
    assert rows == ["0", "1", "2"]
    assert len(re.findall(r'<td class="fatal" data-host="(ct200|ct202)"', dom)) == 2
    # Sorted by ct201's column (the script ran): its risky row comes first.
    dom = headless(tmp_path, "--dump-dom", page.as_uri() + "#sort=ct201").stdout
    assert 'data-sorted="ct201"' in dom
    assert re.findall(r'<tr data-order="(\d+)"', dom)[0] == "1"
    # The reason and the fixes of a fatal cell open on request.
    dom = headless(tmp_path, "--dump-dom", page.as_uri() + "#open=fatal").stdout
    assert dom.count("<details open") == 2
    shot = tmp_path / "fleet.png"
    headless(
        tmp_path,
        "--hide-scrollbars",
        "--window-size=1400,800",
        f"--screenshot={shot}",
        page.as_uri(),
    )
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000
