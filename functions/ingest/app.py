"""Ingest Lambda: poll the trunk each message of the dispatcher's queue names into DynamoDB."""

import time
import warnings
from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.utilities.typing import LambdaContext

from trunkwatch.app import settings
from trunkwatch.app.poll import poll_records
from trunkwatch.tracing import traced

DEADLINE_MARGIN_S = 5.0

logger = Logger()
metrics = Metrics()
# Not every invocation has a metric to publish: Powertools' documented way to say so.
warnings.filterwarnings("ignore", "No application metrics to publish*")
edge = settings.Edge.from_environ(settings.PIPELINE)


@logger.inject_lambda_context
@traced
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    # Every poll ends in time to log and flush metrics before Lambda's own timeout.
    deadline = time.monotonic() + max(1.0, context.get_remaining_time_in_millis() / 1000 - DEADLINE_MARGIN_S)
    return poll_records(
        event["Records"],
        edge.storage(),
        edge.deployment(),
        edge.clock.now(),
        deadline,
        gauges=edge.settings.dashboard_metrics,
    )
