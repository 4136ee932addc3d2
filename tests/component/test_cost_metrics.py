"""The cost model's custom metrics are the ones a healthy deployment publishes: a replay of a
trunk breaking and recovering, through polls and webhook deliveries, publishes no metric the
model counts as failure-only, and nothing it does not count (the dashboard's metrics and
gauges only with a dashboard)."""

from __future__ import annotations

import json

import pytest

from benchmarks.cost import FAILURE_METRICS, custom_metrics, emitted_metrics
from tests.support import webhooks
from tests.support.scenarios import SCENARIOS
from trunkwatch_local.replay import parse_replay
from trunkwatch_local.session import run_replay


def _published_metrics(output: str) -> set[str]:
    names = set()
    for line in output.splitlines():
        if '"CloudWatchMetrics"' not in line:
            continue
        record = json.loads(line[line.index("{") :])
        for directive in record["_aws"]["CloudWatchMetrics"]:
            names |= {metric["Name"] for metric in directive["Metrics"]}
    return names


def test_a_healthy_replay_publishes_exactly_the_metrics_the_cost_model_bills(
    monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TRUNKWATCH_LOG_LEVEL", "INFO")  # the local runtime prints EMF only then
    history = (SCENARIOS / "basic-break.jsonl").read_text().splitlines()
    for lines in (history, webhooks.replay_as_deliveries(history)):
        assert list(run_replay(parse_replay(lines, "basic-break"), store="memory"))
    names = _published_metrics(capfd.readouterr().err)
    assert {"CellsIngested", "NotificationsSent"} <= names
    assert not names & FAILURE_METRICS
    assert names <= set(custom_metrics(dashboard=False))


def test_every_failure_only_metric_is_one_the_code_emits() -> None:
    assert emitted_metrics() >= FAILURE_METRICS
