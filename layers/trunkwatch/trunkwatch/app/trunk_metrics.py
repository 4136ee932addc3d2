"""Per-trunk gauges for the dashboard's trunk-health widgets (dimension `trunk`).

Each is its own EMF record (Powertools' single_metric), so the trunk dimension does not
spread to the function's other metrics, which keep the `service` dimension alone. They, and
the other metrics only the dashboard shows, are emitted only when the stack has its
dashboard (`Settings.dashboard_metrics`): each is a custom metric's monthly fee, per trunk
for the gauges.
"""

from __future__ import annotations

from aws_lambda_powertools.metrics import MetricUnit, single_metric
from aws_lambda_powertools.metrics.functions import is_metrics_disabled

FAILING_JOBS = "FailingJobs"  # firing job alerts in scope, per trunk (notifier, each settled tick)
ALERTS_FIRING = "TrunkAlertsFiring"  # every firing alert of the trunk (notifier)
SECONDS_SINCE_GOOD_POLL = "SecondsSinceGoodPoll"  # 0 after a good poll (ingest, each poll)


def trunk_gauge(name: str, trunk_id: str, value: float, unit: MetricUnit = MetricUnit.Count) -> None:
    # single_metric prints even when metrics are disabled (POWERTOOLS_METRICS_DISABLED, as
    # the local runtime sets unless logs are asked for); the function's other metrics do not.
    if is_metrics_disabled():
        return
    with single_metric(name=name, unit=unit, value=value) as metric:
        metric.add_dimension(name="trunk", value=trunk_id)
