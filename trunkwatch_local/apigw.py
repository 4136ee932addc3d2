"""A local stand-in for API Gateway: HTTP on 127.0.0.1 -> REST API proxy events -> a handler.

With a tokens document the authorizer's bearer-token check runs first (401 as API Gateway
answers); without one every request is principal `local` with write scope. The session's
own `internal_token` (random per process, never printed) is `trunkwatch-replay`: what a
replay's silence events act as. The status page and runbook need no token, as deployed.
"""

from __future__ import annotations

import base64
import hmac
import json
import logging
import threading
import time
import urllib.parse
import uuid
from collections.abc import Callable
from typing import Any

from trunkwatch.api import auth
from trunkwatch_local.runtime import LambdaContext
from trunkwatch_local.stand_in import Answer, Request, StandInServer

logger = logging.getLogger(__name__)

RESOURCE = "/api/v2/{proxy+}"
PREFIX = "/api/v2/"
# The status page's resources, which have no authorizer.
PAGE_RESOURCE, STATIC_RESOURCE, STATIC_PREFIX = "/", "/static/{file}", "/static/"
RUNBOOK_RESOURCE = "/runbook"
# GitHub webhook deliveries: served by the webhook function (its function URL when deployed).
WEBHOOK_PATH = "/webhooks/github"
STAGE = "v1"
# API Gateway's own payload limit.
MAX_PAYLOAD_BYTES = 10 * 1024 * 1024
LOCAL_CALLER = auth.Caller(principal="local", scope="write")
INTERNAL_CALLER = auth.Caller(principal="trunkwatch-replay", scope="write")

Handler = Callable[[dict[str, Any], Any], dict[str, Any]]
# A webhook delivery's headers and raw body -> the function URL's response.
WebhookHandler = Callable[[dict[str, str], bytes], dict[str, Any]]


def proxy_event(
    method: str,
    path: str,
    *,
    query: str = "",
    headers: dict[str, str] | None = None,
    body: bytes | None = None,
    caller: auth.Caller | None = None,
) -> dict[str, Any]:
    """The event API Gateway's Lambda proxy integration sends for one request."""
    # API Gateway tells the function how the client connected; locally that is plain http.
    headers = {"X-Forwarded-Proto": "http", **(headers or {})}
    pairs = urllib.parse.parse_qsl(query, keep_blank_values=True)
    multi: dict[str, list[str]] = {}
    for name, value in pairs:
        multi.setdefault(name, []).append(value)
    text, is_base64 = None, False
    if body:
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError:
            text, is_base64 = base64.b64encode(body).decode(), True
    if path.startswith(PREFIX):
        resource, parameters = RESOURCE, {"proxy": path.removeprefix(PREFIX)}
    elif path.startswith(STATIC_PREFIX):
        resource, parameters = STATIC_RESOURCE, {"file": path.removeprefix(STATIC_PREFIX)}
    elif path == RUNBOOK_RESOURCE:
        resource, parameters = RUNBOOK_RESOURCE, None
    else:
        resource, parameters = PAGE_RESOURCE, None
    authorizer = (
        {"principalId": caller.principal, "scope": caller.scope, "integrationLatency": 0} if caller else {}
    )
    return {
        "resource": resource,
        "path": path,
        "httpMethod": method,
        "headers": headers or None,
        "multiValueHeaders": {name: [value] for name, value in headers.items()} or None,
        "queryStringParameters": {name: values[-1] for name, values in multi.items()} or None,
        "multiValueQueryStringParameters": multi or None,
        "pathParameters": parameters,
        "stageVariables": None,
        "requestContext": {
            "resourcePath": resource,
            "httpMethod": method,
            # Served at the root, like a custom domain mapped to the stage.
            "path": path,
            "stage": STAGE,
            "domainName": headers.get("Host") or headers.get("host") or "127.0.0.1",
            "requestId": str(uuid.uuid4()),
            "requestTimeEpoch": int(time.time() * 1000),
            "protocol": "HTTP/1.1",
            "identity": {"sourceIp": "127.0.0.1"},
            "authorizer": authorizer,
        },
        "body": text,
        "isBase64Encoded": is_base64,
    }


def _internal(authorization: str | None, internal_token: str | None) -> auth.Caller | None:
    """The internal principal if the request carries the session's own token."""
    if not internal_token:
        return None
    try:
        presented = auth.bearer_token(authorization)
    except auth.Unauthorized:
        return None
    return INTERNAL_CALLER if hmac.compare_digest(presented.encode(), internal_token.encode()) else None


def _gateway_error(status: int, message: str) -> dict[str, Any]:
    """An error API Gateway answers itself, in the template's GatewayResponses shape."""
    return {
        "statusCode": status,
        "headers": {"Content-Type": "application/json"},
        "body": json.dumps({"error": message}),
    }


def serve_api(
    handler: Handler,
    *,
    host: str = "127.0.0.1",
    port: int = 9093,
    tokens: dict[str, Any] | None = None,
    internal_token: str | None = None,
    webhook: WebhookHandler | None = None,
) -> StandInServer:
    """Serve `handler` on host:port from a daemon thread, and `webhook` at `POST
    /webhooks/github` (signed deliveries need no API token); the caller calls `.stop()`."""
    document = auth.parse_tokens(tokens) if tokens is not None else None
    # One event at a time, as one Lambda execution environment handles them.
    invoke_lock = threading.Lock()

    def respond(request: Request) -> dict[str, Any]:
        method, headers, body = request.method, dict(request.headers.items()), request.body
        parsed = urllib.parse.urlsplit(request.target)
        path = urllib.parse.unquote(parsed.path)
        if webhook is not None and method == "POST" and path == WEBHOOK_PATH:
            try:
                return webhook(headers, body)
            except Exception:
                logger.exception("webhook handler failed")
                return _gateway_error(502, "Internal server error")
        public = method == "GET" and (
            path in (PAGE_RESOURCE, RUNBOOK_RESOURCE)
            or (path.startswith(STATIC_PREFIX) and "/" not in path[len(STATIC_PREFIX) :])
        )
        if not path.startswith(PREFIX) and not public:
            return _gateway_error(403, "Missing Authentication Token")
        if len(body) > MAX_PAYLOAD_BYTES:
            return _gateway_error(413, "Request Too Long")
        caller: auth.Caller | None = None if public else LOCAL_CALLER
        if document is not None and not public:
            authorization = next((v for k, v in headers.items() if k.lower() == "authorization"), None)
            try:
                internal = _internal(authorization, internal_token)
                caller = internal or auth.authenticate(authorization, document)
            except auth.Unauthorized:
                return _gateway_error(401, "Unauthorized")
        event = proxy_event(method, path, query=parsed.query, headers=headers, body=body, caller=caller)
        context = LambdaContext(function_name="api", aws_request_id=event["requestContext"]["requestId"])
        with invoke_lock:
            try:
                return handler(event, context)
            except Exception:
                # A failed invocation is API Gateway's 502, not a dropped connection.
                logger.exception("API handler failed")
                return _gateway_error(502, "Internal server error")

    def handle(request: Request) -> Answer:
        """The proxy response to `request` as HTTP."""
        result = respond(request)
        payload = result.get("body") or ""
        data = base64.b64decode(payload) if result.get("isBase64Encoded") else payload.encode()
        headers = dict(result.get("headers") or {})
        for name, values in (result.get("multiValueHeaders") or {}).items():
            headers[name] = ", ".join(values)
        return int(result["statusCode"]), headers, data

    return StandInServer(host, port, handle)
