"""The whole pipeline on the local runtime: stream batches, retries, exactly-once messages.

On the in-memory store, the default: its stream is pumped as the mappings deliver one (the
DynamoDB store proves its items and stream in test_storage_contract and test_install)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import boto3
import pytest

from tests.support.aws import record_stream_batches
from trunkwatch.app import evaluate
from trunkwatch.domain.alerts import RECEIVER
from trunkwatch.domain.job_alerts import JobAlert
from trunkwatch.domain.notification_log import LogEntry
from trunkwatch_local.hud_server import HudServer
from trunkwatch_local.runtime import LocalRuntime
from trunkwatch_local.scenario import DEMO_JOBS, Trunk, _demo_outcome

BROKEN = "pull / linux-jammy-py3.10-gcc11 / test (default, linux.2xlarge)"
TRUNK = "pytorch/pytorch#main"


@pytest.fixture
def pipeline() -> Iterator[tuple[LocalRuntime, HudServer, Trunk]]:
    hud = HudServer()
    trunk = Trunk(jobs=DEMO_JOBS, outcome=_demo_outcome)
    from trunkwatch_local.replay import Replay

    runtime = LocalRuntime().start(Replay("pytorch/pytorch", "main", {}).deployment(hud.url))
    try:
        yield runtime, hud, trunk
    finally:
        runtime.stop()
        hud.stop()


def run_until(runtime: LocalRuntime, hud: HudServer, trunk: Trunk, hours: float) -> list[Any]:
    sent = []
    for at, snapshot in trunk.polls(timedelta(minutes=10), trunk.start + timedelta(hours=hours)):
        hud.serve(snapshot)
        runtime.tick(at)
        sent += runtime.published(at)
    return sent


def kinds(messages: list[Any]) -> list[tuple[str, str]]:
    return sorted((m.message["status"], m.attributes["alertname"]) for m in messages)


def alert_state(runtime: LocalRuntime) -> list[JobAlert]:
    return runtime.stack.storage().alerts.of_trunk(TRUNK)


def test_demo_trunk_fires_and_resolves(pipeline: Any) -> None:
    runtime, hud, trunk = pipeline
    sent = run_until(runtime, hud, trunk, 7)
    assert kinds(sent) == [
        ("firing", "TrunkBroken"),
        ("firing", "TrunkJobFailing"),
        ("resolved", "TrunkBroken"),
        ("resolved", "TrunkJobFailing"),
    ]
    job = next(m for m in sent if m.attributes["alertname"] == "TrunkJobFailing")
    annotations = job.message["alerts"][0]["annotations"]
    assert job.message["commonLabels"]["job"] == BROKEN
    assert annotations["culprit_sha"] == trunk.sha(4) and annotations["culprit_pr"] == "160004"
    assert annotations["last_pass_sha"] == trunk.sha(3)
    assert "FAILED test/test_ops.py" in annotations["failure_lines"]
    assert runtime.dead_letters() == []


def test_redelivered_stream_batch_changes_nothing(pipeline: Any) -> None:
    runtime, hud, trunk = pipeline
    delivered = record_stream_batches(runtime)
    sent = run_until(runtime, hud, trunk, 4)
    assert kinds(sent) == [("firing", "TrunkBroken"), ("firing", "TrunkJobFailing")]
    before = alert_state(runtime)
    assert before
    last_tick = trunk.start + timedelta(hours=4)
    runtime.clock.set(last_tick)
    for function, event in delivered:  # every batch again, as a retrying Lambda would
        runtime.invoke(function, event)
    runtime.pump.drain()
    assert alert_state(runtime) == before
    assert runtime.published(trunk.start) == []


def test_record_failing_mid_batch_is_retried_without_duplicates(
    pipeline: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    runtime, hud, trunk = pipeline
    real = evaluate.evaluate_job
    failures = {"left": 3}

    def flaky_evaluate(pk: str, job: str, *args: Any, **kwargs: Any) -> Any:
        if job == BROKEN and failures["left"]:
            failures["left"] -= 1
            raise RuntimeError("injected evaluation failure")
        return real(pk, job, *args, **kwargs)

    monkeypatch.setattr(evaluate, "evaluate_job", flaky_evaluate)
    sent = run_until(runtime, hud, trunk, 7)
    assert failures["left"] == 0 and runtime.pump.stats.retries >= 3
    assert kinds(sent) == [
        ("firing", "TrunkBroken"),
        ("firing", "TrunkJobFailing"),
        ("resolved", "TrunkBroken"),
        ("resolved", "TrunkJobFailing"),
    ]
    assert runtime.dead_letters() == []


def test_publish_failure_then_retry_sends_each_transition_once(pipeline: Any) -> None:
    runtime, hud, trunk = pipeline
    sns = boto3.client("sns")
    subscriptions = sns.list_subscriptions_by_topic(TopicArn=runtime.stack.topic_arn)["Subscriptions"]
    sns.delete_topic(TopicArn=runtime.stack.topic_arn)  # every publish fails until it is back
    failed_at, sent = None, []
    for at, snapshot in trunk.polls(timedelta(minutes=10), trunk.start + timedelta(hours=7)):
        hud.serve(snapshot)
        runtime.tick(at)  # a failed delivery is logged and left for the next tick, never raised
        if failed_at is None and runtime.stack.storage().alerts.of_trunk(TRUNK, firing_only=True):
            # An alert fires while SNS is down: nothing may be recorded as sent.
            assert {entry.last_status for entry in sns_log(runtime)} <= {None}
            failed_at = at
            sns.create_topic(Name=runtime.stack.topic_arn.rsplit(":", 1)[1])
            for subscription in subscriptions:
                sns.subscribe(
                    TopicArn=runtime.stack.topic_arn,
                    Protocol=subscription["Protocol"],
                    Endpoint=subscription["Endpoint"],
                )
        sent += runtime.published(at)
    assert failed_at is not None
    assert kinds(sent) == [
        ("firing", "TrunkBroken"),
        ("firing", "TrunkJobFailing"),
        ("resolved", "TrunkBroken"),
        ("resolved", "TrunkJobFailing"),
    ]
    assert min(m.at for m in sent) > failed_at  # held while SNS failed, sent at the next tick
    assert "resolved" in {entry.last_status for entry in sns_log(runtime)}  # the log read above


def sns_log(runtime: LocalRuntime) -> list[LogEntry]:
    """The trunk's notification log for the alert topic."""
    return list(runtime.stack.storage().logs.of_receiver(TRUNK, RECEIVER).values())


def test_exhausted_retries_go_to_the_dead_letter_queue(
    pipeline: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    runtime, hud, trunk = pipeline

    def broken(*args: Any) -> Any:
        raise RuntimeError("always fails")

    monkeypatch.setattr(evaluate, "evaluate_job", broken)
    hud.serve(trunk.snapshot(trunk.start + timedelta(hours=2)))
    runtime.tick(trunk.start + timedelta(hours=2))
    letters = runtime.dead_letters()
    assert letters and all(
        letter["requestContext"]["condition"] == "RetryAttemptsExhausted" for letter in letters
    )
    assert sum(letter["DDBStreamBatchInfo"]["batchSize"] for letter in letters) > 0
