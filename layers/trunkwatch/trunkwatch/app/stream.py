"""DynamoDB stream batches, handled in order with partial batch failure reporting.

A plain loop instead of Powertools' batch processor and its data classes, which would load
with the handler. The first record that fails is reported with every record after it as
`batchItemFailures`: Lambda resumes a stream from the lowest failed sequence number, so the
later records come again anyway, and handling them now would break the shard's order.

A reported failure is not a Lambda error (the invocation succeeds), so the functions' error
alarms never see it: each failing record counts in `StreamRecordsFailed`, which has its own.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit

logger = Logger(child=True)
metrics = Metrics()


def image(record: dict[str, Any], which: str = "NewImage") -> dict[str, Any]:
    """The record's new (or old) image with its attribute types unwrapped ({"S": "x"} -> "x")."""
    found = record["dynamodb"].get(which) or {}
    return {name: next(iter(value.values())) for name, value in found.items()}


def each_image(
    records: list[dict[str, Any]], handle: Callable[[dict[str, Any], dict[str, Any]], object]
) -> list[str]:
    """`handle` every record's (non-empty) new image, with its old image ({} for a new item),
    in order; the sequence numbers to report as failed: the first failing record's and all
    after it."""
    for index, record in enumerate(records):
        try:
            new = image(record)
            if new:
                handle(new, image(record, "OldImage"))
        except Exception:
            logger.exception("stream record failed", extra={"sequence": _sequence(record)})
            metrics.add_metric(name="StreamRecordsFailed", unit=MetricUnit.Count, value=1)
            return [_sequence(r) for r in records[index:]]
    return []


def response(failed: list[str]) -> dict[str, Any]:
    return {"batchItemFailures": [{"itemIdentifier": sequence} for sequence in failed]}


def _sequence(record: dict[str, Any]) -> str:
    return str(record["dynamodb"]["SequenceNumber"])
