"""A trunk fed by webhook deliveries alone sends exactly the messages the same history sends
when polled (the local runtime: the real handlers, signed deliveries, the stream pump)."""

from __future__ import annotations

import json
import re
from typing import Any
from unittest import mock

import pytest

from tests.support import webhooks
from tests.support.scenarios import SCENARIOS, assert_publishes_expected
from trunkwatch_local.replay import ReplayError, parse_replay
from trunkwatch_local.session import run_replay

_LOCAL_PORT = re.compile(r"127\.0\.0\.1:\d+")


def _messages(lines: list[str]) -> list[dict[str, Any]]:
    """The replay's messages, with the ports of its local servers (new ones per run) left out."""
    return [
        json.loads(_LOCAL_PORT.sub("127.0.0.1:PORT", json.dumps(m.as_json())))
        for m in run_replay(parse_replay(lines, "test"))
    ]


def _history() -> list[str]:
    return (SCENARIOS / "basic-break.jsonl").read_text().splitlines()


@pytest.fixture(scope="module")
def polled() -> list[dict[str, Any]]:
    # The reference, polled; the webhook-fed runs are compared with it. (On moto's table the
    # deliveries replay in test_least_privilege and the push benchmark.)
    return _messages(webhooks.as_github_knows_it(_history()))


@pytest.mark.long
def test_a_webhook_fed_break_sends_the_polled_messages(polled: list[dict[str, Any]]) -> None:
    pushed = webhooks.replay_as_deliveries(_history())
    assert not any('"hud"' in line for line in pushed[1:])
    # The reference is the scenario's: its expected messages, in time order.
    assert_publishes_expected(SCENARIOS / "basic-break.jsonl", polled)
    assert _messages(pushed) == polled


def test_cells_that_joined_no_group_still_send_every_message(polled: list[dict[str, Any]]) -> None:
    # A delivery judges from what it read whether its cell may change a verdict (a job that
    # began firing meanwhile makes it wrong); the evaluator judges the cell all the same and
    # the next settled tick, the sweep's at the latest, sends what changed. Here every cell
    # is misjudged: no delivery joins a group.
    with mock.patch("trunkwatch.app.webhook.may_change_judgement", return_value=False):
        assert _messages(webhooks.replay_as_deliveries(_history())) == polled


def test_a_replay_webhook_event_must_name_a_github_event() -> None:
    header = json.dumps({"repo": "pytorch/pytorch"})
    bad = json.dumps({"at": "2026-11-18T15:00:00Z", "webhook": {"event": "issues", "payload": {}}})
    with pytest.raises(ReplayError, match="'webhook' must be"):
        parse_replay([header, bad], "test")


def test_webhooks_down_fires_when_the_poll_finds_what_deliveries_did_not_bring() -> None:
    lines = webhooks.as_github_knows_it(_history())
    header = json.loads(lines[0])
    header["config"] = {"webhooks_down_after": "30m"}
    events = [json.loads(line) for line in lines[1:]]
    first, later, after = events[0], events[5], events[6]  # 15:09, 15:59, 16:09
    delivered = webhooks.replay_as_deliveries([json.dumps(header), json.dumps(first)])[1:]
    resumed = webhooks.replay_as_deliveries([json.dumps(header), json.dumps(after)])[1:]
    # Deliveries at 15:09; at 15:59 the poll finds results no delivery brought (the HUD's
    # snapshot stands in for the backstop poll); at 16:09 deliveries bring results again.
    replay = [json.dumps(header), *delivered, json.dumps(later), *resumed]
    replayed = _messages(replay)
    messages = [(m["at"], m["attributes"]["alertname"], m["attributes"]["status"]) for m in replayed]
    assert messages == [
        (later["at"], "WebhooksDown", "firing"),
        (after["at"], "WebhooksDown", "resolved"),
    ]
