"""API Lambda: the Alertmanager-v2-compatible silences/alerts API behind API Gateway."""

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.utilities.typing import LambdaContext

from trunkwatch.api import resolver
from trunkwatch.tracing import traced

logger = Logger()
metrics = Metrics()


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_REST)
@traced
@metrics.log_metrics
def lambda_handler(event: dict, context: LambdaContext) -> dict:
    return resolver.resolve(event, context)
