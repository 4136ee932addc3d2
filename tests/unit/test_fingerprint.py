"""The alert fingerprint (design.md §3.4) pinned to values a real Alertmanager (0.25, Debian's
prometheus-alertmanager) gave for these label sets: tests/peers/test_alertmanager_fingerprint.py
checks the same algorithm against a running one, this keeps the values under `make unit`."""

from __future__ import annotations

import pytest

from trunkwatch.domain.alerts import fingerprint

JOB_FAILING = {
    "alertname": "TrunkJobFailing",
    "repo": "pytorch/pytorch",
    "branch": "main",
    "priority": "P3",
    "team": "ci-oncall",
    "job": "pull / linux-jammy-py3.10-gcc11 / test (default, linux.2xlarge)",
    "workflow": "pull",
}
BROKEN = {
    "alertname": "TrunkBroken",
    "repo": "pytorch/pytorch",
    "branch": "main",
    "priority": "P2",
    "team": "ci-oncall",
}


@pytest.mark.parametrize(
    ("labels", "theirs"),
    [
        (JOB_FAILING, "8dedeba9b3b665f5"),
        (BROKEN, "bf9053c7230a5bd0"),
        # Label order does not count: names are sorted.
        (dict(reversed(BROKEN.items())), "bf9053c7230a5bd0"),
        # UTF-8 bytes, not characters.
        (
            {"alertname": "Ünïcödé", "team": "日本語チーム", "emoji": "🔥 trunk 🔥", "quote": 'say "hi"\\n'},
            "f35c2d703e01310b",
        ),
        # Empty-valued labels are dropped, as Alertmanager drops them on receipt.
        ({"alertname": "EmptyValue", "job": "", "workflow": "", "repo": "a/b"}, "0799c84f9af78dd8"),
        ({"alertname": "EmptyValue", "repo": "a/b"}, "0799c84f9af78dd8"),
        # ÿ is U+00FF, two UTF-8 bytes, never the separator byte 0xFF.
        (
            {"alertname": "Separators", "a": "b\xffc", "a_b": "\xff", "newline": "line one\nline two"},
            "864e85ff1bb0665c",
        ),
    ],
)
def test_fingerprints_are_alertmanagers(labels: dict[str, str], theirs: str) -> None:
    assert fingerprint(labels) == theirs
