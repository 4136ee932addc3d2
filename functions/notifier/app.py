"""Notifier Lambda: send due alert transitions to every receiver once a poll or a sweep has
settled (DynamoDB stream, kind=tick and settled)."""

from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes.dynamo_db_stream_event import DynamoDBRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from trunkwatch.app.notify import on_settled_tick, register_lambda_context
from trunkwatch.domain import clock

logger = Logger()
tracer = Tracer()
metrics = Metrics()
processor = BatchProcessor(event_type=EventType.DynamoDBStreams)


@tracer.capture_method
def record_handler(record: DynamoDBRecord) -> None:
    image = record.dynamodb.new_image if record.dynamodb else None
    if image:
        on_settled_tick(str(image["trunk"]), clock.now())


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    register_lambda_context(context)
    return process_partial_response(
        event=event, record_handler=record_handler, processor=processor, context=context
    )
