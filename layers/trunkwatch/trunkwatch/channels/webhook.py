"""Alertmanager's webhook body (version "4"), which existing webhook receivers consume, and
the `webhook` receiver type, which POSTs it to a URL as Alertmanager's `webhook_configs` do
(a dead man's switch's ping URL, a chat bridge, an incident tool).

The URL may carry a credential (a ping URL is one): it is resolved when sending, like a
Slack webhook's, and never appears in an error or a log line.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from trunkwatch.channels.base import ChannelError, DigestNotification, Notification, Resolve, Route
from trunkwatch.channels.transport import post_json
from trunkwatch.domain import alerts
from trunkwatch.domain.config import Check, ConfigError, ReceiverConfig, TokenRef, _boolean, _secret_or_string
from trunkwatch.net.http import DEFAULT_TIMEOUT_S

# What a webhook receiver is sent at most: the body is shortened (`fit`) to this, as for SNS.
MAX_BODY_BYTES = 256 * 1024


def webhook_body(notification: Notification) -> dict[str, Any]:
    alert = notification.alert
    entry = alert.webhook_form()
    entry["status"] = notification.status
    # An alert of no trunk (Watchdog) has no repo: Alertmanager leaves an absent label out.
    group = {name: alert.labels[name] for name in ("alertname", "repo") if alert.labels.get(name)}
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


@dataclass
class WebhookChannel:
    """`url` resolves the URL when a message is due; `route` is the receiver's matchers."""

    name: str
    url: Callable[[], str | None] = field(repr=False)
    route: Route
    timeout_s: float = DEFAULT_TIMEOUT_S

    def accepts(self, labels: dict[str, str]) -> bool:
        return self.route(labels)

    def send(self, notification: Notification) -> None:
        payload = json.loads(fit(webhook_body(notification), MAX_BODY_BYTES))
        self._post(payload, notification.deadline)

    def send_digest(self, notification: DigestNotification) -> None:
        self._post(notification.body, notification.deadline)

    def _post(self, payload: object, deadline: float) -> None:
        what = f"webhook receiver {self.name}"
        try:
            url = self.url()
        except ConfigError as err:
            raise ChannelError(f"{what}: {err}") from None
        if not url:
            raise ChannelError(f"{what}: no URL")
        # A 400 or 422, say, is rejected for good.
        post_json(url, payload, what=what, timeout_s=self.timeout_s, deadline=deadline)


@dataclass(frozen=True, kw_only=True)
class WebhookReceiver(ReceiverConfig):
    """`type: webhook`: POSTs Alertmanager's webhook JSON to `url`, the URL itself or a
    reference to where it is kept (`{secret: name}`; `env` and `ssm` work too); with
    `digest`, the daily digest's JSON too."""

    url: str | TokenRef
    digest: bool = False

    CHECKS: ClassVar[dict[str, Check]] = {
        **ReceiverConfig.CHECKS,
        "url": _secret_or_string,
        "digest": _boolean,
    }

    def takes_digest(self) -> bool:
        return self.digest

    def log_name(self) -> str:
        """`webhook:<where the secret is>`, or a digest of a literal URL (it may hold a token)."""
        url = self.url
        if isinstance(url, TokenRef):
            return f"webhook:{url.place}"
        return f"webhook:{hashlib.sha256(url.encode()).hexdigest()[:12]}"

    def channel(self, name: str, route: Route, resolve: Resolve) -> WebhookChannel:
        url = self.url
        resolved = (lambda: resolve(url)) if isinstance(url, TokenRef) else (lambda: url)
        return WebhookChannel(name=name, url=resolved, route=route)
