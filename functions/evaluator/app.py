"""Evaluator Lambda: re-judge the job of every changed cell (DynamoDB stream, kind=cell), and
on the schedule sweep what changes with the clock alone."""

from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes.dynamo_db_stream_event import DynamoDBRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from trunkwatch.app import settings
from trunkwatch.app.evaluate import BatchEvaluation, failed_ids
from trunkwatch.app.sweep import sweep_all
from trunkwatch.domain import clock

logger = Logger()
tracer = Tracer()
metrics = Metrics()
processor = BatchProcessor(event_type=EventType.DynamoDBStreams)


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    if "Records" not in event:  # the schedule
        results = sweep_all(clock.now())
        return {
            "rejudged": sum(r.rejudged for r in results),
            "waiting": [r.trunk for r in results if r.waiting_for_poll],
        }
    evaluation = BatchEvaluation(settings.deployment(), clock.now())

    def record_handler(record: DynamoDBRecord) -> None:
        if record.dynamodb and record.dynamodb.new_image:
            evaluation.cell(record.dynamodb.new_image, record.dynamodb.old_image or None)

    response = process_partial_response(
        event=event, record_handler=record_handler, processor=processor, context=context
    )
    evaluation.settle(event["Records"], failed_ids(response))
    return response
