"""The PagerDuty receiver against the Events API v2 stand-in: the events it sends (trigger,
resolve, change events), their fields and limits, and PagerDuty's answers (202; 400 refused
for good; 429 and 5xx retried); and the stand-in answering as PagerDuty does."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from trunkwatch.app.receivers import receiver_channels
from trunkwatch.channels import RECEIVER_TYPES
from trunkwatch.channels.base import ChannelError, ChannelRejected, Notification
from trunkwatch.channels.pagerduty import PagerDutyChannel, alert_event, severity
from trunkwatch.domain.alerts import Alert, CommitSummary, FailingJob
from trunkwatch.domain.config import ConfigError
from trunkwatch.domain.config import receiver_config as read_receiver
from trunkwatch_local.receiver_servers import PagerDutyServer

START = datetime(2026, 11, 18, 18, 0, tzinfo=UTC)
KEY = "test-routing-key-not-a-secret-00"  # 32 characters, as an integration key
API = "http://127.0.0.1:9093"
TRUNK_LABELS = {
    "alertname": "TrunkBroken",
    "repo": "pytorch/pytorch",
    "branch": "main",
    "priority": "P2",
    "team": "ci-oncall",
}
JOB_LABELS = {**TRUNK_LABELS, "alertname": "TrunkJobFailing", "priority": "P3", "job": "pull / a"}
LINKS = {
    "runbook_url": f"{API}/runbook#trunkbroken",
    "silence_url": f"{API}/#/silences/new?filter=x",
}
TRUNK_ANNOTATIONS = {"summary": "HUD is broken - 3 commits in a row (<=5 jobs failing)", **LINKS}
JOB_ANNOTATIONS = {
    "summary": "pull / a failing on pytorch/pytorch (3 commits in a row)",
    "failure_lines": "error: x is not fast\nat line 3",
    **LINKS,
}
COMMIT_URL = "https://github.com/pytorch/pytorch/commit/0123456789abcdef0123"
PR_URL = "https://github.com/pytorch/pytorch/pull/4242"
CULPRIT = CommitSummary(
    "0123456789abcdef0123", "Make x faster", 4242, "octocat", START - timedelta(hours=1), COMMIT_URL, PR_URL
)
HUD = "https://hud.pytorch.org/hud/pytorch/pytorch/main"
FAILING = FailingJob(
    3, CommitSummary("0123456789abcdef", "Make x faster", 4242, "octocat", START), "confirmed"
)


def note(
    labels: dict[str, str] = TRUNK_LABELS,
    annotations: dict[str, str] = TRUNK_ANNOTATIONS,
    status: str = "firing",
    reason: str = "firing",
    jobs: tuple[str, ...] = ("pull / a", "pull / b"),
    failing: FailingJob | None = None,
) -> Notification:
    """A trunk-level alert failing on `jobs`, or a job alert failing as `failing` says."""
    alert = Alert(
        dict(labels),
        dict(annotations),
        starts_at=START,
        ends_at=START + timedelta(hours=1) if status == "resolved" else None,
        generator_url=HUD,
        jobs=dict.fromkeys(jobs, FAILING),
        failing=failing,
    )
    return Notification(alert, status, reason, API, "pagerduty:test")


def job_note(verdict: str = "", why: str = "", reason: str = "firing") -> Notification:
    """The job alert of `pull / a`, failing 3 commits in a row since CULPRIT (`verdict`, `why`)."""
    return note(
        JOB_LABELS, JOB_ANNOTATIONS, reason=reason, jobs=(), failing=FailingJob(3, CULPRIT, verdict, why)
    )


@pytest.fixture
def pagerduty() -> Iterator[PagerDutyServer]:
    server = PagerDutyServer()
    yield server
    server.stop()


def everything(labels: dict[str, str]) -> bool:
    return True


def channel(server: PagerDutyServer, key: str = KEY, change_events: bool = False) -> PagerDutyChannel:
    return PagerDutyChannel("pagerduty:test", server.url, lambda: key, everything, change_events, timeout_s=5)


def receiver(data: dict[str, Any]) -> Any:
    return read_receiver({"type": "pagerduty", **data}, RECEIVER_TYPES)


def test_a_firing_trunk_level_alert_triggers_with_its_fingerprint_and_jobs(
    pagerduty: PagerDutyServer,
) -> None:
    sent = note()
    channel(pagerduty).send(sent)
    (request,) = pagerduty.requests
    assert (request.method, request.path) == ("POST", "/v2/enqueue")
    (event,) = pagerduty.events
    assert event == {
        "routing_key": KEY,
        "event_action": "trigger",
        "dedup_key": sent.alert.fingerprint,
        "payload": {
            "summary": f"TrunkBroken on pytorch/pytorch@main: {TRUNK_ANNOTATIONS['summary']}",
            "source": "pytorch/pytorch@main",
            "severity": "error",
            "timestamp": "2026-11-18T18:00:00.000Z",
            "component": "TrunkBroken",
            "group": "ci-oncall",
            "class": "TrunkBroken",
            "custom_details": {
                "alertname": "TrunkBroken",
                "notification_reason": "firing",
                "fingerprint": sent.alert.fingerprint,
                "failing_jobs": [
                    {
                        "job": job,
                        "streak": 3,
                        "culprit": "0123456789ab",
                        "author": "octocat",
                        "pr": 4242,
                        "verdict": "culprit confirmed by reruns",
                    }
                    for job in ("pull / a", "pull / b")
                ],
            },
        },
        "client": "trunkwatch",
        "client_url": API,
        "links": [
            {"href": HUD, "text": "The trunk"},
            {"href": LINKS["runbook_url"], "text": "Runbook"},
            {"href": LINKS["silence_url"], "text": "Silence it"},
        ],
    }
    assert pagerduty.alerts[sent.alert.fingerprint].status == "triggered"


def test_a_job_alert_details_its_culprit_verdict_streak_and_lines(pagerduty: PagerDutyServer) -> None:
    sent = job_note("confirmed", "3 of 3 reruns")
    channel(pagerduty).send(sent)
    (event,) = pagerduty.events
    payload = event["payload"]
    assert (payload["severity"], payload["component"]) == ("warning", "pull / a")
    assert payload["custom_details"] == {
        "alertname": "TrunkJobFailing",
        "notification_reason": "firing",
        "fingerprint": sent.alert.fingerprint,
        "culprit": {
            "sha": "0123456789abcdef0123",
            "pr": "4242",
            "title": "Make x faster",
            "author": "octocat",
            "url": COMMIT_URL,
        },
        "verdict": "culprit confirmed by reruns",
        "verdict_reason": "3 of 3 reruns",
        "streak": 3,
        "failing_jobs": [{"job": "pull / a", "streak": 3}],
        "failure_lines": ["error: x is not fast", "at line 3"],
    }
    assert event["links"][:2] == [
        {"href": PR_URL, "text": "Culprit PR #4242"},
        {"href": COMMIT_URL, "text": "Culprit commit 0123456789ab"},
    ]


def test_a_suspect_reruns_cleared_is_no_culprit_and_gets_no_culprit_link() -> None:
    event = alert_event(job_note("environmental"), KEY)
    details = event["payload"]["custom_details"]
    assert "culprit" not in details
    assert details["suspect"] == {"sha": "0123456789abcdef0123", "pr": "4242", "title": "Make x faster"}
    assert details["verdict"].startswith("environmental")
    assert not any(link["text"].startswith("Culprit") for link in event["links"])


@pytest.mark.parametrize(
    ("priority", "expected"), [("P1", "critical"), ("P2", "error"), ("P3", "warning"), ("none", "info")]
)
def test_severity_follows_the_priority(priority: str, expected: str) -> None:
    assert severity(priority) == expected


def test_a_long_summary_is_cut_to_pagerdutys_1024_characters(pagerduty: PagerDutyServer) -> None:
    long = {**TRUNK_ANNOTATIONS, "summary": "x" * 3000}
    channel(pagerduty).send(note(annotations=long))
    (event,) = pagerduty.events  # accepted: the stand-in refuses a summary over 1,024
    summary = event["payload"]["summary"]
    assert len(summary) == 1024 and summary.endswith("...")


def test_a_resolution_resolves_the_alert_of_the_same_dedup_key(pagerduty: PagerDutyServer) -> None:
    sender = channel(pagerduty)
    sender.send(note())
    sender.send(note(reason="reminder"))
    sender.send(note(status="resolved", reason="resolved"))
    fingerprint = note().alert.fingerprint
    assert pagerduty.actions(fingerprint) == ["trigger", "trigger", "resolve"]
    assert pagerduty.events[-1] == {"routing_key": KEY, "event_action": "resolve", "dedup_key": fingerprint}
    assert pagerduty.alerts[fingerprint].status == "resolved"


def test_a_refused_event_is_rejected_for_good_saying_why_without_the_key(pagerduty: PagerDutyServer) -> None:
    wrong = "not-an-integration-key"
    with pytest.raises(ChannelRejected) as raised:
        channel(pagerduty, key=wrong).send(note())
    said = str(raised.value)
    assert said.startswith("PagerDuty receiver pagerduty:test answered 400: Event object is invalid (")
    assert "routing_key must be the integration's 32-character key" in said
    assert wrong not in said and pagerduty.events == []


@pytest.mark.parametrize("status", [429, 500, 503])
def test_a_throttled_or_failing_pagerduty_is_retried_not_rejected(
    pagerduty: PagerDutyServer, status: int
) -> None:
    pagerduty.fail_next(1, status)
    with pytest.raises(ChannelError) as raised:
        channel(pagerduty).send(note())
    assert not isinstance(raised.value, ChannelRejected)
    assert f"answered {status}" in str(raised.value) and KEY not in str(raised.value)
    channel(pagerduty).send(note())  # the retry goes through
    assert len(pagerduty.events) == 1


def test_no_answer_is_a_channel_error() -> None:
    sender = PagerDutyChannel("pagerduty:test", "http://127.0.0.1:9", lambda: KEY, everything, timeout_s=2)
    with pytest.raises(ChannelError) as raised:
        sender.send(note())
    assert not isinstance(raised.value, ChannelRejected) and KEY not in str(raised.value)


def test_a_confirmed_culprit_also_goes_out_as_a_change_event_once(pagerduty: PagerDutyServer) -> None:
    sender = channel(pagerduty, change_events=True)
    sender.send(job_note("confirmed", reason="update; culprit confirmed"))
    sender.send(job_note("confirmed", reason="reminder"))
    sender.send(job_note("pending"))
    assert [r.path for r in pagerduty.requests] == [
        "/v2/enqueue",
        "/v2/change/enqueue",
        "/v2/enqueue",
        "/v2/enqueue",
    ]
    (change,) = pagerduty.changes
    assert change["routing_key"] == KEY and "event_action" not in change
    assert change["payload"]["summary"] == (
        "Culprit confirmed by reruns: 0123456789ab #4242 by octocat broke pull / a on pytorch/pytorch@main"
    )
    assert (change["payload"]["source"], change["payload"]["timestamp"]) == (
        "pytorch/pytorch@main",
        "2026-11-18T17:00:00.000Z",
    )
    assert change["links"][0]["href"] == PR_URL


def test_change_events_are_off_unless_asked_for(pagerduty: PagerDutyServer) -> None:
    channel(pagerduty).send(job_note("confirmed", reason="update; culprit confirmed"))
    assert pagerduty.changes == [] and len(pagerduty.events) == 1


# --- configuration --------------------------------------------------------------------------


def test_the_routing_key_is_read_from_where_it_is_kept_when_sending(
    pagerduty: PagerDutyServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRUNKWATCH_TEST_PD_KEY", KEY)
    config = receiver({"routing_key": {"env": "TRUNKWATCH_TEST_PD_KEY"}, "url": pagerduty.url + "/"})
    (sender,) = receiver_channels([config])
    assert sender.name == "pagerduty:env:TRUNKWATCH_TEST_PD_KEY"
    sender.send(note())
    assert pagerduty.events[0]["routing_key"] == KEY


def test_a_literal_routing_key_names_the_log_by_a_digest_and_the_url_defaults_to_pagerduty() -> None:
    config = receiver({"routing_key": KEY})
    assert config.url == "https://events.pagerduty.com" and config.change_events is False
    assert config.log_name().startswith("pagerduty:") and KEY not in config.log_name()


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        ({}, "routing_key: Field required"),
        ({"routing_key": KEY, "url": "events.pagerduty.com"}, "url: String should match pattern"),
        ({"routing_key": KEY, "change_events": "yes"}, "change_events: Input should be a valid boolean"),
        ({"routing_key": 42}, "routing_key: Input should be a string or an object like {secret: name}"),
    ],
)
def test_a_bad_pagerduty_receiver_is_one_line_naming_the_key(data: dict[str, Any], problem: str) -> None:
    with pytest.raises((ConfigError, ValueError)) as raised:
        receiver(data)
    assert problem in str(raised.value)


# --- the stand-in ---------------------------------------------------------------------------


def post(server: PagerDutyServer, event: Any, path: str = "/v2/enqueue") -> tuple[int, dict[str, Any]]:
    import urllib.error
    import urllib.request

    request = urllib.request.Request(  # noqa: S310 - the stand-in on 127.0.0.1
        server.url + path, data=json.dumps(event).encode(), headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=5) as answer:  # noqa: S310
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def test_the_stand_in_answers_202_with_the_dedup_key_and_makes_one_up_for_a_trigger_without() -> None:
    server = PagerDutyServer()
    try:
        trigger = {
            "routing_key": KEY,
            "event_action": "trigger",
            "payload": {"summary": "s", "source": "x", "severity": "info"},
        }
        status, body = post(server, {**trigger, "dedup_key": "abc"})
        assert (status, body) == (
            202,
            {"status": "success", "message": "Event processed", "dedup_key": "abc"},
        )
        status, body = post(server, trigger)
        assert status == 202 and body["dedup_key"] and body["dedup_key"] != "abc"
        # An acknowledge or a resolve of no open alert is taken and dropped, as PagerDuty does.
        assert post(server, {"routing_key": KEY, "event_action": "resolve", "dedup_key": "zzz"})[0] == 202
        assert "zzz" not in server.alerts
        post(server, {"routing_key": KEY, "event_action": "acknowledge", "dedup_key": "abc"})
        post(server, {**trigger, "dedup_key": "abc"})  # a trigger leaves it acknowledged
        assert server.alerts["abc"].status == "acknowledged"
    finally:
        server.stop()


@pytest.mark.parametrize(
    ("event", "error"),
    [
        ([1, 2], "the body must be a JSON object"),
        ({"routing_key": "short", "event_action": "resolve", "dedup_key": "k"}, "routing_key must be"),
        ({"routing_key": KEY, "event_action": "page", "dedup_key": "k"}, "event_action must be one of"),
        ({"routing_key": KEY, "event_action": "resolve"}, "dedup_key is required to resolve"),
        ({"routing_key": KEY, "event_action": "trigger"}, "payload is required to trigger"),
        (
            {
                "routing_key": KEY,
                "event_action": "trigger",
                "payload": {"summary": "s", "source": "x", "severity": "high"},
            },
            "payload.severity must be one of critical, error, warning, info",
        ),
        (
            {
                "routing_key": KEY,
                "event_action": "trigger",
                "payload": {"summary": "s" * 1025, "source": "x", "severity": "info"},
            },
            "payload.summary is longer than 1024 characters",
        ),
        (
            {"routing_key": KEY, "event_action": "resolve", "dedup_key": "k" * 256},
            "dedup_key must be a string",
        ),
        (
            {"routing_key": KEY, "event_action": "resolve", "dedup_key": "k", "links": [{"text": "t"}]},
            "'href'",
        ),
    ],
)
def test_the_stand_in_refuses_what_pagerduty_refuses_with_400(event: Any, error: str) -> None:
    server = PagerDutyServer()
    try:
        status, body = post(server, event)
    finally:
        server.stop()
    assert (status, body["status"], body["message"]) == (400, "invalid event", "Event object is invalid")
    assert any(error in said for said in body["errors"]) and server.events == []


def test_the_stand_in_throttles_a_routing_key_past_its_limit_within_a_minute_of_its_clock() -> None:
    now = [START]
    server = PagerDutyServer(limit=2, clock=lambda: now[0])
    resolve = {"routing_key": KEY, "event_action": "resolve", "dedup_key": "k"}
    try:
        assert [post(server, resolve)[0] for _ in range(3)] == [202, 202, 429]
        assert post(server, {**resolve, "routing_key": "another-routing-key-not-secret-0"})[0] == 202
        now[0] += timedelta(seconds=61)
        assert post(server, resolve)[0] == 202
    finally:
        server.stop()
    assert server.throttled == 1 and len(server.events) == 4
