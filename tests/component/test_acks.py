"""Acknowledgements end to end: the `acknowledged` scenario (an alert acknowledged through
the API, another through an `ACK!` silence) replayed with PagerDuty and Slack stand-ins as
receivers, the API's view of it while it fires, and the API's refusals."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.peers import READER, call_api
from tests.support.scenarios import SCENARIOS
from trunkwatch_local.receiver_servers import PagerDutyServer, SlackServer
from trunkwatch_local.replay import parse_replay, read_replay
from trunkwatch_local.runtime import Published
from trunkwatch_local.session import Session, replay_into, replay_steps

SCENARIO = SCENARIOS / "acknowledged.jsonl"
KEY = "test-routing-key-not-a-secret-00"
BUILD = "pull / linux-jammy-py3.10-gcc11 / build"


@pytest.fixture
def pagerduty() -> Iterator[PagerDutyServer]:
    server = PagerDutyServer()
    yield server
    server.stop()


@pytest.fixture
def slack() -> Iterator[SlackServer]:
    server = SlackServer()
    yield server
    server.stop()


class Replayed:
    """The scenario's SNS messages, and the API's answers while both alerts were acknowledged
    and after the last event."""

    def __init__(self) -> None:
        self.published: list[Published] = []
        self.while_acknowledged: dict[str, Any] = {}
        self.after: dict[str, Any] = {}


@pytest.fixture
def replayed(pagerduty: PagerDutyServer, slack: SlackServer) -> Replayed:
    replay = read_replay(SCENARIO)
    replay.receivers = [
        {"type": "pagerduty", "routing_key": KEY, "url": pagerduty.url},
        {"type": "slack", "url": f"{slack.url}/services/T000/B000/XXXX"},
    ]
    found = Replayed()
    session = Session()
    try:
        session.start(replay.deployment(session.hud.url))
        for event, published in replay_steps(session, replay):
            found.published += published
            if event.kind == "silence":  # both acknowledged now
                again = {**event_ack("TrunkBroken"), "createdBy": "carol"}
                found.while_acknowledged = {
                    "acks": session.call_api("GET", "/api/v2/acks"),
                    "alerts": session.call_api("GET", "/api/v2/alerts"),
                    "again": session.call_api("POST", "/api/v2/acks", again),
                }
        found.after = {"acks": session.call_api("GET", "/api/v2/acks")}
    finally:
        session.stop()
    return found


def event_ack(alertname: str) -> dict[str, Any]:
    return {
        "matchers": [{"name": "alertname", "value": alertname, "isRegex": False, "isEqual": True}],
        "createdBy": "alice",
        "comment": "reverting the culprit",
    }


def test_an_acknowledged_alert_gets_no_reminder_and_still_resolves(
    replayed: Replayed, pagerduty: PagerDutyServer
) -> None:
    reasons = Counter(
        (p.attributes["alertname"], p.message["notification_reason"]) for p in replayed.published
    )
    # Without the acknowledgements the same trunk is reminded of both at 11:45 (its scenario
    # resolved-while-due-a-reminder); acknowledged, only the page and the resolution.
    assert reasons == Counter(
        {
            ("TrunkBroken", "firing"): 1,
            ("TrunkBroken", "resolved"): 1,
            ("TrunkJobFailing", "firing"): 1,
            ("TrunkJobFailing", "resolved"): 1,
        }
    )
    resolved = {p.attributes["alertname"]: p.message["commonAnnotations"] for p in replayed.published[2:]}
    assert resolved["TrunkBroken"]["acknowledged_by"] == "alice"
    assert resolved["TrunkJobFailing"]["acknowledged_by"] == "bob"
    assert resolved["TrunkJobFailing"]["acknowledged_note"] == "bisecting the build"


def test_pagerduty_gets_every_transition_and_each_acknowledgement_once(
    replayed: Replayed, pagerduty: PagerDutyServer
) -> None:
    for message in replayed.published:
        fingerprint = message.attributes["fingerprint"]
        assert pagerduty.actions(fingerprint) == ["trigger", "acknowledge", "resolve"]
        assert pagerduty.alerts[fingerprint].status == "resolved"
    assert len(pagerduty.events) == 6


def test_slack_is_told_each_acknowledgement_once(replayed: Replayed, slack: SlackServer) -> None:
    told = [post["text"] for post in slack.posts]
    assert Counter(text.split(":")[0] for text in told) == {"FIRING": 2, "ACKNOWLEDGED": 2, "RESOLVED": 2}
    acknowledged = [post for post in slack.posts if post["text"].startswith("ACKNOWLEDGED")]
    said = {post["attachments"][0]["blocks"][1]["text"]["text"] for post in acknowledged}
    assert said == {
        "Acknowledged by alice at 2026-11-18T10:50:00.000Z: reverting the culprit",
        "Acknowledged by bob at 2026-11-18T11:00:00.000Z: bisecting the build",
    }


def test_the_api_lists_acknowledgements_while_they_last_and_an_ack_silence_holds_nothing(
    replayed: Replayed,
) -> None:
    acks = {a["labels"]["alertname"]: a for a in replayed.while_acknowledged["acks"]}
    assert acks["TrunkBroken"]["acknowledgement"] == {
        "createdBy": "alice",
        "comment": "reverting the culprit",
        "at": "2026-11-18T10:50:00.000Z",
        "via": "api",
    }
    job = acks["TrunkJobFailing"]
    assert job["labels"]["job"] == BUILD
    assert job["acknowledgement"]["via"].startswith("silence ")
    assert (job["acknowledgement"]["createdBy"], job["acknowledgement"]["comment"]) == (
        "bob",
        "bisecting the build",
    )
    alerts = {a["labels"]["alertname"]: a for a in replayed.while_acknowledged["alerts"]}
    # The ACK! silence acknowledged the job's alert and holds it back from no one.
    assert alerts["TrunkJobFailing"]["status"] == {"state": "active", "silencedBy": [], "inhibitedBy": []}
    assert alerts["TrunkJobFailing"]["annotations"]["acknowledged_by"] == "bob"
    # Acknowledging again changes nothing: the first acknowledgement stands.
    (again,) = replayed.while_acknowledged["again"]
    assert again["acknowledgement"] == acks["TrunkBroken"]["acknowledgement"]
    assert replayed.after["acks"] == []  # both ended with their episode


def test_an_ack_silence_made_before_its_alert_fires_acknowledges_it_when_it_does(
    pagerduty: PagerDutyServer,
) -> None:
    header, fires, _by_api, by_silence, *rest = SCENARIO.read_text().splitlines()
    early = json.loads(by_silence)
    early["at"] = early["silence"]["startsAt"] = "2026-11-18T10:30:00Z"  # before it fires
    early["silence"]["endsAt"] = "2026-11-18T12:00:00Z"
    replay = parse_replay([header, json.dumps(early), fires, *rest], "ack silence first")
    replay.receivers = [{"type": "pagerduty", "routing_key": KEY, "url": pagerduty.url}]
    session = Session()
    try:
        session.start(replay.deployment(session.hud.url))
        published = list(replay_into(session, replay))
    finally:
        session.stop()
    sent = Counter((p.attributes["alertname"], p.message["notification_reason"]) for p in published)
    assert sent[("TrunkBroken", "reminder")] == 1  # not acknowledged: reminded as before
    assert sent[("TrunkJobFailing", "reminder")] == 0  # acknowledged by the silence when it fired
    actions = {p.attributes["alertname"]: pagerduty.actions(p.attributes["fingerprint"]) for p in published}
    assert actions == {
        "TrunkBroken": ["trigger", "trigger", "resolve"],
        "TrunkJobFailing": ["trigger", "acknowledge", "resolve"],  # told in the tick it fired
    }


# --- the API's refusals -------------------------------------------------------------------


@pytest.fixture
def api(aws: dict[str, Any]) -> None:
    """The API handler on an empty table: nothing fires."""


def matcher(name: str, value: str, regex: bool = False) -> dict[str, Any]:
    return {"name": name, "value": value, "isRegex": regex, "isEqual": True}


@pytest.mark.usefixtures("api")
def test_acknowledging_needs_a_write_token() -> None:
    status, body = call_api("POST", "/api/v2/acks", {"matchers": [matcher("job", "x")]}, caller=READER)
    assert status == 403 and "acknowledging alerts need a write token" in body["error"]
    assert call_api("GET", "/api/v2/acks", caller=READER) == (200, [])


@pytest.mark.usefixtures("api")
def test_nothing_firing_is_nothing_acknowledged() -> None:
    assert call_api("POST", "/api/v2/acks", {"matchers": [matcher("job", "x")], "comment": "on it"}) == (
        200,
        [],
    )


@pytest.mark.usefixtures("api")
@pytest.mark.parametrize(
    ("body", "error"),
    [
        ({"matchers": []}, "at least one matcher is required"),
        ({"comment": "x"}, "matchers is required"),
        ({"matchers": [matcher("alertname", ".+", regex=True)]}, "would acknowledge every alert"),
        ({"matchers": [matcher("job", "")]}, "at least one matcher must not match the empty string"),
        ({"matchers": [matcher("job", "(", regex=True)]}, "("),
        ({"matchers": [matcher("job", "x")], "who": "me"}, "unknown field 'who'"),
        ({"matchers": [matcher("job", "x")], "createdBy": ""}, "createdBy"),
    ],
)
def test_a_bad_acknowledgement_is_refused_saying_why(body: dict[str, Any], error: str) -> None:
    status, answer = call_api("POST", "/api/v2/acks", body)
    assert status == 400 and error in answer["error"]


@pytest.mark.usefixtures("api")
def test_the_acks_routes_are_in_the_openapi_document() -> None:
    status, document = call_api("GET", "/api/v2/openapi.json")
    assert status == 200 and set(document["paths"]["/api/v2/acks"]) == {"get", "post"}
    assert "AcknowledgedAlert" in document["components"]["schemas"]
