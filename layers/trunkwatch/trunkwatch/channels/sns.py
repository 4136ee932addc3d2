"""SNS topics: the stack's own (every alert, and the daily digest) and any a configuration
adds, with message attributes subscribers filter on."""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass, field
from typing import Any, ClassVar

from trunkwatch.channels import digest
from trunkwatch.channels.base import (
    ChannelError,
    ChannelRejected,
    DigestNotification,
    Notification,
    Resolve,
    Route,
)
from trunkwatch.channels.email import email_text
from trunkwatch.channels.webhook import fit, subject, webhook_body
from trunkwatch.domain.alerts import RECEIVER
from trunkwatch.domain.config import (
    STACK_TOPIC,
    Check,
    ReceiverConfig,
    _boolean,
    _nonempty,
    _optional,
    _pattern,
)
from trunkwatch.domain.digest import KIND

SUBJECT_MAX = 99  # SNS wants subjects under 100 characters
SNS_MAX_BYTES = 256 * 1024
ROOM_FOR_SUBJECT_AND_ATTRIBUTES = 4096
_TOPIC_ARN = re.compile(r"^arn:[\w-]+:sns:[\w-]+:\d{12}:[\w.-]+$")


def publish_arguments(notification: Notification) -> dict[str, Any]:
    """The SNS Publish arguments: Subject, Message, MessageAttributes, MessageStructure=json.

    Message is `{"default": <webhook JSON>, "email": <plain text>}`. SNS gives each protocol
    its own key when present and `default` otherwise, so sqs, lambda, http(s), email-json,
    firehose and application subscribers all get the webhook JSON (for sqs with raw delivery
    off, as the envelope's "Message"); only email subscribers get the text. The webhook JSON is
    not repeated under each protocol key: once is enough and it keeps the 256 KB budget for one
    copy (escaped once more inside the outer JSON) plus the email text.
    """
    alert = notification.alert
    labels = alert.labels
    attributes = {
        "alertname": alert.name,
        "priority": labels.get("priority", ""),
        "status": notification.status,
        "repo": labels.get("repo", ""),
        "team": labels.get("team", ""),
        "fingerprint": alert.fingerprint,
    }
    return {
        "Subject": subject(notification, SUBJECT_MAX),
        "Message": per_protocol_message(notification, SNS_MAX_BYTES - ROOM_FOR_SUBJECT_AND_ATTRIBUTES),
        "MessageStructure": "json",
        # SNS refuses an empty attribute value: an alert of no trunk (Watchdog) has no repo or team.
        "MessageAttributes": {
            k: {"DataType": "String", "StringValue": v} for k, v in attributes.items() if v
        },
    }


def digest_publish_arguments(notification: DigestNotification) -> dict[str, Any]:
    """The digest's Publish arguments: its JSON as `default`, a short report as `email`, and
    the attribute `kind=digest`, which no alert carries: a subscription's filter policy
    `{"kind": [{"exists": false}]}` keeps it off a pager (as does any on `priority`)."""
    report = digest.email_text(notification)
    found = notification.digest
    attributes = {"kind": KIND, "repo": found.repo, "branch": found.branch}
    return {
        "Subject": digest.subject(found, SUBJECT_MAX),
        "Message": json.dumps({"default": json.dumps(notification.body), "email": report}),
        "MessageStructure": "json",
        "MessageAttributes": {k: {"DataType": "String", "StringValue": v} for k, v in attributes.items()},
    }


def per_protocol_message(notification: Notification, max_bytes: int) -> str:
    """The MessageStructure=json Message within `max_bytes`: the webhook body is shortened
    (by `fit`) until it fits once escaped inside the outer JSON next to the email text."""
    email = email_text(notification)
    budget = max_bytes - len(json.dumps(email).encode()) - 64
    while True:
        default = fit(webhook_body(notification), max(budget, 0))
        message = json.dumps({"default": default, "email": email})
        overflow = len(message.encode()) - max_bytes
        if overflow <= 0 or budget <= 0:
            return message
        budget -= overflow + 1024  # escaping grew it: shrink the body by at least that much


# Publish errors that refuse the message itself (a parameter SNS will never take): recorded
# as rejected, not retried. Every other error (throttling, a topic, key or permission to fix,
# SNS's own failure, the network) is retried at the next tick.
REJECTED_ERROR_CODES = frozenset({"InvalidParameter", "ParameterValueInvalid", "ValidationException"})


@dataclass
class SnsChannel:
    """A topic gets every alert its route picks; subscribers filter further, with
    subscription filter policies on the message attributes."""

    name: str
    topic_arn: str
    region: str
    route: Route
    endpoint_url: str | None = None  # set only against a local emulation
    client: Any = field(default=None, repr=False)  # boto3's SNS client, made at the first send

    def accepts(self, labels: dict[str, str]) -> bool:
        return self.route(labels)

    def send(self, notification: Notification) -> None:
        self._publish(publish_arguments(notification))

    def send_digest(self, notification: DigestNotification) -> None:
        self._publish(digest_publish_arguments(notification))

    def _publish(self, arguments: dict[str, Any]) -> None:
        if self.client is None:
            self.client = _sns_client(self.region, self.endpoint_url)
        try:
            self.client.publish(TopicArn=self.topic_arn, **arguments)
        except Exception as err:  # botocore's ClientError and connection errors alike
            failed = ChannelRejected if _error_code(err) in REJECTED_ERROR_CODES else ChannelError
            raise failed(f"SNS publish to {self.topic_arn} failed: {err}") from err


def _error_code(err: Exception) -> str:
    """A botocore ClientError's AWS error code (its documented `response`); empty for others."""
    response = getattr(err, "response", None)
    error = response.get("Error") if isinstance(response, dict) else None
    return str(error.get("Code", "")) if isinstance(error, dict) else ""


@dataclass(frozen=True, kw_only=True)
class SnsReceiver(ReceiverConfig):
    """`type: sns`: publishes to `topic_arn` (in the topic's own region), through
    `endpoint_url` when given (an SNS emulation); with `digest`, the daily digest too."""

    topic_arn: str
    endpoint_url: str | None = None
    digest: bool = False

    CHECKS: ClassVar[dict[str, Check]] = {
        **ReceiverConfig.CHECKS,
        "topic_arn": _pattern(_TOPIC_ARN),
        "endpoint_url": _optional(_nonempty),
        "digest": _boolean,
    }

    def takes_digest(self) -> bool:
        return self.digest

    def log_name(self) -> str:
        return f"sns:{self.topic_arn.split(':')[5]}"

    def channel(self, name: str, route: Route, resolve: Resolve) -> SnsChannel:
        region = self.topic_arn.split(":")[3]
        return SnsChannel(name, self.topic_arn, region, route, self.endpoint_url)


@dataclass(frozen=True, kw_only=True)
class TopicReceiver(ReceiverConfig):
    """`type: topic`: the stack's own topic (output AlertTopicArn) as configured: only the
    alerts its `matchers` pick, the daily digest unless `digest: false`, nothing at all with
    `enabled: false`. Without such an entry the topic takes every alert and digest."""

    digest: bool = True
    enabled: bool = True

    CHECKS: ClassVar[dict[str, Check]] = {
        **ReceiverConfig.CHECKS,
        "digest": _boolean,
        "enabled": _boolean,
    }

    def takes_digest(self) -> bool:
        return self.enabled and self.digest

    def takes_alerts(self) -> bool:
        return self.enabled

    def at(self, topic_arn: str, endpoint_url: str | None) -> StackTopic:
        """The topic's receiver, once the notifier's TOPIC_ARN is known."""
        return StackTopic(
            topic_arn=topic_arn, endpoint_url=endpoint_url, matchers=self.matchers, digest=self.digest
        )


@dataclass(frozen=True, kw_only=True)
class StackTopic(SnsReceiver):
    """The stack's own topic (the notifier's TOPIC_ARN): its log and its messages' `receiver`
    keep the name the API gives it."""

    type: str = STACK_TOPIC
    digest: bool = True

    def log_name(self) -> str:
        return RECEIVER


@functools.cache
def _sns_client(region: str, endpoint: str | None) -> Any:
    """One SNS client per warm container (a channel is made per invocation)."""
    import boto3

    return boto3.client("sns", region_name=region, endpoint_url=endpoint)
