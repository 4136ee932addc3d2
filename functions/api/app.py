"""API Lambda: the Alertmanager-v2-compatible silences/alerts API behind API Gateway."""

import warnings

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.utilities.typing import LambdaContext

from trunkwatch.api import resolver
from trunkwatch.api.edge import CONTEXT_KEY
from trunkwatch.app import settings
from trunkwatch.tracing import traced

logger = Logger()
metrics = Metrics()
# Not every invocation has a metric to publish: Powertools' documented way to say so.
warnings.filterwarnings("ignore", "No application metrics to publish*")
edge = settings.Edge.from_environ(settings.API)


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_REST)
@traced
@metrics.log_metrics
def lambda_handler(event: dict, context: LambdaContext) -> dict:
    resolver.append_context(**{CONTEXT_KEY: edge})
    return resolver.resolve(event, context)
