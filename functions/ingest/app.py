"""Ingest Lambda: on each schedule tick, poll every trunk's source into DynamoDB."""

from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.utilities.data_classes import EventBridgeEvent, event_source
from aws_lambda_powertools.utilities.typing import LambdaContext

from trunkwatch.app.poll import poll_all
from trunkwatch.domain import clock

logger = Logger()
tracer = Tracer()
metrics = Metrics()


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics
@event_source(data_class=EventBridgeEvent)
def lambda_handler(event: EventBridgeEvent, context: LambdaContext) -> dict[str, Any]:
    logger.debug("schedule tick", extra={"rule": event.resources, "time": event.time})
    return poll_all(clock.now())
