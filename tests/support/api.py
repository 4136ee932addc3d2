"""The API Lambda's alert views stood in for (its alerts module's contract), and its
unauthenticated pages fetched through the handler."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from tests.support.peers import invoke
from trunkwatch.domain.alerts import Alert
from trunkwatch_local import apigw

NOW = datetime(2026, 11, 18, 15, 0, tzinfo=UTC)
HOUR = timedelta(hours=1)


@dataclass
class FakeView:
    alert: Alert
    silenced_by: list[str] = field(default_factory=list)
    inhibited_by: list[str] = field(default_factory=list)


def fake_alert(name: str, job: str | None = None, ends_at: datetime | None = None) -> Alert:
    labels = {
        "alertname": name,
        "repo": "pytorch/pytorch",
        "branch": "main",
        "priority": "P3",
        "team": "ci-oncall",
    }
    if job:
        labels["job"] = job
    return Alert(labels, {"summary": f"{name} {job or ''}"}, starts_at=NOW - HOUR, ends_at=ends_at)


def get_page(path: str, *, stage_path: str | None = None) -> dict[str, Any]:
    event = apigw.proxy_event("GET", path, caller=None)
    if stage_path is not None:
        event["requestContext"]["path"] = stage_path
    response: dict[str, Any] = invoke("api", event)
    return response


def headers_of(response: dict[str, Any]) -> dict[str, str]:
    headers = {k.lower(): v for k, v in (response.get("headers") or {}).items()}
    for name, values in (response.get("multiValueHeaders") or {}).items():
        headers[name.lower()] = ", ".join(values)
    return headers
