"""The PagerDuty receiver on the local runtime, against the Events API stand-in: every
scenario's SNS messages reach PagerDuty as `trigger` and `resolve` of the alert's
fingerprint, nothing of a silenced alert; a throttled (429) event is retried until
PagerDuty takes it, after the last event too; a refused (400) one is recorded, alarmed and
never retried; and invocations dying at random AWS calls lose nothing."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

from tests.support.paths import ROOT
from tests.support.scenarios import SCENARIOS, expected_messages, published_row, summary
from trunkwatch_local import apigw
from trunkwatch_local.chaos import Chaos
from trunkwatch_local.receiver_servers import PagerDutyServer
from trunkwatch_local.replay import Replay, read_replay
from trunkwatch_local.runtime import Published
from trunkwatch_local.session import Session, replay_into, run_replay

KEY = "test-routing-key-not-a-secret-00"
ACTIONS = {"firing": "trigger", "resolved": "resolve"}
BESIDE = ROOT.parent / "shared" / "scenarios"  # the shared scenarios, where a checkout has them


def scenarios() -> list[Path]:
    own = sorted(p for p in SCENARIOS.glob("*.jsonl") if not p.name.endswith(".expected.jsonl"))
    names = {p.name for p in own}
    beside = sorted(p for p in BESIDE.glob("*.jsonl") if not p.name.endswith(".expected.jsonl"))
    return own + [p for p in beside if p.name not in names]


def receiver(server: PagerDutyServer, key: str = KEY) -> dict[str, Any]:
    return {"type": "pagerduty", "routing_key": key, "url": server.url}


def replayed(replay: Replay, server: PagerDutyServer, session: Session) -> list[Published]:
    """`replay` on `session` with `server` as its PagerDuty receiver: the SNS messages."""
    try:
        session.github.repo = replay.repo
        session.start(replay.deployment(session.hud.url, session.github.url))
        return list(replay_into(session, replay))
    finally:
        session.stop()


def sns_actions(published: Iterable[Published]) -> dict[str, list[str]]:
    """Each fingerprint's SNS messages as the PagerDuty actions they call for, in order."""
    found: dict[str, list[str]] = {}
    for message in (m for m in published if not m.is_digest):  # a digest is never a page
        found.setdefault(message.attributes["fingerprint"], []).append(ACTIONS[message.message["status"]])
    return found


def pagerduty_actions(server: PagerDutyServer) -> dict[str, list[str]]:
    """Each dedup_key's accepted triggers and resolves (acknowledgements are no SNS message)."""
    found: dict[str, list[str]] = {}
    for event in server.events:
        if event["event_action"] != "acknowledge":
            found.setdefault(event["dedup_key"], []).append(event["event_action"])
    return found


@pytest.mark.long
@pytest.mark.parametrize("scenario", scenarios(), ids=lambda path: path.name)
def test_every_sns_message_reaches_pagerduty_with_the_alerts_fingerprint(scenario: Path) -> None:
    server = PagerDutyServer()
    try:
        replay = read_replay(scenario)
        replay.receivers = [receiver(server)]
        published = replayed(replay, server, Session())
    finally:
        server.stop()
    # One event per message, in its order: a trigger for each firing one (updates and
    # reminders too), a resolve for each resolved one; nothing for an alert SNS was not sent
    # (a silenced one), nothing twice.
    assert pagerduty_actions(server) == sns_actions(published)
    for event in server.events:
        assert event["routing_key"] == KEY
        if event["event_action"] == "trigger":
            assert len(event["payload"]["summary"]) <= 1024


def test_a_silenced_alert_reaches_pagerduty_only_once_its_silence_ends() -> None:
    server = PagerDutyServer()
    try:
        replay = read_replay(SCENARIOS / "silenced.jsonl")
        replay.receivers = [receiver(server)]
        published = replayed(replay, server, Session())
    finally:
        server.stop()
    jobs = {p.attributes["fingerprint"]: p.message["commonLabels"].get("job") for p in published}
    sent = {event["dedup_key"] for event in server.events}
    assert sent == set(jobs)  # no other alert: the ones silenced throughout sent nothing
    released = [p for p in published if "expired" in p.message["notification_reason"]]
    assert released and all(pagerduty_actions(server)[p.attributes["fingerprint"]] for p in released)


@pytest.mark.parametrize(
    ("name", "limit", "scripted"),
    [
        ("basic-break.jsonl", 1, 3),  # two messages at one tick: one of them waits a tick
        ("resolved-while-due-a-reminder.jsonl", 1, 0),  # the last event's: after it
        ("acknowledged.jsonl", 1, 2),
    ],
)
def test_every_throttled_event_is_retried_until_pagerduty_takes_it(
    name: str, limit: int, scripted: int
) -> None:
    session = Session()
    # PagerDuty's throttle per routing key, on the replay's clock (its limit is about 120 a
    # minute; one here), and the first events answered 429 as scripted.
    server = PagerDutyServer(limit=limit, clock=session.runtime.clock.now)
    server.fail_next(scripted, 429)
    try:
        replay = read_replay(SCENARIOS / name)
        replay.receivers = [receiver(server)]
        published = replayed(replay, server, session)
    finally:
        server.stop()
    throttled = sum(1 for r in server.requests if r.path == "/v2/enqueue") - len(server.events)
    assert server.throttled > 0 and throttled == server.throttled + scripted
    assert pagerduty_actions(server) == sns_actions(published)  # each one taken in the end, once
    # The retries after the last event sent SNS nothing more than the scenario's messages.
    rows = [summary(published_row(m.as_json())) for m in published]
    assert sorted(rows) == sorted(map(summary, expected_messages(SCENARIOS / name)))


def test_a_refused_event_is_kept_alarmed_and_never_retried(
    monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TRUNKWATCH_LOG_LEVEL", "INFO")  # the local runtime then publishes metrics
    server = PagerDutyServer()
    wrong = "not-a-32-character-routing-key"  # PagerDuty refuses every event: 400
    session = Session()
    try:
        replay = read_replay(SCENARIOS / "basic-break.jsonl")
        replay.receivers = [receiver(server, wrong)]
        session.start(replay.deployment(session.hud.url))
        published = list(replay_into(session, replay))
        trunks = session.runtime.invoke("api", apigw.proxy_event("GET", "/api/v2/trunks"))
    finally:
        session.stop()
        server.stop()
    # Each message tried once, refused, not retried; the receiver went on with the next.
    assert len(server.requests) == len(published) and server.events == []
    (trunk,) = json.loads(trunks["body"])
    rejected = trunk["rejectedNotifications"]
    assert {r["fingerprint"] for r in rejected} == {p.attributes["fingerprint"] for p in published}
    for rejection in rejected:
        assert rejection["receiver"].startswith("pagerduty:") and wrong not in json.dumps(rejection)
        assert "answered 400: Event object is invalid (routing_key must be" in rejection["answer"]
    # Counted service-wide (NotificationsRejectedAlarm watches it) and per receiver.
    records = [json.loads(line) for line in capfd.readouterr().err.splitlines() if '"_aws"' in line]
    rejections = [r for r in records if "NotificationsRejected" in r]
    service_wide = [r["NotificationsRejected"] for r in rejections if "receiver" not in r]
    assert sum(len(v) if isinstance(v, list) else 1 for v in service_wide) == len(published)
    assert all(r["receiver"].startswith("pagerduty:") for r in rejections if "receiver" in r)


@pytest.mark.long
@pytest.mark.parametrize(
    ("name", "seed", "rate"), [("basic-break.jsonl", 21, 0.08), ("acknowledged.jsonl", 22, 0.08)]
)
def test_pagerduty_loses_nothing_when_invocations_die(name: str, seed: int, rate: float) -> None:
    server = PagerDutyServer()
    chaos = Chaos(seed, rate)
    try:
        replay = read_replay(SCENARIOS / name)
        replay.receivers = [receiver(server)]
        published = list(run_replay(replay, chaos=chaos))
    finally:
        server.stop()
    assert chaos.stats.crashes, "no invocation died: the seed tests nothing"
    # Every message SNS sent reached PagerDuty, in order. A crash right after a delivery,
    # before its log entry was written, may send an event once more: PagerDuty adds a
    # trigger to the open alert and drops a resolve of a resolved one.
    sent, got = sns_actions(published), pagerduty_actions(server)
    assert {key: _once(actions) for key, actions in got.items()} == {
        key: _once(actions) for key, actions in sent.items()
    }
    alerts = (m for m in published if not m.is_digest)  # ticks past midnight send the day's digest
    assert sorted(published_row(m.as_json())["status"] for m in alerts) == sorted(
        row["status"] for row in expected_messages(SCENARIOS / name)
    )
    for dedup_key, alert in server.alerts.items():
        assert alert.status == "resolved", dedup_key  # every scenario resolves what it fires


def _once(actions: list[str]) -> list[str]:
    """Actions with repeats in a row taken as one."""
    return [action for action, _ in itertools.groupby(actions)]
