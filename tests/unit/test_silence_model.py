"""The silence model: status from the clock, the postable shape, and Alertmanager's rules."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from trunkwatch.silences import Matcher, Silence, SilenceError
from trunkwatch.silences.model import MAX_MATCHERS, parse_postable, sort_for_listing

NOW = datetime(2026, 11, 18, 15, 0, tzinfo=UTC)
HOUR = timedelta(hours=1)


def silence(starts_at: datetime, ends_at: datetime, sid: str = "s") -> Silence:
    return Silence(sid, (Matcher("alertname", "TrunkBroken"),), starts_at, ends_at, "alice", "why", starts_at)


def postable(**changes: Any) -> dict[str, Any]:
    body = {
        "matchers": [{"name": "job", "value": "pull / .*", "isRegex": True, "isEqual": True}],
        "startsAt": "2026-11-18T15:00:00Z",
        "endsAt": "2026-11-18T17:00:00Z",
        "createdBy": "alice",
        "comment": "known breakage",
    }
    body.update(changes)
    return {key: value for key, value in body.items() if value is not None}


def build(body: dict[str, Any], now: datetime = NOW) -> Silence:
    return Silence.from_postable(parse_postable(body), "id", "principal", now)


def test_status_follows_the_clock() -> None:
    s = silence(NOW, NOW + HOUR)
    assert s.status(NOW - timedelta(seconds=1)) == "pending"
    assert s.status(NOW) == "active"
    assert s.status(NOW + HOUR - timedelta(microseconds=1)) == "active"
    # Expiring sets endsAt to now: from that instant on the silence is over.
    assert s.status(NOW + HOUR) == "expired"


def test_matches_needs_every_matcher() -> None:
    s = Silence(
        "s",
        (Matcher("alertname", "TrunkJobFailing"), Matcher("job", "pull / .*", is_regex=True)),
        NOW,
        NOW + HOUR,
        "alice",
        "why",
        NOW,
    )
    assert s.matches({"alertname": "TrunkJobFailing", "job": "pull / build"})
    assert not s.matches({"alertname": "TrunkJobFailing", "job": "trunk / build"})
    assert not s.matches({"alertname": "TrunkBroken", "job": "pull / build"})


def test_to_api_is_alertmanagers_gettable_silence() -> None:
    s = silence(NOW, NOW + HOUR, sid="0b2d3c5e-8c0c-4b8e-9d55-3c1f3e0f8a11")
    assert s.to_api(NOW + 2 * HOUR) == {
        "id": "0b2d3c5e-8c0c-4b8e-9d55-3c1f3e0f8a11",
        "status": {"state": "expired"},
        "updatedAt": "2026-11-18T15:00:00.000Z",
        "matchers": [{"name": "alertname", "value": "TrunkBroken", "isRegex": False, "isEqual": True}],
        "startsAt": "2026-11-18T15:00:00.000Z",
        "endsAt": "2026-11-18T16:00:00.000Z",
        "createdBy": "alice",
        "comment": "why",
    }


def test_valid_postable() -> None:
    s = build(postable())
    assert s.matchers == (Matcher("job", "pull / .*", is_regex=True),)
    assert (s.starts_at, s.ends_at) == (NOW, NOW + 2 * HOUR)
    assert (s.created_by, s.comment, s.updated_at) == ("principal", "known breakage", NOW)


def test_starts_at_defaults_to_now() -> None:
    assert build(postable(startsAt=None)).starts_at == NOW


def test_is_equal_defaults_to_true_and_is_regex_to_false() -> None:
    s = build(postable(matchers=[{"name": "alertname", "value": "TrunkBroken"}]))
    assert s.matchers == (Matcher("alertname", "TrunkBroken", is_regex=False, is_equal=True),)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"matchers": []}, "at least one matcher is required"),
        ({"matchers": None}, "matchers is required"),
        ({"endsAt": None}, "endsAt is required"),
        ({"comment": None}, "comment is required"),
        ({"comment": ""}, "comment"),
        ({"createdBy": ""}, "createdBy"),
        ({"surprise": 1}, "unknown field 'surprise'"),
        ({"matchers": [{"name": "job", "value": "x", "isRegex": "yes"}]}, "matchers.0.isRegex"),
        ({"matchers": [{"name": "job", "value": 5}]}, "matchers.0.value"),
        ({"matchers": [{"name": "job", "value": "x", "extra": 1}]}, "unknown field 'matchers.0.extra'"),
        ({"endsAt": "tomorrow"}, "endsAt"),
        ({"endsAt": "2026-11-18T17:00:00"}, "endsAt"),
        ({"endsAt": 1800000000}, "endsAt"),
        ({"startsAt": "9999-12-31T23:59:59-05:00"}, "startsAt"),
        ({"comment": "\ud800"}, "UTF-8"),
        ({"matchers": [{"name": "job", "value": "x"}] * (MAX_MATCHERS + 1)}, "too many matchers"),
    ],
)
def test_malformed_postable(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(SilenceError, match=message):
        parse_postable(postable(**changes))


def test_postable_must_be_an_object() -> None:
    with pytest.raises(SilenceError, match="JSON object"):
        parse_postable(["not", "an", "object"])


@pytest.mark.parametrize(
    ("matchers", "message"),
    [
        ([{"name": "job", "value": "["}], None),
        ([{"name": "job", "value": "[", "isRegex": True}], "invalid regular expression"),
        ([{"name": "1job", "value": "x"}], "invalid label name"),
        ([{"name": "job", "value": ""}], "must not match the empty string"),
        ([{"name": "job", "value": ".*", "isRegex": True}], "must not match the empty string"),
        ([{"name": "job", "value": "x", "isEqual": False}], "must not match the empty string"),
        (
            [{"name": "job", "value": "", "isEqual": True}, {"name": "team", "value": "a|", "isRegex": True}],
            "must not match the empty string",
        ),
        ([{"name": "alertname", "value": ".+", "isRegex": True}], "would silence every alert"),
        ([{"name": "team", "value": "", "isEqual": False}], "would silence every alert"),
        (
            [
                {"name": "repo", "value": ".+", "isRegex": True},
                {"name": "job", "value": ".*", "isRegex": True},
            ],
            "would silence every alert",
        ),
        (
            [
                {"name": "repo", "value": ".+", "isRegex": True},
                {"name": "job", "value": ".+", "isRegex": True},
            ],
            None,
        ),
        (
            [{"name": "alertname", "value": "TrunkBroken", "isEqual": False}],
            "must not match the empty string",
        ),
        (
            [
                {"name": "alertname", "value": "TrunkBroken", "isEqual": False},
                {"name": "repo", "value": "a/b"},
            ],
            None,
        ),
    ],
)
def test_matcher_rules(matchers: list[dict[str, Any]], message: str | None) -> None:
    if message is None:
        assert build(postable(matchers=matchers)).matchers
    else:
        with pytest.raises(SilenceError, match=message):
            build(postable(matchers=matchers))


@pytest.mark.parametrize(
    ("starts_at", "ends_at", "message"),
    [
        ("2026-11-18T17:00:00Z", "2026-11-18T17:00:00Z", "startsAt must be before endsAt"),
        ("2026-11-18T18:00:00Z", "2026-11-18T17:00:00Z", "startsAt must be before endsAt"),
        ("2026-11-18T13:00:00Z", "2026-11-18T14:00:00Z", "endsAt is in the past"),
        ("2026-11-18T13:00:00Z", "2026-11-18T15:00:00Z", "endsAt is in the past"),
        ("2026-11-18T15:00:00Z", "2040-01-01T00:00:00Z", "more than 3650 days away"),
    ],
)
def test_time_rules(starts_at: str, ends_at: str, message: str) -> None:
    with pytest.raises(SilenceError, match=message):
        build(postable(startsAt=starts_at, endsAt=ends_at))


def test_past_start_is_accepted_when_the_end_is_ahead() -> None:
    assert build(postable(startsAt="2026-11-18T13:00:00Z")).starts_at == NOW - 2 * HOUR


def test_listing_order_is_alertmanagers() -> None:
    active_late = silence(NOW - HOUR, NOW + 3 * HOUR, "active-late")
    active_soon = silence(NOW - HOUR, NOW + HOUR, "active-soon")
    pending_late = silence(NOW + 2 * HOUR, NOW + 3 * HOUR, "pending-late")
    pending_soon = silence(NOW + HOUR, NOW + 3 * HOUR, "pending-soon")
    expired_old = silence(NOW - 3 * HOUR, NOW - 2 * HOUR, "expired-old")
    expired_new = silence(NOW - 3 * HOUR, NOW - HOUR, "expired-new")
    shuffled = [expired_old, pending_late, active_late, expired_new, pending_soon, active_soon]
    assert [s.id for s in sort_for_listing(shuffled, NOW)] == [
        "active-soon",
        "active-late",
        "pending-soon",
        "pending-late",
        "expired-new",
        "expired-old",
    ]
