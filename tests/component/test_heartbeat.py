"""The heartbeat (design.md §4.2) on the local runtime: the always-firing Watchdog, sent by
the schedule's sweeps to the heartbeat's own receivers (a webhook stand-in on 127.0.0.1 as
the dead man's switch), once every `every` however many trunks sweep, never to the stack's
topic or the alerts' receivers; a failing receiver is retried at the next sweep, a refused
beat is recorded as rejected, and a beat whose notifier died goes at the next sweep."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta

import pytest

from trunkwatch import sources
from trunkwatch.app.notify import HEARTBEAT_LOG
from trunkwatch.channels import RECEIVER_TYPES
from trunkwatch.domain.clock import parse_time
from trunkwatch.domain.config import Deployment, load_deployment
from trunkwatch_local.chaos import Chaos
from trunkwatch_local.hud_server import HudServer
from trunkwatch_local.receiver_servers import SlackServer, WebhookServer
from trunkwatch_local.runtime import LocalRuntime, Published
from trunkwatch_local.scenario import DEMO_JOBS, Trunk, _demo_outcome

TRUNK = Trunk(jobs=DEMO_JOBS, outcome=_demo_outcome)
START = TRUNK.start + timedelta(hours=4)  # the demo's break fires at the first ticks
PING = "/ping/6f1c2a9e-dead-mans-switch"
# Every function but the notifier is spared when crashes are injected.
SPARED = ("DispatcherFunction", "IngestFunction", "EvaluatorFunction", "WebhookFunction", "ApiFunction")


@pytest.fixture
def hook() -> Iterator[WebhookServer]:
    server = WebhookServer()
    yield server
    server.stop()


@pytest.fixture
def slack() -> Iterator[SlackServer]:
    server = SlackServer()
    yield server
    server.stop()


@pytest.fixture
def hud() -> Iterator[HudServer]:
    server = HudServer()
    yield server
    server.stop()


def deployment(hud: HudServer, hook: WebhookServer, slack: SlackServer) -> Deployment:
    """Two trunks (two sweeps a minute), a Slack receiver for the alerts, the heartbeat's own."""
    trunk = {"repo": "pytorch/pytorch", "source": "hud", "url": hud.url}
    document = {
        "trunks": [trunk, {**trunk, "repo": "pytorch/vision"}],
        "receivers": [{"type": "slack", "url": f"{slack.url}/services/T000/B000/XXXX"}],
        "heartbeat": {"every": "5m", "receivers": [{"type": "webhook", "url": hook.url + PING}]},
    }
    return load_deployment(document, RECEIVER_TYPES, sources=sources.REGISTRY)


def run(runtime: LocalRuntime, hud: HudServer, minutes: range, chaos: Chaos | None = None) -> list[Published]:
    """A schedule tick every minute (the template's rate(1 minute)): polls, then sweeps; under
    `chaos`, the notifier dies at every AWS call during minute 5 (every retry included)."""
    published = []
    for minute in minutes:
        at = START + timedelta(minutes=minute)
        if chaos is not None:
            chaos.crash_rate = 0.999 if minute == 5 else 0.0
        hud.serve(TRUNK.snapshot(at))
        runtime.tick(at)
        published += runtime.published(at)
    return published


def beats(hook: WebhookServer) -> list[tuple[int, str]]:
    """(minute, notification_reason) of each Watchdog the dead man's switch received."""
    out = []
    for path, body in hook.posts:
        assert path == PING
        (alert,) = body["alerts"]
        minute = (parse_time(alert["startsAt"]) - START) / timedelta(minutes=1)  # it starts at its beat
        out.append((int(minute), body["notification_reason"]))
    return out


def test_the_watchdog_beats_every_period_to_its_own_receivers_only(
    hud: HudServer, hook: WebhookServer, slack: SlackServer
) -> None:
    with LocalRuntime().start(deployment(hud, hook, slack)) as runtime:
        published = run(runtime, hud, range(16))
    # Two trunks sweep every minute: one beat a period, first `firing`, then reminders.
    assert beats(hook) == [(0, "firing"), (5, "reminder"), (10, "reminder"), (15, "reminder")]
    body = hook.posts[0][1]
    assert (body["version"], body["status"]) == ("4", "firing")
    assert body["groupLabels"] == {"alertname": "Watchdog"}  # no repo: it is no trunk's
    (alert,) = body["alerts"]
    assert alert["labels"] == {"alertname": "Watchdog", "priority": "none", "severity": "none"}
    assert alert["annotations"]["summary"] == "trunkwatch is alive: this alert is always firing"
    assert "sent every 5m" in alert["annotations"]["description"]
    # The break's messages went to the topic and to Slack; the Watchdog to neither.
    assert published and slack.posts
    assert all(message.attributes["alertname"] != "Watchdog" for message in published)
    assert "Watchdog" not in json.dumps(slack.posts)


def test_a_failing_heartbeat_receiver_is_retried_at_each_sweep(
    hud: HudServer, hook: WebhookServer, slack: SlackServer
) -> None:
    hook.fail_next(4, 503)  # down for two minutes: each minute's two sweeps try it
    with LocalRuntime().start(deployment(hud, hook, slack)) as runtime:
        run(runtime, hud, range(9))
    assert hook.failures == 0 and beats(hook) == [(2, "firing"), (7, "reminder")]


def test_a_refused_beat_is_recorded_as_rejected_and_the_next_one_goes(
    hud: HudServer, hook: WebhookServer, slack: SlackServer
) -> None:
    hook.fail_next(1, 400)
    with LocalRuntime().start(deployment(hud, hook, slack)) as runtime:
        run(runtime, hud, range(6))
        (rejection,) = runtime.stack.storage().logs.rejected(HEARTBEAT_LOG)
    assert beats(hook) == [(5, "reminder")]  # not retried: the next beat is due a period later
    assert (rejection.alertname, rejection.status, rejection.at) == ("Watchdog", "firing", START)
    assert rejection.receiver.startswith("webhook:") and "dead-mans-switch" not in rejection.answer
    assert rejection.answer.endswith("answered 400: scripted failure")


def test_a_beat_whose_notifier_died_goes_at_the_next_sweep(
    hud: HudServer, hook: WebhookServer, slack: SlackServer
) -> None:
    chaos = Chaos(7, 0.0, spared=SPARED)
    with LocalRuntime(chaos=chaos).start(deployment(hud, hook, slack)) as runtime:
        run(runtime, hud, range(12), chaos)
    assert chaos.stats.crashes and {crash.function for crash in chaos.stats.crashes} == {"NotifierFunction"}
    # Nothing went at minute 5; the next sweep sent it, and the period counts from there.
    assert beats(hook) == [(0, "firing"), (6, "reminder"), (11, "reminder")]
