"""API Gateway Lambda authorizer: bearer token -> principal and scope (design.md §5).

Valid tokens get a policy allowing every route, with the scope in the context; the API
itself refuses writes to `read` tokens, so that refusal is a well-formed 403. A missing or
unknown token raises exactly `Exception("Unauthorized")`, which API Gateway answers with 401;
so does every request while the tokens parameter is missing or malformed (logged as an error
naming it), never a crash that API Gateway would turn into 500s.
"""

from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.typing import LambdaContext

from trunkwatch.api import auth
from trunkwatch.app import settings
from trunkwatch.tracing import traced

logger = Logger()
edge = settings.Edge.from_environ(settings.AUTHORIZER)


@logger.inject_lambda_context
@traced
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    try:
        tokens = auth.tokens_from_parameter(edge.settings.api_tokens_parameter)
    except auth.TokensError as err:
        logger.error("API tokens unavailable: every request is refused", extra={"error": str(err)})
        raise Exception("Unauthorized") from None
    try:
        caller = auth.authenticate(auth.authorization_header(event), tokens)
    except auth.Unauthorized as err:
        logger.info("API request not authenticated", extra={"reason": str(err)})
        raise Exception("Unauthorized") from None  # API Gateway maps this exact message to 401
    logger.append_keys(principal=caller.principal)
    return auth.allow_all(event["methodArn"], caller)
