"""The API's resolver: the routes, the gate every request passes, and every refusal as
`{"error": "<what is wrong>"}` (logged, and counted in the `ApiErrors` metric).
"""

from __future__ import annotations

import functools
import json

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response, content_types
from aws_lambda_powertools.event_handler.exceptions import (
    ForbiddenError,
    RequestEntityTooLargeError,
    ServiceError,
)
from aws_lambda_powertools.event_handler.middlewares import NextMiddleware
from aws_lambda_powertools.event_handler.openapi.exceptions import (
    RequestUnsupportedContentType,
    RequestValidationError,
)
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.data_classes import APIGatewayProxyEvent

from trunkwatch.api import acks, alerts, caller, page, runbook, silences, status, trunks
from trunkwatch.api.edge import CONTEXT_KEY
from trunkwatch.api.models import ApiError
from trunkwatch.app.health import UnknownTrunk
from trunkwatch.app.settings import Edge
from trunkwatch.domain.clock import format_time
from trunkwatch.silences.matchers import SilenceError
from trunkwatch.silences.model import SilenceConflict, SilenceNotFound
from trunkwatch.silences.postable import describe_errors

MAX_BODY_BYTES = 64 * 1024

logger = Logger(child=True)
metrics = Metrics()
resolver = APIGatewayRestResolver(enable_validation=True)


def _error(status_code: int, message: str) -> Response:
    event = resolver.current_event
    logger.warning(
        "API request refused",
        extra={"status": status_code, "error": message, "method": event.http_method, "path": event.path},
    )
    metrics.add_metric(name="ApiErrors", unit=MetricUnit.Count, value=1)
    return Response(
        status_code=int(status_code), content_type=content_types.APPLICATION_JSON, body={"error": message}
    )


def _refusal(event: APIGatewayProxyEvent) -> ServiceError | None:
    """Checks that come before looking at what the request says."""
    if event.http_method in caller.WRITE_METHODS and not caller.may_write(event):
        return ForbiddenError(
            "this token may only read; creating or expiring silences and acknowledging alerts"
            " need a write token"
        )
    body = event.body or ""
    if len(body.encode("utf-8", "replace")) > MAX_BODY_BYTES:
        return RequestEntityTooLargeError(f"request body is larger than {MAX_BODY_BYTES} bytes")
    content_type = (event.headers.get("content-type") or "application/json").split(";")[0].strip().lower()
    if body and content_type != content_types.APPLICATION_JSON:
        return ServiceError(415, f"Content-Type must be application/json, not {content_type!r}")
    return None


# The API's clock on every answer: the status page counts "ago", "in" and a new silence's
# start from it, not the browser's (a local replay's clock is not today's).
CLOCK_HEADER = "X-Trunkwatch-Time"


def _gate(app: APIGatewayRestResolver, next_middleware: NextMiddleware) -> Response:
    refusal = _refusal(app.current_event)
    if refusal is not None:
        raise refusal
    response = next_middleware(app)
    edge = app.context.get(CONTEXT_KEY)
    if isinstance(edge, Edge):
        response.headers[CLOCK_HEADER] = format_time(edge.clock.now())
    return response


resolver.use(middlewares=[_gate])


def _request_error(message: str) -> Response:
    """A request that could not be read; validation runs before any middleware, so a refusal
    from the gate is looked for first and takes precedence."""
    refusal = _refusal(resolver.current_event)
    if refusal is not None:
        return _error(refusal.status_code, str(refusal.msg))
    return _error(400, message)


@resolver.exception_handler([RequestValidationError, RequestUnsupportedContentType])
def _invalid_request(err: RequestValidationError | RequestUnsupportedContentType) -> Response:
    return _request_error(describe_errors(err.errors()))


@resolver.exception_handler(UnicodeDecodeError)
def _not_text(_: UnicodeDecodeError) -> Response:
    return _request_error("request body is not UTF-8 text")


@resolver.exception_handler(RecursionError)
def _too_deep(_: RecursionError) -> Response:
    # json.loads of a deeply nested body (validation parses it before any middleware runs).
    return _request_error("request body is JSON nested too deeply")


@resolver.exception_handler(ServiceError)
def _service_error(err: ServiceError) -> Response:
    return _error(err.status_code, str(err.msg))


@resolver.exception_handler(SilenceError)
def _bad_silence(err: SilenceError) -> Response:
    return _error(400, str(err))


@resolver.exception_handler(SilenceNotFound)
def _no_silence(err: SilenceNotFound) -> Response:
    return _error(404, str(err))


@resolver.exception_handler(UnknownTrunk)
def _no_trunk(err: UnknownTrunk) -> Response:
    return _error(404, str(err))


@resolver.exception_handler(SilenceConflict)
def _conflict(err: SilenceConflict) -> Response:
    return _error(409, str(err))


@resolver.not_found
def _no_route(_: Exception) -> Response:
    event = resolver.current_event
    return _error(404, f"no endpoint {event.http_method} {event.path}")


@resolver.exception_handler(Exception)
def _internal(err: Exception) -> Response:
    logger.exception("API request failed")
    metrics.add_metric(name="ApiErrors", unit=MetricUnit.Count, value=1)
    return Response(
        status_code=500,
        content_type=content_types.APPLICATION_JSON,
        body={"error": "internal error; see the logs"},
    )


@functools.cache
def _openapi_document() -> str:
    document = json.loads(
        resolver.get_openapi_json_schema(
            title="trunkwatch",
            version="2",
            description=(
                "A compatible subset of the Prometheus Alertmanager API v2 (silences and alerts), "
                "trunkwatch's acknowledgements of firing alerts, and its trunk health (every "
                "trunk, a trunk's grid and 30-day history)."
            ),
        )
    )
    # Failed request validation is answered 400 {"error": ...}, not with Powertools' 422.
    schemas = document["components"]["schemas"]
    for name in ("HTTPValidationError", "ValidationError"):
        schemas.pop(name, None)
    schemas["ApiError"] = ApiError.model_json_schema()
    invalid = {
        "description": "Invalid request",
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ApiError"}}},
    }
    for operations in document["paths"].values():
        for operation in operations.values():
            if operation["responses"].pop("422", None) is not None:
                operation["responses"].setdefault("400", invalid)
    return json.dumps(document)


@resolver.get("/api/v2/openapi.json", include_in_schema=False)
def openapi() -> Response[str]:
    return Response(status_code=200, content_type=content_types.APPLICATION_JSON, body=_openapi_document())


for _router in (
    silences.router,
    alerts.router,
    acks.router,
    status.router,
    trunks.router,
    page.router,
    runbook.router,
):
    resolver.include_router(_router)
