"""Who is calling: the principal and scope the Lambda authorizer put into the request context."""

from __future__ import annotations

from aws_lambda_powertools.utilities.data_classes import APIGatewayProxyEvent

READ = "read"
WRITE = "write"
WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def principal(event: APIGatewayProxyEvent) -> str | None:
    return event.request_context.authorizer.principal_id or None


def scope(event: APIGatewayProxyEvent) -> str | None:
    value = event.request_context.authorizer.get_context().get("scope")
    return value if isinstance(value, str) else None


def may_write(event: APIGatewayProxyEvent) -> bool:
    return scope(event) == WRITE
