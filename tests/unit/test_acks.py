"""Acknowledgements' pure parts: what is due once an alert is acknowledged (no reminder, the
acknowledgement told once to the receivers that take it, updates and the resolution as
before), `ACK!` comments, which acknowledgements are over, and how each receiver says it."""

from __future__ import annotations

import dataclasses
import json
from datetime import timedelta

import pytest

from tests.support.alerts import HOUR, NOW, failing, view
from trunkwatch.app.acks import by_ack_silences
from trunkwatch.channels.base import Notification
from trunkwatch.channels.email import email_text
from trunkwatch.channels.pagerduty import alert_event
from trunkwatch.channels.slack import acknowledgement_message, slack_message
from trunkwatch.domain.acks import Acknowledgement, is_ack_comment, note_of, over
from trunkwatch.domain.alerts import AlertView
from trunkwatch.domain.dedup import DueNotification, LogState, due_notification
from trunkwatch.silences import Matcher, Silence
from trunkwatch_local.replay import ReplayError, parse_replay

ACK = Acknowledgement("f1", "TrunkJobFailing", "pull / x", NOW - HOUR, "alice", "bisecting it", "api")
REPEAT = 4 * HOUR
REMINDER_DUE = LogState("firing", NOW - 5 * HOUR)


def acked(status: str = "firing", **changes: object) -> AlertView:
    shown = dataclasses.replace(view(status), **changes)
    shown.acknowledgement = ACK
    shown.alert.annotations.update(ACK.annotations())
    return shown


def test_an_acknowledged_alert_gets_no_reminder() -> None:
    assert due_notification(view(), REMINDER_DUE, NOW, REPEAT) == DueNotification("firing", "reminder")
    assert due_notification(acked(), REMINDER_DUE, NOW, REPEAT) is None
    assert due_notification(acked(), REMINDER_DUE, NOW, REPEAT, tells_acks=True) == DueNotification(
        "firing", "acknowledged"
    )
    told = dataclasses.replace(REMINDER_DUE, acknowledged=ACK.key)
    assert due_notification(acked(), told, NOW, REPEAT, tells_acks=True) is None  # told once, and no reminder


def test_the_acknowledgement_is_told_after_the_first_page_and_before_the_resolution() -> None:
    # Never sent yet: the page first, the acknowledgement at the receiver's next decision.
    assert due_notification(acked(), LogState(), NOW, REPEAT, tells_acks=True) == DueNotification(
        "firing", "firing"
    )
    fired = LogState("firing", NOW - HOUR)
    assert due_notification(acked("resolved"), fired, NOW, REPEAT, tells_acks=True) == DueNotification(
        "firing", "acknowledged"
    )
    told = dataclasses.replace(fired, acknowledged=ACK.key)
    assert due_notification(acked("resolved"), told, NOW, REPEAT, tells_acks=True) == DueNotification(
        "resolved", "resolved"
    )
    assert due_notification(acked("resolved"), fired, NOW, REPEAT) == DueNotification(
        "resolved", "resolved"
    )  # SNS, say


def test_an_acknowledged_alert_still_tells_its_updates_and_a_held_one_nothing() -> None:
    trunk = acked(alert=dataclasses.replace(view().alert, jobs={"a": failing(), "c": failing()}))
    log = LogState("firing", NOW - HOUR, jobs=("a", "b"), acknowledged=ACK.key)
    assert due_notification(trunk, log, NOW, REPEAT, tells_acks=True) == DueNotification(
        "firing", "update; started failing: c; stopped failing: b"
    )
    assert due_notification(acked(silenced_by=["s1"]), REMINDER_DUE, NOW, REPEAT, tells_acks=True) is None


def test_a_new_acknowledgement_of_the_next_episode_is_told_again() -> None:
    later = dataclasses.replace(ACK, at=NOW)
    shown = acked()
    shown.acknowledgement = later
    told_before = LogState("firing", NOW - HOUR, acknowledged=ACK.key)
    assert due_notification(shown, told_before, NOW, REPEAT, tells_acks=True) == DueNotification(
        "firing", "acknowledged"
    )


@pytest.mark.parametrize(
    ("comment", "is_ack", "note"),
    [
        ("ACK! looking at it", True, "looking at it"),
        ("ACK!", True, ""),
        ("ack! lower case is a plain silence", False, "ack! lower case is a plain silence"),
        ("maintenance ACK!", False, "maintenance ACK!"),
    ],
)
def test_an_ack_silence_is_one_whose_comment_starts_with_ack(comment: str, is_ack: bool, note: str) -> None:
    assert is_ack_comment(comment) is is_ack and note_of(comment) == note


def test_an_acknowledgement_is_over_once_its_alert_no_longer_fires() -> None:
    other = dataclasses.replace(ACK, fingerprint="f2")
    done = ACK.ended(NOW - timedelta(minutes=5))
    assert over([ACK, other, dataclasses.replace(done, fingerprint="f3")], ["f2"]) == [ACK]
    assert done.ended_at is not None and not done.live


def silence(comment: str, job: str = "pull / x", silence_id: str = "s-1") -> Silence:
    matcher = Matcher("job", job, False, True)
    return Silence(silence_id, (matcher,), NOW - HOUR, NOW + HOUR, "bob", comment, NOW - HOUR)


def test_an_active_ack_silence_acknowledges_each_firing_alert_it_matches_that_has_none() -> None:
    plain, first, second = (
        silence("maintenance"),
        silence("ACK! on it"),
        silence("ACK! me too", silence_id="s-2"),
    )
    fresh = view()
    ((acked_view, ack),) = by_ack_silences([fresh, acked(), view("resolved")], [plain, first, second], NOW)
    assert acked_view is fresh
    assert ack == Acknowledgement(
        fresh.alert.fingerprint, "TrunkJobFailing", "pull / x", NOW, "bob", "on it", "silence s-1"
    )
    assert by_ack_silences([view()], [silence("ACK! other job", job="trunk / y")], NOW) == []


# --- how each receiver says it --------------------------------------------------------------


def notification(shown: AlertView, status: str = "firing", reason: str = "firing") -> Notification:
    return Notification(shown.alert, status, reason, "http://127.0.0.1:9093", "r")


def test_every_later_message_says_who_acknowledged_it() -> None:
    told = "Acknowledged by alice at 2026-11-18T19:00:00.000Z: bisecting it"
    update = notification(acked(), reason="update; started failing: c")
    assert f"\n\n{told}\n\n" in email_text(update)
    assert any(told in str(block) for block in slack_message(update)["attachments"][0]["blocks"])
    details = alert_event(update, "k" * 32)["payload"]["custom_details"]
    assert details["acknowledged"] == told
    assert "Acknowledged" not in email_text(notification(view()))


def test_slack_and_pagerduty_are_told_the_acknowledgement_itself() -> None:
    told = notification(acked(), reason="acknowledged")
    message = acknowledgement_message(told)
    assert message["text"] == "ACKNOWLEDGED: pull / x failing"
    blocks = message["attachments"][0]["blocks"]
    assert "Acknowledged by alice" in blocks[1]["text"]["text"]
    assert blocks[-1]["elements"][1]["text"] == f"Fingerprint: `{told.alert.fingerprint}`"
    assert alert_event(told, "k" * 32) == {
        "routing_key": "k" * 32,
        "event_action": "acknowledge",
        "dedup_key": told.alert.fingerprint,
    }


# --- the replay event -----------------------------------------------------------------------

HEADER = '{"repo": "pytorch/pytorch"}'
MATCHERS = [{"name": "alertname", "value": "TrunkBroken", "isRegex": False, "isEqual": True}]


def test_a_replay_acknowledges_with_an_ack_event() -> None:
    ack = {"matchers": MATCHERS, "createdBy": "alice", "comment": "on it"}
    (event,) = parse_replay([HEADER, json.dumps({"at": "2026-11-18T10:50:00Z", "ack": ack})]).events
    assert (event.kind, event.payload) == ("ack", ack)


@pytest.mark.parametrize(
    "ack",
    [[], {"matchers": []}, {"createdBy": "alice"}, {"matchers": MATCHERS, "by": "alice"}, "alertname=X"],
)
def test_a_bad_ack_event_is_one_line_naming_the_line(ack: object) -> None:
    line = json.dumps({"at": "2026-11-18T10:50:00Z", "ack": ack})
    with pytest.raises(ReplayError) as raised:
        parse_replay([HEADER, line], "acks.jsonl")
    assert str(raised.value) == (
        "acks.jsonl:2: 'ack' must be "
        '{"matchers": [<as in a silence>], "createdBy": "...", "comment": "..."}'
    )
