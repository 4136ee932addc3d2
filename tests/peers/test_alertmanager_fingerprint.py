"""trunkwatch's alert fingerprint against a real Alertmanager's (design.md §3.4)."""

from __future__ import annotations

import json
import urllib.request
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.support.peers import alertmanager
from trunkwatch.domain.alerts import fingerprint
from trunkwatch.domain.clock import format_time

pytestmark = pytest.mark.slow

LABEL_SETS: list[dict[str, str]] = [
    {
        "alertname": "TrunkJobFailing",
        "repo": "pytorch/pytorch",
        "branch": "main",
        "priority": "P3",
        "team": "ci-oncall",
        "job": "pull / linux-jammy-py3.10-gcc11 / test (default, linux.2xlarge)",
        "workflow": "pull",
    },
    {
        "alertname": "TrunkBroken",
        "repo": "pytorch/pytorch",
        "branch": "main",
        "priority": "P2",
        "team": "ci-oncall",
    },
    {"alertname": "Ünïcödé", "team": "日本語チーム", "emoji": "🔥 trunk 🔥", "quote": 'say "hi"\\n'},
    {"alertname": "EmptyValue", "job": "", "workflow": "", "repo": "a/b"},
    {"alertname": "Many", **{f"label_{i:02d}": f"value {i} / {'x' * i}" for i in range(40)}},
    {"alertname": "Separators", "a": "b\xffc", "a_b": "\xff", "newline": "line one\nline two"},
]


def _request(url: str, data: Any = None) -> Any:
    body = json.dumps(data).encode() if data is not None else None
    request = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"})  # noqa: S310
    with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310 - 127.0.0.1 only
        text = response.read()
        return json.loads(text) if text else None


def test_fingerprints_match_a_real_alertmanager(tmp_path: Path) -> None:
    now = datetime.now(UTC)
    postable = [
        {"labels": labels, "startsAt": format_time(now), "endsAt": format_time(now + timedelta(hours=1))}
        for labels in LABEL_SETS
    ]
    with alertmanager(tmp_path) as url:
        _request(f"{url}/api/v2/alerts", postable)
        received = _request(f"{url}/api/v2/alerts")

    theirs = {json.dumps(alert["labels"], sort_keys=True): alert["fingerprint"] for alert in received}
    assert len(theirs) == len(LABEL_SETS)
    for labels in LABEL_SETS:
        # Alertmanager drops empty-valued labels on receipt; the same alert is what it returns.
        kept = {name: value for name, value in labels.items() if value}
        assert fingerprint(labels) == theirs[json.dumps(kept, sort_keys=True)], labels
