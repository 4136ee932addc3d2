"""Evaluator Lambda: re-judge the job of every changed cell (DynamoDB stream, kind=cell).

Records are handled in order. The first that fails is reported with every record after it
as `batchItemFailures`: for a stream, Lambda resumes from the lowest failed sequence
number, so the later records come again anyway. The records before it count towards their
polls' ticks (`settle`).
"""

from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.utilities.typing import LambdaContext

from trunkwatch.app import settings
from trunkwatch.app.evaluate import BatchEvaluation
from trunkwatch.domain import clock
from trunkwatch.tracing import traced

logger = Logger()
metrics = Metrics()


def _image(record: dict[str, Any]) -> dict[str, Any]:
    """The record's new image with its scalar attributes unwrapped ({"S": "x"} -> "x")."""
    image = record["dynamodb"].get("NewImage") or {}
    return {name: next(iter(value.values())) for name, value in image.items()}


@logger.inject_lambda_context
@traced
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    records: list[dict[str, Any]] = event["Records"]
    evaluation = BatchEvaluation(settings.deployment(), clock.now())
    failed: list[str] = []
    for index, record in enumerate(records):
        try:
            image = _image(record)
            if image:
                evaluation.cell(image)
        except Exception:
            logger.exception("record failed", extra={"sequence": record["dynamodb"]["SequenceNumber"]})
            failed = [r["dynamodb"]["SequenceNumber"] for r in records[index:]]
            break
    evaluation.settle(records, set(failed))
    return {"batchItemFailures": [{"itemIdentifier": sequence} for sequence in failed]}
