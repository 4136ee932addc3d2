"""The trunk-health gauges behind the dashboard's per-trunk widgets: EMF records with the
`trunk` dimension, from ingest (seconds since the last good poll) and the notifier (failing
jobs, alerts firing), printed only when the stack has its dashboard."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest

from tests.support.alerts import NOW, failing, view
from tests.support.hud import two_trunks
from tests.support.polls import poll_each
from trunkwatch.app import notify
from trunkwatch.app.settings import Settings
from trunkwatch.app.trunk_metrics import ALERTS_FIRING, FAILING_JOBS, SECONDS_SINCE_GOOD_POLL
from trunkwatch.domain.alerts import Links
from trunkwatch.domain.clock import SimulatedClock
from trunkwatch.domain.config import RuleConfig, TrunkConfig
from trunkwatch_local.hud_server import HudServer

DASHBOARD_URL = "https://us-east-1.console.aws.amazon.com/cloudwatch/home#dashboards/dashboard/trunkwatch"


@pytest.fixture
def with_dashboard(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "false")  # a local runtime may have set it
    monkeypatch.setenv("DASHBOARD_URL", DASHBOARD_URL)


def gauges(output: str, name: str) -> dict[str, float]:
    """trunk -> value of the EMF records of metric `name` in the captured stdout."""
    found = {}
    for line in output.splitlines():
        if not line.startswith("{") or name not in line:
            continue
        record = json.loads(line)
        (directive,) = record["_aws"]["CloudWatchMetrics"]
        if directive["Namespace"] == "Trunkwatch" and directive["Dimensions"] == [["trunk", "service"]]:
            found[record["trunk"]] = record[name][0] if isinstance(record[name], list) else record[name]
    return found


def test_ingest_reports_seconds_since_each_trunks_last_good_poll(
    aws: Any,
    healthy: HudServer,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    with_dashboard: None,
) -> None:
    deployment = two_trunks(monkeypatch, "http://127.0.0.1:9", healthy.url)  # nothing listens on port 9
    trunks = aws["storage"].trunks
    trunks.record_poll_success("evil/repo#main", NOW - timedelta(minutes=5), trunks.state("evil/repo#main"))
    poll_each(aws["storage"], deployment, NOW, gauges=True)
    seconds = gauges(capsys.readouterr().out, SECONDS_SINCE_GOOD_POLL)
    assert seconds == {"evil/repo#main": 300.0, "pytorch/pytorch#main": 0.0}


def _notify_one_failing_job(aws: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    job, level = view(), view(jobs={"pull / x": failing()})
    del level.alert.labels["job"]
    level.alert.labels.update(alertname="TrunkBroken")
    monkeypatch.setattr(notify, "trunk_views", lambda *args, **kwargs: [job, level])
    trunk = TrunkConfig(repo="pytorch/pytorch")
    tick = notify.Tick(
        aws["storage"],
        trunk,
        RuleConfig(),
        Links("http://api"),
        NOW,
        SimulatedClock(NOW),
        Settings.from_environ([]),
        lambda: 60.0,
    )
    notify.notify_trunk(tick, [], [])


def test_notifier_reports_failing_jobs_and_alerts_firing_per_trunk(
    aws: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], with_dashboard: None
) -> None:
    _notify_one_failing_job(aws, monkeypatch)
    output = capsys.readouterr().out
    assert gauges(output, FAILING_JOBS) == {"pytorch/pytorch#main": 1.0}
    assert gauges(output, ALERTS_FIRING) == {"pytorch/pytorch#main": 2.0}


def test_without_the_dashboard_no_gauge_and_no_alerts_firing_metric(
    aws: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # The default stack: nothing would show these, and each is a custom metric's fee.
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "false")
    monkeypatch.delenv("DASHBOARD_URL", raising=False)
    notify.metrics.clear_metrics()
    _notify_one_failing_job(aws, monkeypatch)
    output = capsys.readouterr().out
    assert gauges(output, FAILING_JOBS) == gauges(output, ALERTS_FIRING) == {}
    assert "AlertsFiring" not in notify.metrics.metric_set


def test_no_gauge_is_printed_while_metrics_are_disabled(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from trunkwatch.app.trunk_metrics import trunk_gauge

    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "true")
    monkeypatch.setenv("DASHBOARD_URL", DASHBOARD_URL)
    trunk_gauge(FAILING_JOBS, "pytorch/pytorch#main", 1)
    assert capsys.readouterr().out == ""
