"""Notifications (SPEC 4): what is due, how the message reads, and routing by attributes."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest

from trunkwatch.channels.base import Notification
from trunkwatch.channels.sns import SNS_MAX_BYTES, SUBJECT_MAX, publish_arguments
from trunkwatch.channels.webhook import subject
from trunkwatch.domain import alerts
from trunkwatch.domain.alerts import RECEIVER, Alert, AlertView
from trunkwatch.domain.dedup import Decision, LogState, decide


def message(view: AlertView, decision: Decision, external_url: str) -> dict[str, Any]:
    return publish_arguments(
        Notification(view.alert, decision.status, decision.reason, external_url, RECEIVER)
    )


NOW = datetime(2026, 11, 18, 20, 0, tzinfo=UTC)
HOUR = timedelta(hours=1)


def view(
    status: str = "firing",
    silenced: list[str] | None = None,
    inhibited: list[str] | None = None,
    jobs: dict[str, str] | None = None,
    summary: str = "pull / x failing",
    team: str = "ci-oncall",
) -> AlertView:
    labels = {
        "alertname": "TrunkJobFailing",
        "repo": "pytorch/pytorch",
        "branch": "main",
        "priority": "P3",
        "team": team,
        "job": "pull / x",
        "workflow": "pull",
    }
    alert = Alert(
        labels,
        {"summary": summary, "culprit_sha": "abc"},
        starts_at=NOW - 2 * HOUR,
        ends_at=NOW if status == "resolved" else None,
        generator_url="https://hud/x",
        jobs=jobs or {},
    )
    return AlertView(alert, "pytorch/pytorch#main", silenced or [], inhibited or [])


FIRED = LogState(last_status="firing", last_sent_at=NOW - HOUR)


@pytest.mark.parametrize(
    ("alert", "log", "expected"),
    [
        (view(), LogState(), Decision("firing", "firing")),
        (view(), FIRED, None),  # already sent, reminder not due
        (view(), LogState("firing", NOW - 4 * HOUR), Decision("firing", "reminder")),
        (view(silenced=["s1"]), LogState(), None),  # held while silenced
        (view(inhibited=["fp"]), LogState(), None),  # held while inhibited
        (view(), LogState(held_by=("silence s1",)), Decision("firing", "silence s1 expired")),
        (view(), LogState(held_by=("inhibited by fp",)), Decision("firing", "inhibition ended")),
        (view("resolved"), FIRED, Decision("resolved", "resolved")),
        (view("resolved"), LogState(), None),  # never sent as firing: nothing to resolve
        (view("resolved", silenced=["s1"]), FIRED, None),  # held until the silence ends
    ],
)
def test_decisions(alert: AlertView, log: LogState, expected: Decision | None) -> None:
    assert decide(alert, log, NOW, 4 * HOUR) == expected


def test_repeat_interval_zero_disables_reminders() -> None:
    assert decide(view(), LogState("firing", NOW - 100 * HOUR), NOW, timedelta(0)) is None


def test_trunk_alert_update_names_jobs_that_started_and_stopped() -> None:
    trunk = view(jobs={"a": "3 commits", "c": "3 commits"})
    log = LogState("firing", NOW - HOUR, jobs=("a", "b"))
    assert decide(trunk, log, NOW, 4 * HOUR) == Decision(
        "firing", "update; started failing: c; stopped failing: b"
    )


def test_message_is_an_alertmanager_webhook() -> None:
    published = message(view(), Decision("firing", "firing"), "http://api")
    body = json.loads(published["Message"])
    assert body["version"] == "4" and body["status"] == "firing" and body["notification_reason"] == "firing"
    assert set(body) >= {
        "receiver",
        "groupKey",
        "groupLabels",
        "commonLabels",
        "commonAnnotations",
        "externalURL",
        "alerts",
    }
    (entry,) = body["alerts"]
    assert set(entry) == {
        "status",
        "labels",
        "annotations",
        "startsAt",
        "endsAt",
        "generatorURL",
        "fingerprint",
    }
    assert entry["fingerprint"] == alerts.fingerprint(entry["labels"])
    assert entry["endsAt"] == "0001-01-01T00:00:00Z"
    attributes = {k: v["StringValue"] for k, v in published["MessageAttributes"].items()}
    assert attributes == {
        "alertname": "TrunkJobFailing",
        "priority": "P3",
        "status": "firing",
        "repo": "pytorch/pytorch",
        "team": "ci-oncall",
        "fingerprint": entry["fingerprint"],
    }
    assert published["Subject"] == "[FIRING:1] pull / x failing"


def test_subject_is_short_and_on_one_line() -> None:
    text = subject(
        Notification(view(summary="x\n" * 200).alert, "resolved", "resolved", "", RECEIVER), SUBJECT_MAX
    )
    assert text.startswith("[RESOLVED] x x") and len(text) <= 100 and "\n" not in text


def test_oversized_body_is_truncated_not_rejected() -> None:
    big = view(summary="s")
    big.alert.annotations["failure_lines"] = "E" * (400 * 1024)
    published = message(big, Decision("firing", "firing"), "")
    assert len(published["Message"].encode()) < SNS_MAX_BYTES
    body = json.loads(published["Message"])
    assert body["alerts"][0]["annotations"]["failure_lines"].endswith("[truncated]")
    assert body["alerts"][0]["annotations"]["culprit_sha"] == "abc"


def test_team_filter_policy_routes_only_that_teams_alerts(aws: dict[str, Any]) -> None:
    sns, sqs = boto3.client("sns"), boto3.client("sqs")
    queue = sqs.create_queue(QueueName="team-a")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    sns.subscribe(
        TopicArn=aws["topic"],
        Protocol="sqs",
        Endpoint=arn,
        Attributes={"FilterPolicy": json.dumps({"team": ["team-a"]})},
    )
    for team in ("team-a", "team-b", "team-a"):
        sns.publish(TopicArn=aws["topic"], **message(view(team=team), Decision("firing", "firing"), ""))
    received = sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10, MessageAttributeNames=["All"])[
        "Messages"
    ]
    teams = [json.loads(m["Body"])["MessageAttributes"]["team"]["Value"] for m in received]
    assert teams == ["team-a", "team-a"]
