"""Alertmanager's webhook body (version "4"), which existing webhook receivers consume."""

from __future__ import annotations

import json
from typing import Any

from trunkwatch.channels.base import Notification
from trunkwatch.domain import alerts


def webhook_body(notification: Notification) -> dict[str, Any]:
    alert = notification.alert
    entry = alert.webhook_form()
    entry["status"] = notification.status
    group = {"alertname": alert.name, "repo": alert.labels["repo"]}
    return {
        "version": "4",
        "groupKey": "{}:{" + ", ".join(f'{k}="{v}"' for k, v in group.items()) + "}",
        "truncatedAlerts": 0,
        "status": notification.status,
        "receiver": notification.receiver,
        "groupLabels": group,
        "commonLabels": dict(alert.labels),
        "commonAnnotations": dict(alert.annotations),
        "externalURL": notification.external_url,
        "notification_reason": notification.reason,
        "alerts": [entry],
    }


def fit(body: dict[str, Any], max_bytes: int) -> str:
    """Serialise, shortening the longest annotations until the body fits `max_bytes`."""
    text = json.dumps(body)
    while len(text.encode()) > max_bytes:
        annotations = body["alerts"][0]["annotations"]
        longest = max(annotations, key=lambda k: len(annotations[k]))
        if len(annotations[longest]) < 64:
            break  # nothing left worth shortening; labels alone never get this large
        keep = len(annotations[longest]) // 2
        annotations[longest] = annotations[longest][:keep] + " [truncated]"
        body["commonAnnotations"] = dict(annotations)
        text = json.dumps(body)
    return text


def subject(notification: Notification, max_chars: int) -> str:
    """`[FIRING:1] <summary>` / `[RESOLVED] <summary>` on one line, at most `max_chars`."""
    prefix = "[FIRING:1]" if notification.status == alerts.FIRING else "[RESOLVED]"
    alert = notification.alert
    text = " ".join(f"{prefix} {alert.annotations.get('summary', alert.name)}".split())
    return text if len(text) <= max_chars else text[: max_chars - 3] + "..."
