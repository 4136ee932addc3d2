"""The status page in a real browser (Debian's chromium driven by Playwright) against
`trunkwatch serve`: alerts with their culprit, hostile commit data shown as text, the silence
form prefilled from an alert, silence create/expire, and the bearer-token prompt.

The screenshot goes to the test's tmp dir; TRUNKWATCH_UPDATE_SCREENSHOT=1 (`make screenshot`)
also copies it over the README's docs/status-page.png. Chromium is a peer like Alertmanager:
installed by scripts/install_peers.sh when missing, skipped by the peers switch (tests/support/peers.py).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import struct
import subprocess
import sys
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.peers import ROOT, free_port, peer_binary, wait_until_serving
from tests.support.scenarios import SCENARIOS
from trunkwatch.api import auth

pytestmark = pytest.mark.slow

CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
# The README's screenshot: refreshed only on request, never by an ordinary test run.
DOCS_SCREENSHOT = ROOT / "docs" / "status-page.png"
UPDATE_SCREENSHOT = os.environ.get("TRUNKWATCH_UPDATE_SCREENSHOT") == "1"
VIEWPORT = {"width": 1200, "height": 800}
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
BROKEN = "pull / linux-jammy-py3.10-gcc11 / test (default, linux.2xlarge)"
# Commit data comes from untrusted pull requests: none of this may ever run.
HOSTILE_TITLE = (
    '[inductor] refactor lowering <img src=x onerror="window.__pwned=1"><script>window.__pwned=1</script>'
)
HOSTILE_URL = "javascript:window.__pwned=1"
TOKEN = "status-page-test-token"


def chromium() -> str:
    return peer_binary("chromium")


def hostile_scenario(path: Path) -> Path:
    """basic-break up to 19:19 (TrunkBroken and one TrunkJobFailing firing), with the breaking
    commits' titles and commit links replaced by hostile ones."""
    lines = (SCENARIOS / "basic-break.jsonl").read_text().splitlines()[:27]
    out = [lines[0]]
    for line in lines[1:]:
        event = json.loads(line)
        for commit in (event.get("hud") or {}).get("shaGrid", []):
            if commit.get("commitTitle") == "[inductor] refactor lowering":
                commit["commitTitle"] = HOSTILE_TITLE
                commit["commitUrl"] = HOSTILE_URL
        out.append(json.dumps(event))
    path.write_text("\n".join(out) + "\n")
    return path


@contextlib.contextmanager
def serving(scenario: Path, tokens: Path | None = None) -> Iterator[str]:
    port = free_port()
    command = [sys.executable, "-m", "trunkwatch_local.cli", "serve", "--scenario", str(scenario)]
    command += ["--port", str(port)] + (["--tokens", str(tokens)] if tokens else [])
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        wait_until_serving(process)
        yield f"http://127.0.0.1:{port}"
    finally:
        process.kill()
        process.communicate(timeout=30)


@pytest.fixture(scope="module")
def scenario(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return hostile_scenario(tmp_path_factory.mktemp("page") / "hostile.jsonl")


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    executable = chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            launched.close()


class Watched:
    """A page that records dialogs, script errors, console errors and the API requests."""

    def __init__(self, browser: Any, *, refusals: int = 0) -> None:
        self.refusals = refusals
        self.context = browser.new_context(viewport=VIEWPORT)
        self.page = self.context.new_page()
        self.dialogs: list[str] = []
        self.errors: list[str] = []
        self.requests: list[Any] = []
        self.page.on("dialog", lambda d: (self.dialogs.append(d.message), d.dismiss()))
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("request", lambda r: self.requests.append(r))

    def assert_clean(self) -> None:
        # A CSP violation would be a console error too.
        assert self.page.evaluate("typeof window.__pwned") == "undefined"
        assert self.dialogs == []
        # The browser logs each refused API call (the 401 the token prompt answers).
        refused = [e for e in self.errors if "status of 401" in e or "status of 403" in e]
        assert len(refused) == self.refusals
        assert [e for e in self.errors if e not in refused] == []
        assert self.page.locator("main img, main script, a[href^='javascript:']").count() == 0
        assert all(r.url.startswith("http://127.0.0.1:") for r in self.requests)


def png_size(data: bytes) -> tuple[int, int]:
    """Width and height from a PNG's header chunk (IHDR comes first, right after the signature)."""
    assert data[:8] == PNG_SIGNATURE and data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def api(url: str, path: str, *, token: str | None = None) -> Any:
    request = urllib.request.Request(url + path)  # noqa: S310 - 127.0.0.1
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310 - 127.0.0.1
        return json.loads(response.read())


def test_alerts_silence_from_an_alert_and_expire(browser: Any, scenario: Path, tmp_path: Path) -> None:
    with serving(scenario) as url:
        watched = Watched(browser)
        page = watched.page
        page.goto(url + "/")
        alerts = page.locator("article.alert")
        alerts.first.wait_for()
        assert alerts.count() == 2
        trunk = page.locator("section.trunk")
        assert trunk.get_attribute("data-trunk") == "pytorch/pytorch@main"
        broken = page.locator("article.alert.P2")
        assert "TrunkBroken" in broken.inner_text()
        assert BROKEN in broken.locator("ul.jobs").inner_text()
        job = page.locator("article.alert.P3")
        assert "TrunkJobFailing" in job.inner_text()
        # The culprit: the hostile title is shown as text; its javascript: link is no link.
        assert job.locator(".commit-title").text_content() == HOSTILE_TITLE
        sha = job.locator(".culprit-sha")
        assert (sha.text_content(), sha.evaluate("e => e.tagName")) == ("f1886646882e", "SPAN")
        pr = job.locator("a", has_text="#160004")
        assert pr.get_attribute("href") == "https://github.com/pytorch/pytorch/pull/160004"
        assert pr.get_attribute("rel") == "noopener noreferrer"
        assert "FAILED test/test_ops.py" in job.locator("pre.lines").inner_text()
        assert not page.locator("#token-dialog").is_visible()
        watched.assert_clean()

        # The alert's Silence link opens the form prefilled with its identifying labels.
        job.locator("a.silence-link").click()
        page.locator("form.silence").wait_for()
        filter_text = urllib.parse.unquote(page.evaluate("location.hash").split("filter=", 1)[1])
        assert filter_text == (
            f'{{alertname="TrunkJobFailing",repo="pytorch/pytorch",branch="main",job="{BROKEN}"}}'
        )
        rows = page.locator(".matcher-row")
        assert [
            (
                row.locator("[name=name]").input_value(),
                row.locator("[name=op]").input_value(),
                row.locator("[name=value]").input_value(),
            )
            for row in rows.all()
        ] == [
            ("alertname", "=", "TrunkJobFailing"),
            ("repo", "=", "pytorch/pytorch"),
            ("branch", "=", "main"),
            ("job", "=", BROKEN),
        ]
        page.fill("[name=duration]", "3h")
        page.fill("[name=createdBy]", "oncall@example.com")
        page.fill("[name=comment]", "fix in flight: pytorch/pytorch#160099")
        page.click("button[type=submit]")
        page.locator("table.silences.active").wait_for()
        assert "created" in page.locator("#notice").inner_text()

        (silence,) = api(url, "/api/v2/silences")
        assert silence["status"]["state"] == "active"
        assert (silence["createdBy"], silence["comment"]) == (
            "oncall@example.com",
            "fix in flight: pytorch/pytorch#160099",
        )
        assert {(m["name"], m["value"], m["isRegex"], m["isEqual"]) for m in silence["matchers"]} == {
            ("alertname", "TrunkJobFailing", False, True),
            ("repo", "pytorch/pytorch", False, True),
            ("branch", "main", False, True),
            ("job", BROKEN, False, True),
        }
        row = page.locator(f"tr[data-silence='{silence['id']}']")
        assert "oncall@example.com" in row.inner_text() and "fix in flight" in row.inner_text()

        # The trunk view marks the job alert silenced; the trunk-level alert still fires.
        page.click("a[data-nav=trunks]")
        page.locator("article.alert.suppressed").wait_for()
        suppressed = page.locator("article.alert.suppressed")
        assert "TrunkJobFailing" in suppressed.inner_text()
        assert suppressed.locator(".badge.silenced").count() == 1
        assert silence["id"][:8] in suppressed.inner_text()
        assert page.locator("article.alert:not(.suppressed)").count() == 1
        watched.assert_clean()
        screenshot = tmp_path / "status-page.png"
        page.screenshot(path=str(screenshot), full_page=True)
        # The whole page: as wide as the viewport, as tall as the document.
        page_height = page.evaluate("document.documentElement.scrollHeight")
        assert png_size(screenshot.read_bytes()) == (VIEWPORT["width"], max(page_height, VIEWPORT["height"]))
        if UPDATE_SCREENSHOT:
            shutil.copyfile(screenshot, DOCS_SCREENSHOT)

        # Expire it from the silences view.
        page.click("a[data-nav=silences]")
        page.locator(f"tr[data-silence='{silence['id']}'] button.expire").click()
        page.locator(f"table.silences.expired tr[data-silence='{silence['id']}']").wait_for()
        assert api(url, f"/api/v2/silence/{silence['id']}")["status"]["state"] == "expired"
        assert all(a["status"]["state"] == "active" for a in api(url, "/api/v2/alerts"))
        watched.assert_clean()
        # Without --tokens nothing ever asked for a token or sent one.
        assert all("authorization" not in r.headers for r in watched.requests)
        watched.context.close()


def test_a_write_without_a_token_asks_for_one_then_succeeds(
    browser: Any, scenario: Path, tmp_path: Path
) -> None:
    tokens = tmp_path / "tokens.json"
    tokens.write_text(
        json.dumps({"tokens": [{"sha256": auth.token_hash(TOKEN), "principal": "alice", "scope": "write"}]})
    )
    with serving(scenario, tokens) as url:
        watched = Watched(browser, refusals=1)
        page = watched.page
        # The page and its assets load without a token; the API does not answer without one.
        filter_text = '{alertname="TrunkBroken",repo="pytorch/pytorch"}'
        page.goto(url + "/#/silences/new?filter=" + urllib.parse.quote(filter_text, safe=""))
        page.locator("form.silence").wait_for()
        assert page.locator(".matcher-row [name=value]").evaluate_all("els => els.map(e => e.value)") == [
            "TrunkBroken",
            "pytorch/pytorch",
        ]
        page.fill("[name=comment]", "infra outage, tracked in #1")
        page.click("form.silence button[type=submit]")
        dialog = page.locator("#token-dialog")
        dialog.wait_for(state="visible")
        assert "bearer token" in dialog.inner_text().lower()
        page.fill("#token-input", TOKEN)
        page.click("#token-form button[type=submit]")
        page.locator("table.silences.active").wait_for()
        assert not dialog.is_visible()

        (silence,) = api(url, "/api/v2/silences", token=TOKEN)
        # Without createdBy the API records the token's principal.
        assert (silence["createdBy"], silence["comment"]) == ("alice", "infra outage, tracked in #1")
        # The form first reads the API's clock (its silence starts at the API's now): that read
        # is refused, the token asked for, then the read and the write carry it.
        sent = [(r.method, r.url.split("/api/")[-1]) for r in watched.requests if "/api/" in r.url]
        assert sent[:3] == [("GET", "v2/status"), ("GET", "v2/status"), ("POST", "v2/silences")]
        posts = [r for r in watched.requests if r.method == "POST"]
        assert [r.headers.get("authorization") for r in posts] == [f"Bearer {TOKEN}"]
        # The token stays in this tab's sessionStorage and out of every URL.
        assert page.evaluate("sessionStorage.getItem('trunkwatch.token')") == TOKEN
        assert page.evaluate("t => !Object.values(localStorage).includes(t)", TOKEN)
        assert all(TOKEN not in r.url for r in watched.requests) and TOKEN not in page.url
        # Reads go on with the stored token: the trunk view loads without asking again.
        page.click("a[data-nav=trunks]")
        page.locator("article.alert").first.wait_for()
        assert page.locator("article.alert.suppressed").count() == 1
        watched.assert_clean()
        watched.context.close()


def test_acknowledge_an_alert_from_the_page_shows_who_and_since_when(browser: Any, scenario: Path) -> None:
    with serving(scenario) as url:
        watched = Watched(browser)
        page = watched.page
        page.goto(url + "/")
        broken = page.locator("article.alert.P2")
        broken.wait_for()
        assert broken.locator(".badge.acknowledged").count() == 0
        broken.locator("button.ack-button").click()
        page.fill("form.ack [name=ackBy]", "oncall@example.com")
        page.fill("form.ack [name=ackNote]", "reverting #160004")
        page.click("form.ack button[type=submit]")
        page.locator("article.alert.P2 .badge.acknowledged").wait_for()
        broken = page.locator("article.alert.P2")
        assert broken.locator(".acked-by").text_content() == "oncall@example.com"
        assert broken.locator(".acked-note").text_content() == "reverting #160004"
        assert broken.locator("time").last.text_content().endswith(" ago")  # its age
        assert broken.locator("button.ack-button").count() == 0
        # The job's own alert is not acknowledged: only the alert acknowledged.
        assert page.locator("article.alert.P3 button.ack-button").count() == 1
        (acked,) = api(url, "/api/v2/acks")
        assert acked["labels"]["alertname"] == "TrunkBroken"
        assert (acked["acknowledgement"]["createdBy"], acked["acknowledgement"]["comment"]) == (
            "oncall@example.com",
            "reverting #160004",
        )
        watched.assert_clean()
        watched.context.close()
