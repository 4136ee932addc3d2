"""Notifier Lambda: publish due alert transitions to SNS.

Triggered by a settled poll tick (DynamoDB stream, kind=tick) and by the schedule (a sweep
for age, staleness, reminders and silence expiry when no poll changed anything). Stream
records are handled in order; the first that fails is reported with every record after it
as `batchItemFailures` (Lambda resumes a stream from the lowest failed sequence number).
"""

from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.utilities.typing import LambdaContext

from trunkwatch.app import notify
from trunkwatch.app.notify import on_settled_tick, sweep_all
from trunkwatch.domain import clock
from trunkwatch.tracing import traced

logger = Logger()
metrics = Metrics()


@logger.inject_lambda_context
@traced
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    notify.idempotency_config.register_lambda_context(context)
    if "Records" in event:
        records: list[dict[str, Any]] = event["Records"]
        for index, record in enumerate(records):
            try:
                pk = ((record["dynamodb"].get("NewImage") or {}).get("pk") or {}).get("S")
                if pk:
                    on_settled_tick(pk, clock.now())
            except Exception:
                logger.exception("record failed", extra={"sequence": record["dynamodb"]["SequenceNumber"]})
                failed = records[index:]
                return {
                    "batchItemFailures": [{"itemIdentifier": r["dynamodb"]["SequenceNumber"]} for r in failed]
                }
        return {"batchItemFailures": []}
    results = sweep_all(clock.now())
    return {
        "sent": sum(len(r.sent) for r in results),
        "waiting": [r.trunk for r in results if r.waiting_for_poll],
    }
