"""Dispatcher Lambda: on each schedule tick, one poll message per due trunk to ingest's queue."""

import warnings
from typing import Any

import boto3
from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.utilities.typing import LambdaContext

from trunkwatch.app import settings
from trunkwatch.app.dispatch import dispatch
from trunkwatch.tracing import traced

logger = Logger()
metrics = Metrics()
# Not every invocation has a metric to publish: Powertools' documented way to say so.
warnings.filterwarnings("ignore", "No application metrics to publish*")
edge = settings.Edge.from_environ(settings.DISPATCHER)
queue = boto3.client("sqs", region_name=edge.settings.region, endpoint_url=edge.settings.endpoint_url)


@logger.inject_lambda_context
@traced
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    logger.debug("schedule tick", extra={"rule": event.get("resources"), "time": event.get("time")})
    return dispatch(
        edge.storage().trunks, edge.deployment(), edge.clock.now(), queue, edge.settings.poll_queue_url
    )
