"""Notifications (design.md §4): what is due, how the message reads, and routing by attributes."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import boto3
import pytest

from tests.support.alerts import HOUR, NOW, failing, view
from trunkwatch.channels.base import Notification
from trunkwatch.channels.email import email_text
from trunkwatch.channels.sns import SNS_MAX_BYTES, SUBJECT_MAX, SnsReceiver, publish_arguments
from trunkwatch.channels.webhook import subject
from trunkwatch.domain import alerts
from trunkwatch.domain.alerts import RECEIVER, AlertView, FailingJob
from trunkwatch.domain.dedup import DueNotification, LogState, due_notification
from trunkwatch.storage.memory import memory_storage
from trunkwatch.storage.port import Storage


def message(view: AlertView, decision: DueNotification, external_url: str) -> dict[str, Any]:
    return publish_arguments(
        Notification(view.alert, decision.status, decision.reason, external_url, RECEIVER)
    )


FIRED = LogState(last_status="firing", last_sent_at=NOW - HOUR)


@pytest.mark.parametrize(
    ("alert", "log", "expected"),
    [
        (view(), LogState(), DueNotification("firing", "firing")),
        (view(), FIRED, None),  # already sent, reminder not due
        (view(), LogState("firing", NOW - 4 * HOUR), DueNotification("firing", "reminder")),
        (view(silenced=["s1"]), LogState(), None),  # held while silenced
        (view(inhibited=["fp"]), LogState(), None),  # held while inhibited
        (view(), LogState(held_by=("silence s1",)), DueNotification("firing", "silence s1 expired")),
        (view(), LogState(held_by=("inhibited by fp",)), DueNotification("firing", "inhibition ended")),
        (view("resolved"), FIRED, DueNotification("resolved", "resolved")),
        (view("resolved"), LogState(), None),  # never sent as firing: nothing to resolve
        (view("resolved", silenced=["s1"]), FIRED, None),  # held until the silence ends
    ],
)
def test_decisions(alert: AlertView, log: LogState, expected: DueNotification | None) -> None:
    assert due_notification(alert, log, NOW, 4 * HOUR) == expected


def test_repeat_interval_zero_disables_reminders() -> None:
    assert due_notification(view(), LogState("firing", NOW - 100 * HOUR), NOW, timedelta(0)) is None


def test_trunk_alert_update_names_jobs_that_started_and_stopped() -> None:
    trunk = view(jobs={"a": failing(), "c": failing()})
    log = LogState("firing", NOW - HOUR, jobs=("a", "b"))
    assert due_notification(trunk, log, NOW, 4 * HOUR) == DueNotification(
        "firing", "update; started failing: c; stopped failing: b"
    )


def test_a_decided_verdict_is_an_update_of_the_same_alert() -> None:
    judged = view(job=failing())
    judged.alert.failing = dataclasses.replace(failing(), verdict="environmental")
    unconfirmed = LogState("firing", NOW - HOUR, verdict="unconfirmed")
    expected = DueNotification("firing", "update; environmental: the last green commit fails too")
    assert due_notification(judged, unconfirmed, NOW, 4 * HOUR) == expected
    assert (
        due_notification(judged, LogState("firing", NOW - HOUR, verdict="environmental"), NOW, 4 * HOUR)
        is None
    )
    judged.alert.failing = dataclasses.replace(
        failing(), verdict="unconfirmed"
    )  # still waiting: nothing to tell
    assert due_notification(judged, LogState("firing", NOW - HOUR), NOW, 4 * HOUR) is None


def test_trunk_badly_broken_tells_each_inhibited_jobs_decided_verdict() -> None:
    confirmed, flaky = (
        FailingJob(3, failing().culprit, "confirmed"),
        FailingJob(4, failing().culprit, "flaky"),
    )
    trunk = view(jobs={"a": confirmed, "b": flaky, "c": failing()})
    trunk.alert.labels["alertname"] = "TrunkBadlyBroken"  # it holds the jobs' own alerts back
    log = LogState("firing", NOW - HOUR, jobs=("a", "b", "c"), job_verdicts=(("a", "unconfirmed"),))
    assert due_notification(trunk, log, NOW, 4 * HOUR) == DueNotification(
        "firing", "update; culprit confirmed: a; flaky: b"
    )
    trunk.alert.labels["alertname"] = "TrunkBroken"  # the jobs' alerts tell it themselves
    assert due_notification(trunk, log, NOW, 4 * HOUR) is None
    told = LogState(
        "firing", NOW - HOUR, jobs=("a", "b", "c"), job_verdicts=(("a", "confirmed"), ("b", "flaky"))
    )
    assert due_notification(trunk, told, NOW, 4 * HOUR) is None


def webhook(published: dict[str, Any]) -> dict[str, Any]:
    """The webhook body every non-email protocol gets (`default`)."""
    assert published["MessageStructure"] == "json"
    body: dict[str, Any] = json.loads(json.loads(published["Message"])["default"])
    return body


def test_message_is_an_alertmanager_webhook() -> None:
    published = message(view(), DueNotification("firing", "firing"), "http://api")
    body = webhook(published)
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
    published = message(big, DueNotification("firing", "firing"), "")
    assert len(published["Message"].encode()) < SNS_MAX_BYTES
    body = webhook(published)
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
        sns.publish(
            TopicArn=aws["topic"], **message(view(team=team), DueNotification("firing", "firing"), "")
        )
    received = sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10, MessageAttributeNames=["All"])[
        "Messages"
    ]
    teams = [json.loads(m["Body"])["MessageAttributes"]["team"]["Value"] for m in received]
    assert teams == ["team-a", "team-a"]


SHA = "0123456789abcdef0123"
JOB_ANNOTATIONS = {
    "summary": "pull / x failing on pytorch/pytorch (3 commits in a row)",
    "description": "long",
    "culprit_sha": "0123456789abcdef0123",
    "failure_lines": "\n".join(f"E line {i}" for i in range(1, 9)),
    "runbook_url": "https://runbooks/trunk",
    "dashboard_url": "",
    "silence_url": "https://status/silence?fp=1",
}


JOB_FAILING = dataclasses.replace(
    failing(),
    culprit=dataclasses.replace(
        failing().culprit,
        url="https://github.com/pytorch/pytorch/commit/0123456789abcdef0123",
        pr_url="https://github.com/pytorch/pytorch/pull/4242",
    ),
)


def notification(annotations: dict[str, str], jobs: dict[str, FailingJob] | None = None) -> Notification:
    """A trunk-level alert's (with `jobs`), else a job alert's failing as JOB_FAILING says."""
    alert = view(jobs=jobs, job=None if jobs else JOB_FAILING).alert
    alert.annotations.clear()
    alert.annotations.update(annotations)
    return Notification(alert, "firing", "firing", "http://api", RECEIVER)


def test_email_for_a_job_alert_reads_top_down() -> None:
    text = email_text(notification(JOB_ANNOTATIONS))
    lines = text.splitlines()
    assert lines[0] == "FIRING: pull / x failing on pytorch/pytorch (3 commits in a row)"
    assert lines[1].startswith("Since: 2026-11-18T18:00:00")
    assert 'Culprit: 0123456789ab #4242 "Make x faster" by octocat' in lines
    assert "  https://github.com/pytorch/pytorch/pull/4242" in lines
    assert "E line 5" in lines and "E line 6" not in lines  # the first 5 failure lines
    assert "View: https://hud/x" in lines and "Runbook: https://runbooks/trunk" in lines
    assert "Silence: https://status/silence?fp=1" in lines
    assert not any(line.startswith("Dashboard:") for line in lines)  # no value, no line
    assert "Failing:" not in text  # a job alert has no list of jobs
    assert lines[-2:] == ["Source: pytorch/pytorch@main", f"Fingerprint: {view().alert.fingerprint}"]
    assert "Failed on 3 commits in a row" in lines
    assert all(line.strip() or lines[i - 1].strip() for i, line in enumerate(lines))  # no empty sections
    assert "None" not in text and ": \n" not in text


def test_email_for_a_trunk_level_alert_lists_the_jobs() -> None:
    broken = {"summary": "HUD is broken"}
    one = email_text(notification(broken, {"pull / a": failing()}))
    culprit = "  culprit 0123456789ab #4242 by octocat, 3 commits in a row\n"
    assert "Failing: 1 job\n- pull / a\n" + culprit in one
    two = email_text(notification(broken, {"pull / a": failing(), "pull / b": failing(1)}))
    assert "Failing: 2 jobs\n- pull / a\n" + culprit + "- pull / b\n" in two
    for text in (one, two):
        assert text.startswith("FIRING: HUD is broken\n")
        assert "Runbook" not in text and "First failure lines" not in text


ODD_TITLES = [
    'it\'s "quoted" (#1) by x at 2026-11-18T18:00:00Z',  # both quotes, and what follows a title
    "back\\slash \\' and a new\nline",
    "- lint: 4 commits, culprit deadbeef0000 'x' by y at z",  # a job's line of the description
    "",
    "ünïcödé \u2028 \t tab",
]


@pytest.mark.parametrize("title", ODD_TITLES)
def test_each_jobs_culprit_and_streak_travel_as_data_whatever_the_title(title: str) -> None:
    """The culprit's title is never read back from the description, so no title can lose it."""
    jobs = {"lint": failing(4, title, 77, "bob"), "lint: 1": failing(1, title, None, "")}
    description = "2 jobs failing:\n" + "\n".join(f"- {job}: {f.detail()}" for job, f in jobs.items())
    text = email_text(notification({"summary": "HUD is broken", "description": description}, jobs))
    assert (
        "Failing: 2 jobs\n"
        "- lint\n  culprit 0123456789ab #77 by bob, 4 commits in a row\n"
        "- lint: 1\n  culprit 0123456789ab by unknown, 1 commit in a row\n\n"
    ) in text
    logged = {job: FailingJob.from_data(json.loads(json.dumps(f.as_data()))) for job, f in jobs.items()}
    assert logged == jobs  # as the notification log keeps them, for a resolution sent from it


def test_a_jobs_line_in_the_description_names_its_culprit_as_before() -> None:
    assert failing(4, 'it\'s "quoted"', 77, "bob").detail() == (
        "4 commits, culprit 0123456789ab 'it\\'s \"quoted\"' (#77) by bob at 2026-11-18T17:00:00.000Z"
    )
    assert (
        failing(1, "t", None, "").detail()
        == "1 commits, culprit 0123456789ab 't' by unknown at 2026-11-18T17:00:00.000Z"
    )


def test_publish_delivers_the_webhook_to_sqs_and_the_text_under_email(aws: dict[str, Any]) -> None:
    sqs = boto3.client("sqs")
    sent = notification(JOB_ANNOTATIONS)
    topic = SnsReceiver(type="sns", topic_arn=aws["topic"])
    topic.channel(RECEIVER, lambda labels: True, lambda ref: None).send(sent)
    (received,) = sqs.receive_message(QueueUrl=aws["queue"], MaxNumberOfMessages=10)["Messages"]
    envelope = json.loads(received["Body"])
    body = json.loads(envelope["Message"])  # sqs falls back to `default`: the webhook JSON
    assert body["version"] == "4"
    assert body["alerts"][0]["annotations"]["culprit_sha"] == SHA
    published = json.loads(publish_arguments(sent)["Message"])
    assert set(published) == {"default", "email"}
    assert published["email"] == email_text(sent)


def test_oversized_publish_with_email_stays_under_the_limit() -> None:
    big = notification({**JOB_ANNOTATIONS, "description": '"quoted" ' * 40000, "failure_lines": "E" * 300000})
    published = publish_arguments(big)
    assert len(published["Message"].encode()) <= SNS_MAX_BYTES
    structured = json.loads(published["Message"])
    assert json.loads(structured["default"])["alerts"][0]["annotations"]["culprit_sha"] == SHA
    assert structured["email"].startswith("FIRING: ")


def test_a_resolution_sent_from_the_log_names_each_jobs_culprit(
    aws: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A trunk-level alert that stopped firing is resolved from its notification log entry:
    each job's streak and culprit come back from it as data, whatever the culprit's title."""
    from trunkwatch.app import notify
    from trunkwatch.app.settings import Settings
    from trunkwatch.domain.alerts import Links
    from trunkwatch.domain.clock import SimulatedClock
    from trunkwatch.domain.config import RuleConfig, TrunkConfig

    level = view(
        jobs={job: failing(4, title, 77, "bob") for job, title in zip("abcde", ODD_TITLES, strict=True)}
    )
    del level.alert.labels["job"]
    level.alert.labels.update(alertname="TrunkBroken")
    sent: list[Notification] = []

    class Capture:
        name = "capture"

        def accepts(self, labels: dict[str, str]) -> bool:
            return True

        def send(self, notification: Notification) -> None:
            sent.append(notification)

    def tick(views: list[AlertView], now: datetime) -> None:
        monkeypatch.setattr(notify, "trunk_views", lambda *args, **kwargs: views)
        settings = Settings.from_environ([])
        tick = notify.Tick(
            aws["storage"],
            TrunkConfig(repo="pytorch/pytorch"),
            RuleConfig(),
            Links("http://api"),
            now,
            SimulatedClock(now),
            settings,
            lambda: 60.0,
        )
        notify.notify_trunk(tick, [], [Capture()])

    tick([level], NOW)
    tick([], NOW + HOUR)  # no longer firing: only the log knows it
    firing, resolved = sent
    assert (firing.status, resolved.status) == ("firing", "resolved")
    assert resolved.alert.fingerprint == firing.alert.fingerprint
    assert resolved.alert.jobs == level.alert.jobs
    assert "- a\n  culprit 0123456789ab #77 by bob, 4 commits in a row\n" in email_text(resolved)


def test_a_delivery_left_in_progress_by_a_dead_invocation_blocks_only_its_own_budget(
    aws: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    from trunkwatch.app import notify
    from trunkwatch.app.settings import Settings
    from trunkwatch.domain.alerts import Links
    from trunkwatch.domain.clock import SimulatedClock
    from trunkwatch.domain.config import RuleConfig, TrunkConfig

    class Died(BaseException):  # what ends a Lambda mid-call: nothing catches it
        pass

    clock = SimulatedClock(NOW)
    sent: list[datetime] = []

    class Receiver:
        name = "receiver"

        def accepts(self, labels: dict[str, str]) -> bool:
            return True

        def send(self, notification: Notification) -> None:
            sent.append(clock.now())
            if len(sent) == 1:
                raise Died  # the message went out; the invocation died before recording it

    monkeypatch.setattr(notify, "trunk_views", lambda *args, **kwargs: [view()])

    def tick(at: datetime) -> notify.TickResult:
        clock.set(at)
        settings = Settings.from_environ([])
        tick = notify.Tick(
            aws["storage"],
            TrunkConfig(repo="pytorch/pytorch"),
            RuleConfig(),
            Links("http://api"),
            at,
            clock,
            settings,
            lambda: 60.0,
        )
        return notify.notify_trunk(tick, [], [Receiver()])

    with pytest.raises(Died):
        tick(NOW)
    within_budget = tick(NOW + timedelta(seconds=notify.DELIVERY_BUDGET_S - 1))
    assert (within_budget.deferred, within_budget.failed, within_budget.sent) == (1, 0, [])
    after_budget = tick(NOW + timedelta(seconds=notify.DELIVERY_BUDGET_S))
    assert [row["status"] for row in after_budget.sent] == ["firing"]
    assert not tick(NOW + timedelta(minutes=1)).sent  # confirmed sent: never again
    # Sent twice: the one duplicate a publish hidden by a crash costs, and no more.
    assert sent == [NOW, NOW + timedelta(seconds=notify.DELIVERY_BUDGET_S)]


@pytest.fixture(params=["memory", "dynamodb"])
def store(request: pytest.FixtureRequest) -> Storage:
    if request.param == "memory":
        return memory_storage()
    stored: Storage = request.getfixturevalue("aws")["storage"]
    return stored


class _Receiver:
    """Takes every alert; `during_send` runs inside its first send (another invocation)."""

    name = "receiver"

    def __init__(self) -> None:
        self.sent: list[str] = []
        self.during_send: Callable[[], None] | None = None

    def accepts(self, labels: dict[str, str]) -> bool:
        return True

    def send(self, notification: Notification) -> None:
        self.sent.append(notification.status)
        if self.during_send is not None:
            during, self.during_send = self.during_send, None
            during()


def _tick(storage: Storage, receiver: _Receiver, at: datetime = NOW) -> Any:
    from trunkwatch.app import notify
    from trunkwatch.app.settings import Settings
    from trunkwatch.domain.alerts import Links
    from trunkwatch.domain.clock import SimulatedClock
    from trunkwatch.domain.config import RuleConfig, TrunkConfig

    trunk, settings = TrunkConfig(repo="pytorch/pytorch"), Settings.from_environ([])
    tick = notify.Tick(
        storage, trunk, RuleConfig(), Links("http://api"), at, SimulatedClock(at), settings, lambda: 60.0
    )
    return notify.notify_trunk(tick, [], [receiver])


def test_a_tick_meeting_a_delivery_under_way_leaves_it_to_that_delivery(
    store: Storage, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two invocations on one transition: the second runs while the first is sending."""
    from trunkwatch.app import notify

    monkeypatch.setattr(notify, "trunk_views", lambda *args, **kwargs: [view()])
    receiver = _Receiver()
    concurrent: list[Any] = []
    receiver.during_send = lambda: concurrent.append(_tick(store, receiver, NOW + timedelta(seconds=1)))
    first = _tick(store, receiver)
    assert [row["status"] for row in first.sent] == ["firing"]
    assert (concurrent[0].deferred, concurrent[0].sent) == (1, [])
    assert receiver.sent == ["firing"]  # once
    assert not _tick(store, receiver, NOW + timedelta(minutes=1)).sent


def test_a_tick_that_read_the_log_before_another_delivery_claims_nothing(
    store: Storage, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The second invocation reads the log, the first delivers and records the transition,
    then the second tries to claim it at the seq it read."""
    from trunkwatch.app import notify

    monkeypatch.setattr(notify, "trunk_views", lambda *args, **kwargs: [view()])
    receiver = _Receiver()
    first: list[Any] = []

    class LateClaims:
        def __init__(self, logs: Any) -> None:
            self.logs = logs

        def __getattr__(self, name: str) -> Any:
            return getattr(self.logs, name)

        def claim(self, *args: Any) -> bool:
            if not first:
                first.append(_tick(store, receiver))  # delivers and records it meanwhile
            claimed: bool = self.logs.claim(*args)
            return claimed

    late = _tick(
        dataclasses.replace(store, logs=LateClaims(store.logs)), receiver, NOW + timedelta(seconds=1)
    )
    assert [row["status"] for row in first[0].sent] == ["firing"]
    assert (late.deferred, late.sent) == (1, [])
    assert receiver.sent == ["firing"]  # once
