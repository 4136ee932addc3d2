"""Notifier Lambda: publish due alert transitions to SNS.

Triggered by a settled poll tick (DynamoDB stream, kind=tick) and by the schedule (a sweep
for age, staleness, reminders and silence expiry when no poll changed anything).
"""

from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes.dynamo_db_stream_event import DynamoDBRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from trunkwatch.app.notify import idempotency_config, on_settled_tick, sweep_all
from trunkwatch.domain import clock

logger = Logger()
tracer = Tracer()
metrics = Metrics()
processor = BatchProcessor(event_type=EventType.DynamoDBStreams)


@tracer.capture_method
def record_handler(record: DynamoDBRecord) -> None:
    image = record.dynamodb.new_image if record.dynamodb else None
    if image:
        on_settled_tick(str(image["pk"]), clock.now())


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    idempotency_config.register_lambda_context(context)
    if "Records" in event:
        return process_partial_response(
            event=event, record_handler=record_handler, processor=processor, context=context
        )
    results = sweep_all(clock.now())
    return {
        "sent": sum(len(r.sent) for r in results),
        "waiting": [r.trunk for r in results if r.waiting_for_poll],
    }
