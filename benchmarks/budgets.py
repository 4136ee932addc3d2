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
# The push path, all told (Lambda, DynamoDB, logs, the secret), per million deliveries.
PUSH_USD_PER_MILLION_DELIVERIES = 1.5
# A trunk job's two deliveries that write, each its cell and its commit's state: `queued`
# (the pending cell) and `completed` (the result).
PUSH_WRITES_PER_TRUNK_JOB = 4
# A Buildkite trunk job's two deliveries that write: `job.scheduled` (the pending cell) and
# `job.finished` (its result, its shard); each its commit's state too.
BUILDKITE_PUSH_WRITES_PER_TRUNK_JOB = 4
# Handler import time over `import boto3` in the same run.
PIPELINE_IMPORT_RATIO = 1.3  # ingest, evaluator, notifier, authorizer
API_IMPORT_RATIO = 1.6  # the API: Powertools' validating resolver and pydantic


# A real trunk's history through the local runtime (benchmarks/long_history.py).
HISTORY_BASE_S = 10.0
HISTORY_PER_POLL_S = 0.25
HISTORY_PEAK_MB = 1024.0
# The shared two-week history (206 polls) in particular.
TWO_WEEKS_WALL_S = 60.0
TWO_WEEKS_RATIO = 1.5
TWO_WEEKS = "rust-toolstate-2018-04.jsonl.gz"


def _all_in_left(summary: dict[str, Any]) -> float:
    """What the all-in budget leaves a push path once the rest of the deployment is paid."""
    return ALL_IN_USD_PER_MONTH - float(summary.get("cost", {}).get("usd_per_month_all_in", 0.0))


def _period_and_allowance(section: str) -> Callable[[dict[str, Any]], float]:
    return lambda summary: float(summary[section]["schedule_period_s"]) + PIPELINE_ALLOWANCE_S


def _two_weeks(summary: dict[str, Any]) -> bool:
    return summary.get("long_history", {}).get("history") == TWO_WEEKS


@dataclass(frozen=True)
class Budget:
    name: str
    path: str  # where the measured value is in the summary, dot-separated
    limit: float | Callable[[dict[str, Any]], float]
    unit: str = ""
    when: Callable[[dict[str, Any]], bool] = lambda summary: True  # beyond being measured

    def applies(self, summary: dict[str, Any]) -> bool:
        """Whether the summary measured it (a stand-alone workload's run has one section)."""
        return self.path.split(".")[0] in summary and self.when(summary)

    def check(self, summary: dict[str, Any]) -> dict[str, Any]:
        value: Any = summary
        for part in self.path.split("."):
            # Not in the summary, or a section an older run measured without it.
            if not isinstance(value, dict) or part not in value:
                return {"budget": "not measured (run its workload)"} | dict.fromkeys(
                    ("limit", "measured", "pass")
                )
            value = value[part]
        limit = self.limit(summary) if callable(self.limit) else self.limit
        return {
            "budget": f"<= {limit:g}{self.unit}",
            "limit": limit,
            "measured": value,
            "pass": bool(value <= limit),
        }


ALL_IN_LEFT = " USD/month (10 less the rest's all-in cost)"
PERIOD_AND_ALLOWANCE = " s (a schedule period + 15 s)"
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
    Budget("push path's cost within the all-in budget", "push.usd_per_month", _all_in_left, ALL_IN_LEFT),
    Budget(
        "push path's cost per million deliveries",
        "push.usd_per_million_deliveries",
        PUSH_USD_PER_MILLION_DELIVERIES,
        " USD",
    ),
    Budget("push write units per trunk job", "push.ddb_write_units_per_trunk_job", PUSH_WRITES_PER_TRUNK_JOB),
    Budget("push detection delay p95", "push.detection_delay_s_p95", PUSH_DELAY_P95_S, " s"),
    Budget("push detection delay max", "push.detection_delay_s_max", PUSH_DELAY_MAX_S, " s"),
    # The same trunk fed by Buildkite's deliveries, priced at vLLM's volume. Its cost per
    # million deliveries has no budget: none of its deliveries is a cheap dropped one.
    Budget(
        "Buildkite push path's cost within the all-in budget",
        "push.buildkite.usd_per_month",
        _all_in_left,
        ALL_IN_LEFT,
    ),
    Budget(
        "Buildkite push write units per trunk job",
        "push.buildkite.ddb_write_units_per_trunk_job",
        BUILDKITE_PUSH_WRITES_PER_TRUNK_JOB,
    ),
    Budget(
        "Buildkite push detection delay p95", "push.buildkite.detection_delay_s_p95", PUSH_DELAY_P95_S, " s"
    ),
    Budget(
        "Buildkite push detection delay max", "push.buildkite.detection_delay_s_max", PUSH_DELAY_MAX_S, " s"
    ),
    Budget(
        "detection delay after the deciding job",
        "end_to_end.detection_delay_s_max",
        _period_and_allowance("end_to_end"),
        PERIOD_AND_ALLOWANCE,
    ),
    Budget(
        "detection delay bound (a job finishing just after a poll)",
        "end_to_end.detection_delay_s_bound",
        _period_and_allowance("end_to_end"),
        PERIOD_AND_ALLOWANCE,
    ),
)
# An organization's trunks through the deployed shape (benchmarks/org.py, run on its own).
ORG_BUDGETS = (
    Budget("organization: trunk polls a tick missed", "org.polls_missed", 0),
    Budget(
        "organization: push detection delay p95", "org.push_detection_delay_s_p95", PUSH_DELAY_P95_S, " s"
    ),
    Budget(
        "organization: poll detection delay p95",
        "org.poll_detection_delay_s_p95",
        _period_and_allowance("org"),
        PERIOD_AND_ALLOWANCE,
    ),
)
CHAOS_BUDGETS = tuple(
    budget
    for rate in ("3%", "8%")
    for budget in (
        Budget(
            f"runs losing a message, {rate} of AWS calls dying",
            f"chaos.by_rate.{rate}.runs_losing_messages",
            0,
        ),
        Budget(
            f"runs sending a message twice beyond a crash right after its publish, {rate}",
            f"chaos.by_rate.{rate}.runs_with_unexplained_extra",
            0,
        ),
    )
)
HISTORY_BUDGETS = (
    Budget(
        "real history wall time",
        "long_history.wall_s",
        lambda summary: HISTORY_BASE_S + HISTORY_PER_POLL_S * summary["long_history"]["polls"],
        " s (10 s + 0.25 s per poll)",
    ),
    Budget("real history peak memory", "long_history.peak_mb", HISTORY_PEAK_MB, " MiB"),
    Budget("two-week history wall time", "long_history.wall_s", TWO_WEEKS_WALL_S, " s", _two_weeks),
    Budget(
        "two-week history last/first tenth per-poll time",
        "long_history.ratio",
        TWO_WEEKS_RATIO,
        "x",
        _two_weeks,
    ),
)
EVERY_BUDGET = (*BUDGETS, *HISTORY_BUDGETS, *CHAOS_BUDGETS, *ORG_BUDGETS)


def check(summary: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {budget.name: budget.check(summary) for budget in EVERY_BUDGET if budget.applies(summary)}
