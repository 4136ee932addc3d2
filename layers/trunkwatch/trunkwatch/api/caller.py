"""Who is calling: the principal and scope the Lambda authorizer put into the request context."""

from __future__ import annotations

from aws_lambda_powertools.utilities.data_classes import APIGatewayProxyEvent
from aws_lambda_powertools.utilities.data_classes.common import BaseProxyEvent

WRITE = "write"
WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def _authorizer(event: BaseProxyEvent) -> dict:
    return APIGatewayProxyEvent(event.raw_event).request_context.authorizer.get_context()


def principal(event: BaseProxyEvent) -> str | None:
    value = _authorizer(event).get("principalId")
    return value if isinstance(value, str) and value else None


def scope(event: BaseProxyEvent) -> str | None:
    value = _authorizer(event).get("scope")
    return value if isinstance(value, str) else None


def may_write(event: BaseProxyEvent) -> bool:
    return scope(event) == WRITE
