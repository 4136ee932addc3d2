"""A small HTTP client for receivers: one request, one deadline, a capped answer.

Not the sources' client (sources/http.py): that one is GET-only, follows redirects and
reports SourceError kinds. A receiver sends POST/PATCH with credentials, so this one never
follows a redirect (a webhook URL or API that moves is a configuration error, and a token
must not travel to another host) and reports every failure as a ChannelError, which makes
the notifier retry at the next tick, or as a ChannelRejected when the receiver refused the
message itself (`failure`), which the notifier records instead of retrying. Messages name
the URL's path, never its query, a header, or a Slack webhook's secret path (callers pass
`what` for that).
"""

from __future__ import annotations

import http.client
import json
import math
import re
import ssl
import time
import urllib.parse
from dataclasses import dataclass
from typing import Any

from trunkwatch.channels.base import ChannelError, ChannelRejected

DEFAULT_TIMEOUT_S = 10.0
MAX_ANSWER_BYTES = 8 * 1024 * 1024  # a page of 100 issues with long bodies stays well under
READ_CHUNK = 64 * 1024
# 4xx answers that say nothing against the message: a timeout and a rate limit (GitHub's
# secondary one is a 403), and a credential or address that is wrong, which once fixed must
# deliver what waited rather than find it all marked failed.
RETRIED_4XX = frozenset({401, 403, 404, 408, 429})
MAX_REASON_CHARS = 200
_ERROR_CODE = re.compile(r"^[a-z_]{1,64}$")  # Slack's plain-text answers: invalid_blocks, ...


@dataclass(frozen=True)
class Answer:
    status: int
    headers: dict[str, str]  # lowercased names
    body: bytes

    def json(self, what: str) -> Any:
        try:
            return json.loads(self.body)
        except (ValueError, UnicodeDecodeError, RecursionError):
            raise ChannelError(f"{what} answered {self.status} with a body that is not JSON") from None


def failure(answer: Answer, what: str) -> ChannelError:
    """The error for a non-2xx answer, with what the receiver said: a ChannelRejected for a
    4xx that refuses the message itself (400, 413, 422, ...), else a ChannelError."""
    said = _said(answer)
    message = f"{what} answered {answer.status}" + (f": {said}" if said else "")
    if 400 <= answer.status < 500 and answer.status not in RETRIED_4XX:
        return ChannelRejected(message)
    return ChannelError(message)


def _said(answer: Answer) -> str:
    """A Slack error code, or a JSON answer's `message` (GitHub's), clipped; else nothing."""
    text = answer.body[:4096].decode("utf-8", "replace").strip()
    if _ERROR_CODE.match(text):
        return text
    try:
        said = json.loads(text).get("message", "")
    except (ValueError, AttributeError, RecursionError):
        return ""
    said = " ".join(str(said).split())
    return said if len(said) <= MAX_REASON_CHARS else said[: MAX_REASON_CHARS - 3] + "..."


def request(
    method: str,
    url: str,
    *,
    what: str,
    payload: Any = None,
    headers: dict[str, str] | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    deadline: float = math.inf,
) -> Answer:
    """Send `payload` as JSON within `timeout_s` and before `deadline` (time.monotonic(): the
    notifier tick's budget); a network error, a timeout, a spent budget or an oversized
    answer is a ChannelError naming `what`. Non-2xx answers are returned: the caller knows
    its API."""
    timeout_s = min(timeout_s, deadline - time.monotonic())
    if timeout_s <= 0:
        raise ChannelError(f"{what}: the notifier's time budget is spent")
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ChannelError(f"{what}: not an http(s) URL")
    connection: http.client.HTTPConnection
    if parts.scheme == "https":
        connection = http.client.HTTPSConnection(
            parts.hostname, parts.port, timeout=timeout_s, context=ssl.create_default_context()
        )
    else:
        connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout_s)
    body = json.dumps(payload).encode() if payload is not None else None
    sent_headers = {"User-Agent": "trunkwatch", **(headers or {})}
    if body is not None:
        sent_headers["Content-Type"] = "application/json"
    path = parts.path or "/"
    deadline = time.monotonic() + timeout_s
    try:
        connection.request(method, path + (f"?{parts.query}" if parts.query else ""), body, sent_headers)
        response = connection.getresponse()
        data = _read(response, deadline, what)
        return Answer(response.status, {k.lower(): v for k, v in response.getheaders()}, data)
    except TimeoutError:
        raise ChannelError(f"{what}: no answer within {timeout_s:g}s") from None
    except (OSError, http.client.HTTPException) as err:
        raise ChannelError(f"{what}: {type(err).__name__}") from None
    finally:
        connection.close()


def _read(response: http.client.HTTPResponse, deadline: float, what: str) -> bytes:
    """The body, within the request's deadline and MAX_ANSWER_BYTES (a trickling or endless
    answer cannot hold the notifier)."""
    chunks: list[bytes] = []
    size = 0
    while True:
        if time.monotonic() > deadline:
            raise TimeoutError
        chunk = response.read1(READ_CHUNK)
        if not chunk:
            return b"".join(chunks)
        size += len(chunk)
        if size > MAX_ANSWER_BYTES:
            raise ChannelError(f"{what}: answer larger than {MAX_ANSWER_BYTES // (1024 * 1024)} MiB")
        chunks.append(chunk)
