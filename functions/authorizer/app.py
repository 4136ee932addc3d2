"""API Gateway Lambda authorizer: bearer token -> principal and scope (SPEC 5).

Valid tokens get a policy allowing every route, with the scope in the context; the API
itself refuses writes to `read` tokens, so that refusal is a well-formed 403. A missing or
unknown token raises exactly `Exception("Unauthorized")`, which API Gateway answers with 401.
"""

from typing import Any

from aws_lambda_powertools import Logger, Tracer
from aws_lambda_powertools.utilities.data_classes.api_gateway_authorizer_event import (
    APIGatewayAuthorizerRequestEvent,
    APIGatewayAuthorizerResponse,
    APIGatewayAuthorizerTokenEvent,
)
from aws_lambda_powertools.utilities.typing import LambdaContext

from trunkwatch.api import auth
from trunkwatch.app import settings

logger = Logger()
tracer = Tracer()


def _authorization(event: dict[str, Any]) -> str | None:
    """The Authorization header value of a TOKEN or a REQUEST authorizer event."""
    if event.get("type") == "TOKEN":
        return APIGatewayAuthorizerTokenEvent(event).get("authorizationToken")
    return APIGatewayAuthorizerRequestEvent(event).headers.get("authorization")


@logger.inject_lambda_context
@tracer.capture_lambda_handler
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    tokens = auth.tokens_from_parameter(settings.current().api_tokens_parameter)
    try:
        caller = auth.authenticate(_authorization(event), tokens)
    except auth.Unauthorized as err:
        logger.info("API request not authenticated", extra={"reason": str(err)})
        raise Exception("Unauthorized") from None  # API Gateway maps this exact message to 401
    logger.append_keys(principal=caller.principal)
    policy = APIGatewayAuthorizerResponse.from_route_arn(
        event["methodArn"], principal_id=caller.principal, context={"scope": caller.scope}
    )
    policy.allow_all_routes()
    return policy.asdict()
