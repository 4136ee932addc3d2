"""Never lose a page: replays with invocations dying at random calls, before the call
(nothing written) or just after it (written, the answer lost), as Lambda's stream retries,
bisection and dead-letter queue and the schedule's unretried events handle them
(`trunkwatch replay --chaos`). Every expected message is sent; a message goes out twice
only where a crash came right after its publish (the one window SNS cannot close).

A message may come late, but no later than the design lets it (design.md §4, a message a
dead invocation left unsent goes out at the next settled tick, at the latest the next
sweep): at the first schedule tick at least 2 minutes after it was due (a tick whose records
were dead-lettered waits that long for the sweep to settle it, §3.4) during which no
invocation died (`benchmarks.chaos.due_by`). A crash-free sweep settles its tick, and the
notifier that tick starts sends everything due.

Four scenarios run here on the in-memory store (dying at its calls and at AWS calls), each
under its own seed and one of the two crash rates: a break and its fix, an infrastructure
outage, silences, a reminder due as the alert resolves; the outage also runs on moto's table
(dying at every AWS call, DynamoDB's included). The benchmark, `python -m benchmarks chaos`,
runs every scenario under three seeds at both rates."""

from __future__ import annotations

import dataclasses
import itertools
import json
from datetime import timedelta
from pathlib import Path

import pytest

from benchmarks.chaos import Run, run_with_chaos
from tests.support import webhooks
from tests.support.scenarios import REAL_HISTORY, SCENARIOS, expected_messages
from trunkwatch.domain.clock import parse_time
from trunkwatch_local.chaos import Chaos
from trunkwatch_local.replay import parse_replay, read_replay
from trunkwatch_local.runtime import LocalRuntime
from trunkwatch_local.session import Session, replay_steps

CHAOS_RUNS = [
    ("basic-break", 100, 0.08, "memory"),
    ("infra-outage", 102, 0.03, "memory"),
    ("infra-outage", 102, 0.03, "dynamodb"),
    ("resolved-while-due-a-reminder", 104, 0.08, "memory"),
    ("silenced", 105, 0.03, "memory"),
]


def assert_no_page_lost(run: Run) -> None:
    assert run.crashes > 0, "no invocation died: the seed tests nothing"
    assert not run.lost, (
        f"lost {json.dumps(run.lost)} ({run.crashes} crashes, {run.dead_lettered} dead-lettered)"
    )
    assert not run.late, f"sent later than the first quiet tick 2 minutes on: {json.dumps(run.late)}"
    assert len(run.extra) <= run.crashes_after_publish, (
        f"sent again {json.dumps(run.extra)} with {run.crashes_after_publish} crashes right after a publish"
    )


@pytest.mark.parametrize(
    ("scenario", "seed", "rate", "store"),
    [
        # On moto's table the run takes longer than the four others together.
        pytest.param(
            SCENARIOS / f"{name}.jsonl",
            seed,
            rate,
            store,
            marks=pytest.mark.long(minutes=2 if store == "dynamodb" else 1),
        )
        for name, seed, rate, store in CHAOS_RUNS
    ],
    ids=lambda value: value.name if isinstance(value, Path) else str(value),
)
def test_scenarios_send_every_message_when_invocations_die(
    scenario: Path, seed: int, rate: float, store: str
) -> None:
    assert_no_page_lost(
        run_with_chaos(
            scenario.name,
            read_replay(scenario),
            expected_messages(scenario),
            seed,
            rate,
            reference_always=False,
            store=store,
        )
    )


@pytest.mark.long
def test_a_webhook_fed_trunk_sends_every_message_when_the_pipeline_behind_it_dies() -> None:
    # A delivery whose own invocation dies is GitHub's to lose (it does not redeliver; the
    # backstop poll finds its result): here every delivery lands, and the evaluator,
    # notifier and sweep behind them die.
    basic_break = SCENARIOS / "basic-break.jsonl"
    lines = webhooks.replay_as_deliveries(basic_break.read_text().splitlines())
    replay = parse_replay(lines, "basic-break as deliveries")
    expected = expected_messages(basic_break)
    run = run_with_chaos(
        "basic-break as deliveries",
        replay,
        expected,
        3,
        0.08,
        spared=("WebhookFunction",),
        reference_always=False,
    )
    assert_no_page_lost(run)


@pytest.mark.long
def test_the_real_history_sends_every_message_when_invocations_die() -> None:
    # Its first 20 polls (a day and a half, pages and reminders), against the same polls
    # without crashes: the whole history replays to its expected messages in test_scenarios.
    history = read_replay(REAL_HISTORY)
    cut = dataclasses.replace(history, events=list(itertools.islice(history.events, 20)))
    run = run_with_chaos(f"{REAL_HISTORY.name}, 20 polls", cut, [], 1, 0.03)
    assert run.expected > 10
    assert_no_page_lost(run)


def test_a_tick_whose_records_were_dead_lettered_is_settled_by_the_sweep() -> None:
    scenario = SCENARIOS / "basic-break.jsonl"
    firing_at = parse_time(expected_messages(scenario)[0]["at"])
    # Only the evaluator dies, and only while it handles the poll whose cells fire the alert:
    # every retry of those records dies, and they end in the dead-letter queue.
    chaos = Chaos(
        1,
        0.0,
        spared=("DispatcherFunction", "IngestFunction", "NotifierFunction", "WebhookFunction", "ApiFunction"),
    )
    replay = read_replay(scenario)
    session = Session(LocalRuntime(chaos=chaos))
    session.start(replay.deployment(session.hud.url))
    sent = []
    try:
        for event, published in replay_steps(session, replay):
            sent += [
                (message.as_json()["at"], message.as_json()["message"]["status"]) for message in published
            ]
            chaos.crash_rate = 0.999 if event.at == firing_at - timedelta(minutes=10) else 0.0
    finally:
        session.stop()
    assert chaos.stats.dead_lettered > 0
    settled_by_sweep = firing_at + timedelta(minutes=2)  # app/sweep.SETTLE_BOUND after the poll
    assert sent[:2] == [(settled_by_sweep.strftime("%Y-%m-%dT%H:%M:%SZ"), "firing")] * 2
