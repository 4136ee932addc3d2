"""Evaluator Lambda: re-judge the job of every changed cell (DynamoDB stream, kind=cell), and
on the schedule sweep what changes with the clock alone."""

import warnings
from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.utilities.typing import LambdaContext

from trunkwatch.app import settings, stream
from trunkwatch.app.evaluate import BatchEvaluation, oldest_changes
from trunkwatch.app.sweep import sweep_all
from trunkwatch.tracing import traced

logger = Logger()
metrics = Metrics()
# Not every invocation has a metric to publish: Powertools' documented way to say so.
warnings.filterwarnings("ignore", "No application metrics to publish*")
edge = settings.Edge.from_environ(settings.PIPELINE)


@logger.inject_lambda_context
@traced
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    deployment, storage = edge.deployment(), edge.storage()
    if "Records" not in event:  # the schedule
        results = sweep_all(storage, deployment, edge.clock.now())
        return {
            "rejudged": sum(r.rejudged for r in results),
            "waiting": [r.trunk for r in results if r.waiting_for_poll],
        }
    evaluation = BatchEvaluation(storage, deployment, edge.clock.now(), oldest_changes(event["Records"]))
    failed = stream.each_image(event["Records"], evaluation.cell)
    # The records before the first failure count towards their polls' ticks.
    evaluation.settle(event["Records"], set(failed))
    return stream.response(failed)
