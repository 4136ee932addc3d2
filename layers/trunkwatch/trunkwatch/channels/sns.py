"""The SNS topic: every alert, with message attributes subscribers filter on."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from trunkwatch.channels.base import ChannelError, Notification
from trunkwatch.channels.webhook import fit, subject, webhook_body
from trunkwatch.domain.alerts import RECEIVER

SUBJECT_MAX = 99  # SNS wants subjects under 100 characters
SNS_MAX_BYTES = 256 * 1024
ROOM_FOR_SUBJECT_AND_ATTRIBUTES = 4096


def publish_arguments(notification: Notification) -> dict[str, Any]:
    """The SNS Publish arguments: Subject, Message (webhook JSON), MessageAttributes."""
    alert = notification.alert
    attributes = {
        "alertname": alert.name,
        "priority": alert.labels["priority"],
        "status": notification.status,
        "repo": alert.labels["repo"],
        "team": alert.labels["team"],
        "fingerprint": alert.fingerprint,
    }
    return {
        "Subject": subject(notification, SUBJECT_MAX),
        "Message": fit(webhook_body(notification), SNS_MAX_BYTES - ROOM_FOR_SUBJECT_AND_ATTRIBUTES),
        "MessageAttributes": {k: {"DataType": "String", "StringValue": v} for k, v in attributes.items()},
    }


@dataclass
class SnsChannel:
    topic_arn: str
    name: str = RECEIVER
    _client: Any = field(default=None, repr=False)

    def accepts(self, labels: dict[str, str]) -> bool:
        return True  # subscribers filter with subscription filter policies on the attributes

    def send(self, notification: Notification) -> None:
        if self._client is None:
            import boto3

            self._client = boto3.client("sns")
        try:
            self._client.publish(TopicArn=self.topic_arn, **publish_arguments(notification))
        except Exception as err:  # botocore's ClientError and connection errors alike
            raise ChannelError(f"SNS publish to {self.topic_arn} failed: {err}") from err
