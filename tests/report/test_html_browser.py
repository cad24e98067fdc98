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
    # As loaded: a row per class, worst first; every fatal difference is in the DOM.
    dom = headless(tmp_path, "--dump-dom", page.as_uri()).stdout
    assert 'id="fleet"' in dom
    assert re.findall(r'<tr data-order="(\d+)"', dom) == ["0", "1", "2", "3"]
    assert dom.count('<details class="fatal">') == 2
    # Sorted by the count of risky findings (the script ran): ct200 and ct201 first.
    dom = headless(tmp_path, "--dump-dom", page.as_uri() + "#sort=risky").stdout
    assert 'data-sorted="risky"' in dom
    first = re.findall(r'<tr data-order="\d+" data-hosts="([^"]+)"', dom)[:2]
    assert first == ["ct200", "ct201"]
    # The reason and the fixes of every fatal difference open on request.
    dom = headless(tmp_path, "--dump-dom", page.as_uri() + "#open=fatal").stdout
    assert dom.count('<details class="fatal" open') == 2
    shot = tmp_path / "fleet.png"
    headless(
        tmp_path,
        "--hide-scrollbars",
        "--window-size=1400,800",
        f"--screenshot={shot}",
        page.as_uri(),
    )
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000


def test_a_thousand_hosts_in_twelve_classes_are_twelve_rows(tmp_path: Path) -> None:
    """The page at 1,000 hosts: 12 rows, a host found by its name (`#host=`), loaded and
    scripted by the browser within seconds."""
    import json
    import time

    from envsync.collect.importcheck import NO_IMPORT_CHECK
    from envsync.compare import targets as compare
    from envsync.model.codec import from_data
    from envsync.model.environment import Snapshot
    from tests import fleet_sim

    data = Path(__file__).resolve().parent.parent / "data" / "snapshots" / "ct129.json"
    base = from_data(Snapshot, json.loads(data.read_text()))
    snapshots = fleet_sim.fleet(base, 1000, 12)
    with fleet_sim.session(snapshots) as session:
        among = compare.targets(session, list(snapshots))
        result = compare._compare_each(session, among, reference=base, import_check=NO_IMPORT_CHECK)
    page = tmp_path / "fleet.html"
    page.write_text(render_fleet("html", result.reports, classes=result.classes))
    assert page.stat().st_size < 200_000
    started = time.perf_counter()
    dom = headless(tmp_path, "--dump-dom", page.as_uri() + "#host=gpu0950").stdout
    took = time.perf_counter() - started
    rows = re.findall(r"<tr data-order=\"\d+\" data-hosts=\"([^\"]*)\"( hidden=\"\")?", dom)
    assert len(rows) == 12
    shown = [hosts.split()[0] for hosts, hidden in rows if not hidden]
    assert len(shown) == 1 and "gpu0950" in next(h for h, x in rows if not x).split()
    assert "1 class(es) with a host matching gpu0950" in dom
    assert ">gpu[0001-0890]<" in dom
    assert took < 60
    shot = tmp_path / "fleet-1000.png"
    headless(
        tmp_path,
        "--hide-scrollbars",
        "--window-size=1400,900",
        f"--screenshot={shot}",
        page.as_uri(),
    )
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
