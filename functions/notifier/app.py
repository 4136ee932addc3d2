"""Notifier Lambda: send due alert transitions to every receiver once a poll or a sweep has
settled (DynamoDB stream, kind=tick and settled), and the heartbeat at sweeps' ticks."""

import warnings
from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.utilities.typing import LambdaContext

from trunkwatch.app import settings, stream
from trunkwatch.app.settled_tick import on_settled_tick
from trunkwatch.tracing import traced

logger = Logger()
metrics = Metrics()
# Not every invocation has a metric to publish: Powertools' documented way to say so.
warnings.filterwarnings("ignore", "No application metrics to publish*")
edge = settings.Edge.from_environ(settings.NOTIFIER)


@logger.inject_lambda_context
@traced
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    # The batch's ticks share the invocation's time: receivers left when it runs short wait.
    def remaining_s() -> float:
        return context.get_remaining_time_in_millis() / 1000

    def settled(tick: dict[str, Any], _before: dict[str, Any]) -> None:
        # Read per tick (cached): a configuration that cannot be read fails this tick, which
        # comes again, with every record after it.
        on_settled_tick(
            edge.storage(),
            str(tick["trunk"]),
            edge.clock,
            edge.settings,
            edge.deployment(),
            remaining_s,
            tick_id=str(tick.get("poll", "")),
        )

    return stream.response(stream.each_image(event["Records"], settled))
