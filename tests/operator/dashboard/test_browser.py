"""The dashboard in a real headless browser (Debian's chromium driven by playwright).

Opens the page served by a live local cluster, waits for the first refresh,
reads the numbers shown (cells carry data-field / data-value) and checks them
against the cluster's; saves a screenshot under the test's tmp dir and copies
it to .cache/artifacts/dashboard.png. Install chromium with
tools/install-browser.sh; without it (or without playwright) the test skips.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from .conftest import COMMITTED, FIRST_COMMIT, GROUP, TOPIC, Cluster, N, get

CHROMIUM = "/usr/bin/chromium"
ARTIFACTS = Path(__file__).resolve().parents[3] / ".cache" / "artifacts"
# Without these, chromium phones home at start and the closed network refuses it, many times over.
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]

pytestmark = pytest.mark.slow


@pytest.fixture
def page():
    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} not installed (run tools/install-browser.sh)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        try:
            yield browser.new_page(viewport={"width": 1400, "height": 1000})
        finally:
            browser.close()


def test_page_shows_the_cluster_numbers(live: Cluster, page, tmp_path: Path) -> None:
    page.goto(live.dashboard)
    selector = f'tr[data-group="{GROUP}"][data-topic="{TOPIC}"][data-partition="0"] td[data-field="lag"]'
    page.wait_for_selector(selector, timeout=15_000)
    page.wait_for_timeout(2500)  # two refreshes in: the chart has points

    row = f'#partitions tr[data-topic="{TOPIC}"][data-partition="0"]'
    shown_end = page.get_attribute(f'{row} td[data-field="log_end_offset"]', "data-value")
    shown_hw = page.get_attribute(f'{row} td[data-field="high_watermark"]', "data-value")
    shown_lag = page.get_attribute(selector, "data-value")
    shown_committed = page.get_attribute(selector.replace('"lag"', '"committed"'), "data-value")
    assert (int(shown_end), int(shown_hw)) == (N, N)
    assert (int(shown_committed), int(shown_lag)) == (COMMITTED, N - COMMITTED)
    assert page.text_content('[data-overview="brokers_up"]') == "3/3"
    assert page.text_content('[data-overview="controller"]') == "up"

    leader = get(f"{live.dashboard}/api/topics")["topics"]
    expected_leader = next(t for t in leader if t["name"] == TOPIC)["partitions"][0]["leader"]
    assert page.text_content(f'{row} td[data-field="leader"]') == str(expected_leader)

    # The group's activity: one join, one leave (close), two commits; each started a rebalance, drawn as a dot.
    activity = f'#activity tr[data-group="{GROUP}"]'
    shown = {f: int(page.get_attribute(f'{activity} td[data-field="{f}"]', "data-value"))
             for f in ("joins", "leaves", "expirations", "commits", "records_committed", "rebalances")}
    assert shown["joins"] == 1 and shown["leaves"] == 1 and shown["expirations"] == 0
    assert (shown["commits"], shown["records_committed"]) == (2, COMMITTED - FIRST_COMMIT)
    assert shown["rebalances"] >= 2  # the join, maybe kafka-python's rejoin, and the leave
    assert int(page.get_attribute("#rebalances", "data-marks")) == shown["rebalances"]

    shot = tmp_path / "dashboard.png"
    page.screenshot(path=str(shot), full_page=True)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shutil.copy(shot, ARTIFACTS / "dashboard.png")
    assert shot.stat().st_size > 10_000
