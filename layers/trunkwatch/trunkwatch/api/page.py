"""The status page: one HTML file, one stylesheet and one script, served by the API function.

The page and its assets need no token (the template's `/` and `/static/{file}` events have no
authorizer); the page calls the API with the bearer token the user gives it. Every response
carries a Content-Security-Policy that allows only the page's own script and stylesheet, so
hostile text in alert data (job names, commit titles) can never run as script.
"""

from __future__ import annotations

import functools
from importlib import resources

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.utilities.data_classes import APIGatewayProxyEvent

router = Router()

CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; "
    "frame-ancestors 'none'"
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    # Small files that change with each deployment: revalidate, never serve a stale page.
    "Cache-Control": "no-cache",
}
# The files under static/ that are served, and their media types; nothing else is.
ASSETS = {
    "app.js": "text/javascript; charset=utf-8",
    "app.css": "text/css; charset=utf-8",
}
PAGE = "index.html"
HTML = "text/html; charset=utf-8"


@functools.cache
def asset(name: str) -> str:
    return (resources.files("trunkwatch.api") / "static" / name).read_text(encoding="utf-8")


def _file(name: str, content_type: str) -> Response[str]:
    return Response(status_code=200, content_type=content_type, body=asset(name), headers=SECURITY_HEADERS)


@router.get("/", include_in_schema=False)
def page() -> Response[str]:
    # The page refers to its assets and the API relatively, so it must be loaded from a path
    # ending in "/": API Gateway sends `<api url>/v1` (no slash) here too; redirect that.
    called = APIGatewayProxyEvent(router.current_event.raw_event).request_context.path or "/"
    if not called.endswith("/"):
        return Response(status_code=301, headers={**SECURITY_HEADERS, "Location": called + "/"}, body="")
    return _file(PAGE, HTML)


@router.get("/static/<name>", include_in_schema=False)
def static(name: str) -> Response[str]:
    content_type = ASSETS.get(name)
    if content_type is None:
        return Response(
            status_code=404,
            content_type="text/plain; charset=utf-8",
            body="not found",
            headers=SECURITY_HEADERS,
        )
    return _file(name, content_type)
