"""The budgets trunkwatch has to meet, checked against the measured summary."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# "A bounded number of writes per changed cell": at most the cell's alert transaction and
# its report to the poll's tick.
MAX_WRITES_PER_CHANGED_CELL = 2


@dataclass(frozen=True)
class Budget:
    name: str
    path: str  # where the measured value is in the summary, dot-separated
    limit: float | Callable[[dict[str, Any]], float]
    unit: str = ""

    def check(self, summary: dict[str, Any]) -> dict[str, Any]:
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
            f"{handler} handler import / boto3 import", f"cold_start.handler_import_ratio.{handler}", 1.5, "x"
        )
        for handler in ("ingest", "evaluator", "notifier", "api")
    ),
    Budget("layer size unzipped", "cold_start.layer_mb", 10, " MiB"),
    Budget("projected cost at PyTorch scale", "cost.usd_per_month", 5, " USD/month"),
    Budget(
        "detection delay after the deciding job",
        "end_to_end.detection_delay_s_max",
        lambda summary: float(summary["end_to_end"]["schedule_period_s"]),
        " s (one schedule period)",
    ),
)


def check(summary: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {budget.name: budget.check(summary) for budget in BUDGETS}
