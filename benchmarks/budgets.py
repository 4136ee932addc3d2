"""The budgets trunkwatch has to meet, checked against the measured summary."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# "A bounded number of writes per changed cell": at most the cell's alert transaction and
# its report to the poll's tick.
MAX_WRITES_PER_CHANGED_CELL = 2
# Detection: one schedule period (the poll that first sees the job) plus this much for the
# stream path to the SNS publish: 75 s at the deployed rate(1 minute).
PIPELINE_ALLOWANCE_S = 15.0
# Push (webhook) detection: from the deciding job's `completed` delivery to the SNS publish.
PUSH_DELAY_P95_S = 5.0
PUSH_DELAY_MAX_S = 10.0
ALL_IN_USD_PER_MONTH = 10.0
# Handler import time over `import boto3` in the same run.
PIPELINE_IMPORT_RATIO = 1.3  # ingest, evaluator, notifier, authorizer
API_IMPORT_RATIO = 1.6  # the API: Powertools' validating resolver and pydantic


@dataclass(frozen=True)
class Budget:
    name: str
    path: str  # where the measured value is in the summary, dot-separated
    limit: float | Callable[[dict[str, Any]], float]
    unit: str = ""

    def check(self, summary: dict[str, Any]) -> dict[str, Any]:
        if self.path.split(".", 1)[0] not in summary:
            return {
                "budget": "not measured (run its workload)",
                "limit": None,
                "measured": None,
                "pass": None,
            }
        value: Any = summary
        for part in self.path.split("."):
            value = value[part]
        limit = self.limit(summary) if callable(self.limit) else self.limit
        return {
            "budget": f"<= {limit:g}{self.unit}",
            "limit": limit,
            "measured": value,
            "pass": bool(value <= limit),
        }


BUDGETS = (
    Budget("steady HUD poll writes no item", "ingest_hud.steady_poll.items_written", 0),
    Budget("steady GitHub poll writes no item", "ingest_github.steady_poll.items_written", 0),
    Budget("evaluator Queries per changed cell", "evaluator.queries_per_changed_cell", 1),
    Budget("evaluator Scans", "evaluator.scans", 0),
    Budget(
        "evaluator writes per changed cell", "evaluator.writes_per_changed_cell", MAX_WRITES_PER_CHANGED_CELL
    ),
    *(
        Budget(
            f"{handler} handler import / boto3 import",
            f"cold_start.handler_import_ratio.{handler}",
            API_IMPORT_RATIO if handler == "api" else PIPELINE_IMPORT_RATIO,
            "x",
        )
        for handler in ("ingest", "evaluator", "notifier", "authorizer", "api")
    ),
    Budget("pipeline layer size unzipped", "cold_start.layer_mb", 8, " MiB"),
    Budget("projected usage cost at PyTorch scale", "cost.usd_per_month", 5, " USD/month"),
    Budget(
        "projected cost with every deployed resource",
        "cost.usd_per_month_all_in",
        ALL_IN_USD_PER_MONTH,
        " USD/month",
    ),
    Budget(
        "push path's cost within the all-in budget",
        "push.usd_per_month",
        lambda summary: ALL_IN_USD_PER_MONTH
        - float(summary.get("cost", {}).get("usd_per_month_all_in", 0.0)),
        " USD/month (10 less the rest's all-in cost)",
    ),
    Budget("push detection delay p95", "push.detection_delay_s_p95", PUSH_DELAY_P95_S, " s"),
    Budget("push detection delay max", "push.detection_delay_s_max", PUSH_DELAY_MAX_S, " s"),
    Budget(
        "detection delay after the deciding job",
        "end_to_end.detection_delay_s_max",
        lambda summary: float(summary["end_to_end"]["schedule_period_s"]) + PIPELINE_ALLOWANCE_S,
        " s (a schedule period + 15 s)",
    ),
    Budget(
        "detection delay bound (a job finishing just after a poll)",
        "end_to_end.detection_delay_s_bound",
        lambda summary: float(summary["end_to_end"]["schedule_period_s"]) + PIPELINE_ALLOWANCE_S,
        " s (a schedule period + 15 s)",
    ),
)


def check(summary: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {budget.name: budget.check(summary) for budget in BUDGETS}
