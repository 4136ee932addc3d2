"""The status page's trunk views in chromium, on three trunks replayed through the local
pipeline (tests/support/trunks.py) and served by the local API gateway: the overview lists
every trunk broken first, the broken trunk's grid shows its failing job's cells and the
culprit, and the history's SVG plots are drawn from the API's data.

Screenshots of both views go to the test's tmp dir; `make screenshot` also copies them to
docs/status-overview.png and docs/status-trunk.png."""

from __future__ import annotations

import shutil
import urllib.parse
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.peers.test_status_page import (  # noqa: F401 - `browser` is a fixture
    UPDATE_SCREENSHOT,
    VIEWPORT,
    Watched,
    api,
    browser,
    png_size,
)
from tests.support.peers import ROOT
from tests.support.trunks import BROKEN, BROKEN_JOB, COMMITS, FIXED, QUIET, Trunks, three_trunks
from trunkwatch.domain.clock import format_time
from trunkwatch.domain.notification_log import Rejection
from trunkwatch_local import apigw

pytestmark = pytest.mark.slow

DOCS = {"overview": ROOT / "docs" / "status-overview.png", "trunk": ROOT / "docs" / "status-trunk.png"}


@pytest.fixture
def served() -> Iterator[tuple[Trunks, str]]:
    """The replay ends at the current hour, so the page's "ago" reads as it would live; the
    API answers at the replay's last poll."""
    now = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    with three_trunks(now - timedelta(hours=COMMITS + 1), store="memory") as trunks:
        trunks.replay()

        def handle(event: dict[str, Any], context: Any) -> Any:
            with trunks.runtime.lock:
                return trunks.runtime.invoke("api", event)

        server = apigw.serve_api(handle, port=0)
        try:
            yield trunks, server.url
        finally:
            server.stop()


def shoot(page: Any, tmp_path: Path, view: str) -> None:
    screenshot = tmp_path / f"status-{view}.png"
    page.screenshot(path=str(screenshot), full_page=True)
    assert png_size(screenshot.read_bytes())[0] == VIEWPORT["width"]
    if UPDATE_SCREENSHOT:
        shutil.copyfile(screenshot, DOCS[view])


def test_the_overview_lists_every_trunk_broken_first_then_a_broken_trunks_grid_and_history(
    browser: Any,  # noqa: F811 - the fixture imported above
    served: tuple[Trunks, str],
    tmp_path: Path,
) -> None:
    trunks, url = served
    watched = Watched(browser)
    page = watched.page
    page.goto(url + "/")
    rows = page.locator("table.trunks tr.trunk-row")
    rows.first.wait_for()
    page.locator("article.alert").first.wait_for()
    assert rows.evaluate_all("rows => rows.map(r => r.dataset.trunk)") == [BROKEN, QUIET, FIXED]
    badges = [rows.nth(i).locator(".badge.health").inner_text() for i in range(3)]
    assert badges == ["broken", "healthy", "healthy"]
    assert trunks.trunks[BROKEN].sha(40)[:12] in rows.first.inner_text()
    watched.assert_clean()
    shoot(page, tmp_path, "overview")

    # From the overview to the broken trunk's view: its grid and history.
    page.locator(f"tr.trunk-row[data-trunk='{BROKEN}'] a.trunk-link").click()
    page.locator("table.grid").wait_for()
    assert urllib.parse.unquote(page.evaluate("location.hash")) == f"#/trunk?id={BROKEN}"

    # The grid: the failing job's column, its failing cells linking to their jobs, the culprit.
    grid = api(url, "/api/v2/trunks/grid?" + urllib.parse.urlencode({"trunk": BROKEN}))
    columns = page.locator("table.grid th.job").evaluate_all("ths => ths.map(t => t.dataset.job)")
    assert columns == [BROKEN_JOB]
    failing = page.locator("table.grid td.cell.failure")
    assert failing.count() == 9
    assert failing.first.locator("a").get_attribute("href") == grid["jobs"][0]["cells"][0]["url"]
    culprit = page.locator("table.grid tr.culprit")
    assert culprit.get_attribute("data-sha") == trunks.trunks[BROKEN].sha(40)
    assert "culprit" in culprit.locator("th.commit").inner_text()
    assert culprit.locator("td.cell.culprit.failure").count() == 1
    assert page.locator("table.grid td.cell.success").count() == 21

    # The history: every plot drawn from the API's numbers.
    history = api(url, "/api/v2/trunks/history?" + urllib.parse.urlencode({"trunk": BROKEN}))
    hours = page.locator("svg#hours-plot rect.bar")
    assert hours.evaluate_all("bars => bars.map(b => [b.dataset.label, +b.dataset.value])") == [
        [d["day"], d["hours"]] for d in history["hoursBrokenPerDay"]
    ]
    assert sum(d["hours"] for d in history["hoursBrokenPerDay"]) > 0
    tall = hours.evaluate_all("bars => bars.filter(b => b.getBBox().height > 0).length")
    assert tall == sum(1 for d in history["hoursBrokenPerDay"] if d["hours"])
    episodes = page.locator("svg#episodes-plot rect.episode")
    assert episodes.evaluate_all("rects => rects.map(r => r.dataset.start)") == [
        e["start"] for e in history["episodes"]
    ]
    assert page.locator("svg#episodes-plot rect.episode.open").count() == 1
    pages = page.locator("svg#pages-plot rect.bar")
    assert pages.evaluate_all("bars => bars.map(b => +b.dataset.value)") == [
        w["pages"] for w in history["pagesPerWeek"]
    ]
    fix = page.locator("svg#fix-plot")
    assert fix.locator("rect.bar").count() == 1
    assert float(fix.locator("line.mark.median").get_attribute("data-value") or "nan") == round(
        history["medianTimeToFixSeconds"] / 3600, 2
    )
    assert page.locator(".median-fix").inner_text() == "6h 55m"
    # The breakage fixed before a page: listed apart, not drawn as an episode or a page.
    (unpaged,) = history["fixedBeforePage"]
    row = page.locator("table.fixed tbody tr")
    assert row.evaluate_all("rows => rows.map(r => r.dataset.culprit)") == [unpaged["culprit"]["sha"]]
    assert "2 commits" in row.inner_text() and "fixed by " + unpaged["fix"]["sha"][:12] in row.inner_text()
    watched.assert_clean()
    shoot(page, tmp_path, "trunk")

    # A trunk that broke and was fixed: its grid still shows the break and its culprit.
    page.goto(url + "/#/trunk?id=" + urllib.parse.quote(FIXED, safe=""))
    page.locator(f"table.grid tr.culprit[data-sha='{trunks.trunks[FIXED].sha(20)}']").wait_for()
    assert page.locator("table.grid th.job.firing").count() == 0
    page.locator("p.fixed-none").wait_for()
    watched.assert_clean()
    watched.context.close()


def test_the_overview_lists_each_rejected_notification_with_the_receivers_answer(
    browser: Any,  # noqa: F811 - the fixture imported above
    served: tuple[Trunks, str],
) -> None:
    trunks, url = served
    storage = trunks.runtime.stack.storage()
    hostile = 'answered 400: <img src=x onerror="window.__pwned=1">'
    older = Rejection(
        "slack:trunkwatch/receivers/slack-oncall",
        "0123456789abcdef",
        "TrunkJobFailing",
        BROKEN_JOB,
        "firing",
        "firing",
        datetime.now(UTC) - timedelta(hours=2),
        "Slack receiver slack:trunkwatch/receivers/slack-oncall " + hostile,
    )
    newer = Rejection(
        "github_issues:pytorch/pytorch",
        "fedcba9876543210",
        "TrunkBroken",
        None,
        "resolved",
        "resolved",
        datetime.now(UTC) - timedelta(minutes=5),
        "GitHub issues receiver github_issues:pytorch/pytorch: PATCH /repos/pytorch/pytorch/issues/7 "
        "answered 422: Validation Failed",
    )
    for rejection in (older, newer):
        storage.logs.save_rejection(BROKEN, rejection, timedelta(days=30))
    watched = Watched(browser)
    page = watched.page
    page.goto(url + "/")
    rows = page.locator("table.rejected tr.rejected-row")
    rows.first.wait_for()
    # Newest first: which receiver refused which alert's message, when, and its answer as text.
    assert rows.evaluate_all("rows => rows.map(r => r.dataset.receiver)") == [newer.receiver, older.receiver]
    cells = [rows.nth(1).locator("td").nth(i).inner_text() for i in range(6)]
    assert rows.nth(1).locator("td time").get_attribute("datetime") == format_time(older.at)
    assert cells[0].endswith(" ago") and cells[1] == "pytorch/pytorch @ main"
    assert cells[2] == f"TrunkJobFailing {BROKEN_JOB}" and cells[3] == older.receiver
    assert cells[4] == "firing (firing)" and cells[5] == older.answer
    assert rows.nth(0).locator("td").nth(2).inner_text() == "TrunkBroken"
    watched.assert_clean()  # the receiver's answer is shown, never run
    watched.context.close()
