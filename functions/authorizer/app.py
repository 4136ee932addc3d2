"""API Gateway Lambda authorizer: bearer token -> principal and scope (SPEC 5).

Valid tokens get a policy allowing every route, with the scope in the context; the API
itself refuses writes to `read` tokens, so that refusal is a well-formed 403. A missing or
unknown token raises exactly `Exception("Unauthorized")`, which API Gateway answers with 401.
"""

from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.typing import LambdaContext

from trunkwatch.api import auth
from trunkwatch.app import settings
from trunkwatch.tracing import traced

logger = Logger()


@logger.inject_lambda_context
@traced
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    tokens = auth.tokens_from_parameter(settings.current().api_tokens_parameter)
    try:
        caller = auth.authenticate(auth.authorization_header(event), tokens)
    except auth.Unauthorized as err:
        logger.info("API request not authenticated", extra={"reason": str(err)})
        raise Exception("Unauthorized") from None  # API Gateway maps this exact message to 401
    logger.append_keys(principal=caller.principal)
    return auth.allow_all(event["methodArn"], caller)
