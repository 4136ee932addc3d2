"""API Gateway Lambda authorizer: bearer token -> principal and scope (SPEC 5).

Valid tokens get a policy allowing every route, with the scope in the context; the API
itself refuses writes to `read` tokens, so that refusal is a well-formed 403. A missing or
unknown token raises exactly `Exception("Unauthorized")`, which API Gateway answers with 401.
"""

import os
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.typing import LambdaContext

from trunkwatch.api import auth
from trunkwatch.tracing import traced

logger = Logger()


def _authorization(event: dict[str, Any]) -> str | None:
    """The Authorization header value of a TOKEN or a REQUEST authorizer event."""
    if event.get("type") == "TOKEN":
        return event.get("authorizationToken")
    headers = event.get("headers") or {}
    return next((value for name, value in headers.items() if name.lower() == "authorization"), None)


def allow_all(method_arn: str, principal: str, context: dict[str, str]) -> dict[str, Any]:
    """An IAM policy allowing every method and path of the stage `method_arn` belongs to.

    `arn:aws:execute-api:region:account:api-id/stage/VERB/path` -> `.../api-id/stage/*/*`.
    """
    prefix, _, path = method_arn.partition("/")
    stage = path.split("/", 1)[0]
    return {
        "principalId": principal,
        "policyDocument": {
            "Version": "2012-10-17",
            "Statement": [
                {"Action": "execute-api:Invoke", "Effect": "Allow", "Resource": [f"{prefix}/{stage}/*/*"]}
            ],
        },
        "context": context,
    }


@logger.inject_lambda_context
@traced
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    tokens = auth.tokens_from_parameter(os.environ["API_TOKENS_PARAMETER"])
    try:
        caller = auth.authenticate(_authorization(event), tokens)
    except auth.Unauthorized as err:
        logger.info("API request not authenticated", extra={"reason": str(err)})
        raise Exception("Unauthorized") from None  # API Gateway maps this exact message to 401
    logger.append_keys(principal=caller.principal)
    return allow_all(event["methodArn"], caller.principal, {"scope": caller.scope})
