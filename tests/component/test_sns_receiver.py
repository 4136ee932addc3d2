"""The SNS receiver against botocore's Stubber (a real client; no request leaves the process),
and the notifier's imports, in a fresh interpreter."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime

import boto3
import pytest
from botocore.stub import Stubber

from trunkwatch.channels.base import ChannelError, ChannelRejected, Notification
from trunkwatch.channels.sns import SnsChannel, publish_arguments
from trunkwatch.domain.alerts import Alert

TOPIC = "arn:aws:sns:us-east-1:123456789012:oncall"
TRUNK_LABELS = {
    "alertname": "TrunkBroken",
    "repo": "pytorch/pytorch",
    "branch": "main",
    "priority": "P2",
    "team": "ci-oncall",
}


def note(labels: dict[str, str]) -> Notification:
    alert = Alert(
        dict(labels), {"summary": "HUD is broken"}, starts_at=datetime(2026, 11, 18, 18, tzinfo=UTC)
    )
    return Notification(alert, "firing", "firing", "http://127.0.0.1:9093", "r")


def stubbed_sns() -> tuple[SnsChannel, Stubber]:
    """An SNS channel whose client answers what the test stubs."""
    client = boto3.client(
        "sns", region_name="us-east-1", aws_access_key_id="testing", aws_secret_access_key="testing"
    )
    return SnsChannel("sns:oncall", TOPIC, "us-east-1", lambda _: True, client=client), Stubber(client)


@pytest.mark.parametrize(
    ("code", "status", "rejected"),
    [
        ("InvalidParameter", 400, True),  # e.g. a subject or an attribute SNS will not take
        ("ParameterValueInvalid", 400, True),
        ("ValidationException", 400, True),
        ("Throttled", 429, False),
        ("InternalError", 500, False),
        ("AuthorizationError", 403, False),  # a permission to grant: what waits goes once granted
        ("NotFound", 404, False),
        ("KMSThrottling", 400, False),
    ],
)
def test_an_sns_publish_refused_for_good_is_told_apart_from_one_worth_retrying(
    code: str, status: int, rejected: bool
) -> None:
    channel, stubber = stubbed_sns()
    stubber.add_client_error("publish", service_error_code=code, http_status_code=status)
    with stubber, pytest.raises(ChannelError) as raised:
        channel.send(note(TRUNK_LABELS))
    assert isinstance(raised.value, ChannelRejected) is rejected and code in str(raised.value)


def test_an_alert_of_no_trunk_is_published_without_empty_attributes() -> None:
    watchdog = note({"alertname": "Watchdog", "priority": "none", "severity": "none"})
    attributes = publish_arguments(watchdog)["MessageAttributes"]
    # SNS refuses an empty attribute value: the Watchdog has no repo and no team.
    assert sorted(attributes) == ["alertname", "fingerprint", "priority", "status"]
    channel, stubber = stubbed_sns()
    stubber.add_response("publish", {"MessageId": "1"}, {"TopicArn": TOPIC, **publish_arguments(watchdog)})
    with stubber:
        channel.send(watchdog)
    stubber.assert_no_pending_responses()


def test_the_notifier_imports_no_receiver_module_until_one_is_configured() -> None:
    code = "import json, sys, trunkwatch.app.settled_tick\nprint(json.dumps(sorted(sys.modules)))"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = set(json.loads(run.stdout))
    assert loaded.isdisjoint(
        {"trunkwatch.channels.slack", "trunkwatch.channels.github_issues", "trunkwatch.app.receivers"}
    )
