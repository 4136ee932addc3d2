"""Webhook Lambda (function URL): GitHub `push`, `workflow_run` and `workflow_job` deliveries
and Buildkite `job.finished` and `build.finished` ones of the webhook-fed trunks, written as
the cells the poll writes."""

from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities import parameters
from aws_lambda_powertools.utilities.typing import LambdaContext

from trunkwatch.app import settings
from trunkwatch.app.delivery import Accepted, WebhookSecrets, store, triage
from trunkwatch.tracing import traced

logger = Logger()
edge = settings.Edge.from_environ(settings.WEBHOOK)


def _github_secret() -> str:
    name = edge.settings.webhook_secret_parameter
    return str(parameters.get_parameter(name, decrypt=True, max_age=settings.WEBHOOK_SECRET_CACHE_SECONDS))


def _buildkite_token() -> str:
    """The Buildkite webhook's token; "" (every Buildkite delivery refused, 401) when its
    parameter cannot be read, as on a stack not fed by Buildkite, which has none."""
    name = edge.settings.buildkite_webhook_token_parameter
    try:
        return str(
            parameters.get_parameter(name, decrypt=True, max_age=settings.WEBHOOK_SECRET_CACHE_SECONDS)
        )
    except parameters.GetParameterError as err:
        logger.warning(
            f"cannot read the Buildkite webhook token from SSM parameter {name} ({err}): create it"
            " (docs/sources-and-webhooks.md#buildkite-webhooks) to accept Buildkite deliveries"
        )
        return ""


SECRETS = WebhookSecrets(github=_github_secret, buildkite=_buildkite_token)


def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    # Most deliveries (every pull request's jobs) are answered here, before any Powertools
    # wrapper: no context logging or trace segment for what is not stored. The function
    # publishes no metric: a stored delivery's counts are in its log line.
    verdict = triage(event, SECRETS, deployment=edge.deployment, now=edge.clock.now)
    if isinstance(verdict, dict):
        return verdict
    return _store(verdict, context)


@logger.inject_lambda_context
@traced
def _store(accepted: Accepted, context: LambdaContext) -> dict[str, Any]:
    # The wrappers take the accepted delivery as their event: none of them reads it.
    return store(accepted, edge.storage(), edge.clock)
