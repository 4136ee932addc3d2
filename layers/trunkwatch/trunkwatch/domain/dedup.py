"""What to send and how it reads (SPEC 4): Alertmanager's notification-log rules per alert,
and the SNS message in Alertmanager's webhook format."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from trunkwatch.app.views import AlertView
from trunkwatch.domain import alerts

SUBJECT_MAX = 99  # SNS wants subjects under 100 characters
SNS_MAX_BYTES = 256 * 1024


@dataclass(frozen=True)
class LogState:
    """What was last sent for an alert (the notification log entry)."""

    last_status: str | None = None
    last_sent_at: datetime | None = None
    jobs: tuple[str, ...] = ()
    held_by: tuple[str, ...] = ()


@dataclass(frozen=True)
class Decision:
    status: str  # firing | resolved
    reason: str


def decide(view: AlertView, log: LogState, now: datetime, repeat_interval: timedelta) -> Decision | None:
    """None when nothing is due; suppressed alerts are held (decided again next tick)."""
    alert = view.alert
    if view.suppressed:
        return None
    if alert.status == alerts.RESOLVED:
        return Decision(alerts.RESOLVED, "resolved") if log.last_status == alerts.FIRING else None
    if log.last_status != alerts.FIRING:
        return Decision(alerts.FIRING, _released(log.held_by) or "firing")
    if alert.jobs and tuple(sorted(alert.jobs)) != log.jobs:
        started = sorted(set(alert.jobs) - set(log.jobs))
        stopped = sorted(set(log.jobs) - set(alert.jobs))
        parts = ([f"started failing: {', '.join(started)}"] if started else []) + (
            [f"stopped failing: {', '.join(stopped)}"] if stopped else []
        )
        return Decision(alerts.FIRING, "update; " + "; ".join(parts))
    if repeat_interval and log.last_sent_at and now - log.last_sent_at >= repeat_interval:
        return Decision(alerts.FIRING, "reminder")
    return None


def holders(view: AlertView) -> tuple[str, ...]:
    return tuple(
        [f"silence {s}" for s in view.silenced_by] + [f"inhibited by {i}" for i in view.inhibited_by]
    )


def _released(held_by: tuple[str, ...]) -> str:
    silences = [h for h in held_by if h.startswith("silence ")]
    if silences:
        return f"{', '.join(silences)} expired"
    return "inhibition ended" if held_by else ""


def subject(view: AlertView, status: str) -> str:
    prefix = "[FIRING:1]" if status == alerts.FIRING else "[RESOLVED]"
    text = " ".join(f"{prefix} {view.alert.annotations.get('summary', view.alert.name)}".split())
    return text if len(text) <= SUBJECT_MAX else text[: SUBJECT_MAX - 3] + "..."


def message(view: AlertView, decision: Decision, external_url: str) -> dict[str, Any]:
    """The SNS Publish arguments: Subject, Message (webhook JSON), MessageAttributes."""
    alert = view.alert
    entry = alert.webhook_form()
    entry["status"] = decision.status
    group = {"alertname": alert.name, "repo": alert.labels["repo"]}
    body = {
        "version": "4",
        "groupKey": "{}:{" + ", ".join(f'{k}="{v}"' for k, v in group.items()) + "}",
        "truncatedAlerts": 0,
        "status": decision.status,
        "receiver": alerts.RECEIVER,
        "groupLabels": group,
        "commonLabels": dict(alert.labels),
        "commonAnnotations": dict(alert.annotations),
        "externalURL": external_url,
        "notification_reason": decision.reason,
        "alerts": [entry],
    }
    attributes = {
        "alertname": alert.name,
        "priority": alert.labels["priority"],
        "status": decision.status,
        "repo": alert.labels["repo"],
        "team": alert.labels["team"],
        "fingerprint": alert.fingerprint,
    }
    return {
        "Subject": subject(view, decision.status),
        "Message": _fit(body),
        "MessageAttributes": {k: {"DataType": "String", "StringValue": v} for k, v in attributes.items()},
    }


def _fit(body: dict[str, Any]) -> str:
    """Serialise, shortening the longest annotations until the message fits SNS's limit."""
    budget = SNS_MAX_BYTES - 4096  # room for subject and attributes
    text = json.dumps(body)
    while len(text.encode()) > budget:
        annotations = body["alerts"][0]["annotations"]
        longest = max(annotations, key=lambda k: len(annotations[k]))
        if len(annotations[longest]) < 64:
            break  # nothing left worth shortening; labels alone never get this large
        keep = len(annotations[longest]) // 2
        annotations[longest] = annotations[longest][:keep] + " [truncated]"
        body["commonAnnotations"] = dict(annotations)
        text = json.dumps(body)
    return text
