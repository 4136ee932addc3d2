"""The event a Lambda function URL sends its function (payload format version 2.0)."""

from __future__ import annotations

import base64
import time
import uuid
from typing import Any

DOMAIN = "local.lambda-url.us-east-1.on.aws"


def function_url_event(method: str, path: str, headers: dict[str, str], body: bytes) -> dict[str, Any]:
    lowered = {name.lower(): value for name, value in headers.items()}
    try:
        text, is_base64 = body.decode("utf-8"), False
    except UnicodeDecodeError:
        text, is_base64 = base64.b64encode(body).decode(), True
    now = time.time()
    return {
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": path,
        "rawQueryString": "",
        "headers": lowered,
        "requestContext": {
            "accountId": "anonymous",
            "apiId": "local",
            "domainName": DOMAIN,
            "domainPrefix": "local",
            "http": {
                "method": method,
                "path": path,
                "protocol": "HTTP/1.1",
                "sourceIp": "127.0.0.1",
                "userAgent": lowered.get("user-agent", ""),
            },
            "requestId": str(uuid.uuid4()),
            "routeKey": "$default",
            "stage": "$default",
            "time": time.strftime("%d/%b/%Y:%H:%M:%S +0000", time.gmtime(now)),
            "timeEpoch": int(now * 1000),
        },
        "body": text,
        "isBase64Encoded": is_base64,
    }
