"""`GET /runbook`: the runbook as a page with an anchor per alert, served without a token
under the status page's policy, and the alerts' default `runbook_url` pointing at it."""

from __future__ import annotations

import os
import re
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.support.api import get_page, headers_of
from tests.support.paths import ROOT
from trunkwatch.api import auth, page
from trunkwatch.api.runbook import render
from trunkwatch.app.views import runbook_url
from trunkwatch.domain import alerts
from trunkwatch_local import apigw

ALERTNAMES = (
    alerts.JOB_FAILING,
    alerts.TRUNK_BROKEN,
    alerts.TRUNK_BADLY_BROKEN,
    alerts.SOURCE_DOWN,
    alerts.WEBHOOKS_DOWN,
    alerts.WATCHDOG,
)


SOURCE = ROOT / "layers" / "trunkwatch" / "trunkwatch" / "api" / "static" / "runbook.md"


def test_the_runbook_has_one_source_the_package_serves() -> None:
    # No copy to keep equal by hand: the docs link to the packaged file.
    assert page.asset("runbook.md") == SOURCE.read_text(encoding="utf-8")
    assert [path for path in _sources() if path.name == "runbook.md"] == [SOURCE]


def test_the_runbook_has_a_section_per_alert() -> None:
    headings = re.findall(r"^## (\S+)$", SOURCE.read_text(encoding="utf-8"), re.MULTILINE)
    assert [name for name in ALERTNAMES if name not in headings] == []


def _sources() -> list[Path]:
    """The checkout's files, leaving out what is built or installed (virtualenvs, builds)."""
    found: list[Path] = []
    for folder, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if not d.startswith(".") and d not in {"build", "out", "__pycache__"}]
        found += [Path(folder) / name for name in files]
    return found


def test_runbook_page_has_a_section_per_alert_and_the_strict_policy(aws: Any) -> None:
    response = get_page("/runbook")
    assert response["statusCode"] == 200
    headers = headers_of(response)
    assert headers["content-type"] == "text/html; charset=utf-8"
    assert headers["content-security-policy"] == page.CONTENT_SECURITY_POLICY
    body = response["body"]
    for name in ALERTNAMES:
        assert f'<h2 id="{name.lower()}">{name}</h2>' in body
    assert "<script" not in body and "style=" not in body
    assert '<link rel="stylesheet" href="static/app.css">' in body


def test_the_renderer_keeps_hostile_text_inert() -> None:
    out = render(
        "# T <script>alert(1)</script>\n\n[x](javascript:alert(1)) [ok](https://example.invalid/a?b=1&c=2)\n"
        '- `<img src=x onerror=alert(1)>` and **bold**\n\n```\n<b>"raw"</b>\n```\n'
    )
    assert "<script" not in out and "<img" not in out and 'href="javascript' not in out
    assert '<a href="https://example.invalid/a?b=1&amp;c=2">ok</a>' in out
    assert "<code>&lt;img src=x onerror=alert(1)&gt;</code>" in out and "<strong>bold</strong>" in out
    assert "<pre><code>&lt;b&gt;&quot;raw&quot;&lt;/b&gt;</code></pre>" in out


def test_local_gateway_serves_the_runbook_without_a_token() -> None:
    tokens = {"tokens": [{"sha256": auth.token_hash("s3cret"), "principal": "alice", "scope": "write"}]}
    seen: list[str] = []

    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        seen.append(event["resource"])
        return {"statusCode": 200, "headers": {"Content-Type": "text/html"}, "body": "ok"}

    server = apigw.serve_api(handler, port=0, tokens=tokens)
    try:
        url = f"{server.url}/runbook"
        with urllib.request.urlopen(url, timeout=10) as response:  # noqa: S310 - 127.0.0.1
            assert response.status == 200
        with pytest.raises(urllib.error.HTTPError) as refused:
            post = urllib.request.Request(url, method="POST")  # noqa: S310 - 127.0.0.1
            urllib.request.urlopen(post, timeout=10)  # noqa: S310 - 127.0.0.1
        assert refused.value.code == 403
    finally:
        server.stop()
    assert seen == ["/runbook"]


def test_default_runbook_url_points_at_the_alerts_section() -> None:
    assert runbook_url("https://x.execute-api.us-east-1.amazonaws.com/v1/", "TrunkBroken") == (
        "https://x.execute-api.us-east-1.amazonaws.com/v1/runbook#trunkbroken"
    )
    assert runbook_url("", "TrunkBroken") == ""  # no API URL: no annotation at all
