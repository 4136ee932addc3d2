"""The one HTTP client: every request the package sends goes through it, hardened against
slow, huge and broken servers.

- **Deadlines.** Every request has one deadline for all of it (connect, status line,
  headers, body): `timeout_s` from its start, or the client's `deadline` (the poll's or the
  notifier tick's budget) if that comes first. A watchdog shuts the socket down at the
  deadline, so a server that trickles a byte a second cannot hold a caller beyond it.
- **Size.** A body may be at most `max_body_bytes` on the wire and again after gzip
  decompression, which is streamed (`zlib.decompressobj(...).decompress(data, max_length)`):
  a gzip bomb never inflates past the cap.
- **Protocol errors** (short body, bad status line, broken chunking) become HttpError kinds
  `network` or `malformed`, a deadline kind `timeout`; nothing else escapes.
- **Redirects.** `get` follows at most `max_redirects` of them, to http/https URLs only; a
  redirect to another host carries none of the caller's headers but Accept and User-Agent,
  so no credential leaves its host. `send` (POST, PATCH, ...) never follows one.
- **Keep-alive.** `get` keeps one connection per (scheme, host) for the client's lifetime,
  so a poll's many requests do not each pay a TLS handshake; a kept connection the server
  closed meanwhile is retried once on a fresh one. `send` uses a connection of its own and
  is never retried: a request the server may have received must not go twice.

Non-2xx answers are returned to the caller, which knows what they mean for its API. Error
messages name the method and the URL's path, never its query or a header; `reason` says the
same without the path (a Slack webhook's path is its secret).
"""

from __future__ import annotations

import contextlib
import email.utils
import http.client
import json
import re
import socket
import ssl
import threading
import time
import urllib.parse
import zlib
from dataclasses import dataclass
from datetime import UTC, datetime
from types import TracebackType
from typing import Any

DEFAULT_TIMEOUT_S = 10.0
MAX_BODY_BYTES = 32 * 1024 * 1024
MAX_REDIRECTS = 5
READ_CHUNK = 64 * 1024
MAX_SAID_CHARS = 200
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_KEPT_ACROSS_HOSTS = frozenset({"accept", "accept-encoding", "user-agent"})
_LINK = re.compile(r'<([^>]*)>\s*;\s*rel="?([^";]*)"?')
_ERROR_CODE = re.compile(r"^[a-z_]{1,64}$")  # a plain-text error code: Slack's invalid_blocks, ...
_SSL_CONTEXT: ssl.SSLContext | None = None


class HttpError(Exception):
    """A request that got no usable answer. `kind` is `timeout`, `network` or `malformed`
    (or a kind of the API client that raised it); `where` is the method and the path, and
    `reason` what went wrong, without them. A timeout's `allowed_s` is the time the request
    was given."""

    def __init__(self, kind: str, where: str, reason: str, allowed_s: float | None = None) -> None:
        super().__init__(f"{where}: {reason}")
        self.kind = kind
        self.where = where
        self.reason = reason
        self.allowed_s = allowed_s


@dataclass(frozen=True)
class Response:
    status: int
    headers: dict[str, str]  # lowercased names
    body: bytes
    where: str = ""  # the request's method and path, as errors name it

    def json(self) -> Any:
        """The body as JSON; invalid or absurdly nested JSON is HttpError('malformed')."""
        try:
            return parse_json(self.body)
        except ValueError as err:
            raise HttpError("malformed", self.where, f"response {err}") from None

    def said(self) -> str:
        """What the server said in an error answer: a plain-text error code, or a JSON body's
        `message`, on one line and clipped; '' when neither."""
        text = self.body[:4096].decode("utf-8", "replace").strip()
        if _ERROR_CODE.match(text):
            return text
        try:
            said = json.loads(text).get("message", "")
        except (ValueError, AttributeError, RecursionError):
            return ""
        said = " ".join(str(said).split())
        return said if len(said) <= MAX_SAID_CHARS else said[: MAX_SAID_CHARS - 3] + "..."


def parse_json(body: bytes) -> Any:
    """JSON from a body; a ValueError saying what is wrong (`is not valid JSON: ...`)."""
    try:
        return json.loads(body)
    except (ValueError, UnicodeDecodeError) as err:
        raise ValueError(f"is not valid JSON: {err}") from None
    except RecursionError:
        raise ValueError("is JSON nested too deeply") from None


def next_link(response: Response) -> str | None:
    """The `rel="next"` target of a `Link` header (RFC 8288), if any."""
    for target, rel in _LINK.findall(response.headers.get("link", "")):
        if "next" in rel.split():
            return str(target)
    return None


def retry_after_seconds(value: str | None, now: datetime | None = None) -> float | None:
    """A Retry-After header in seconds: delta-seconds or an HTTP-date (RFC 9110 10.2.3)."""
    value = (value or "").strip()
    if not value:
        return None
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


def says_rate_limited(response: Response) -> bool:
    """A 403/429 that is a rate limit, not a refused credential: 429 itself, a Retry-After,
    `X-RateLimit-Remaining: 0`, or a body message that mentions a rate limit."""
    if response.status == 429 or response.headers.get("retry-after"):
        return True
    if response.headers.get("x-ratelimit-remaining", "").strip() == "0":
        return True
    text = response.body[:4096].decode("utf-8", "replace").lower()
    return "rate limit" in text or "rate-limit" in text or "ratelimit" in text


def path_of(url: str) -> str:
    """The URL's path, without its query string (which may carry a token in some setups)."""
    return urllib.parse.urlsplit(url).path or "/"


def _ssl_context() -> ssl.SSLContext:
    global _SSL_CONTEXT
    if _SSL_CONTEXT is None:
        _SSL_CONTEXT = ssl.create_default_context()
    return _SSL_CONTEXT


class _Watchdog:
    """Shuts a connection's socket down at a deadline, whatever phase the request is in."""

    def __init__(self, connection: http.client.HTTPConnection, seconds: float) -> None:
        self.fired = False
        self._connection = connection
        self._timer = threading.Timer(max(0.0, seconds), self._fire)
        self._timer.daemon = True
        self._timer.start()

    def _fire(self) -> None:
        self.fired = True
        sock = self._connection.sock
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def cancel(self) -> None:
        self._timer.cancel()


class _Deadline(Exception):
    pass


class HttpClient:
    """Requests with gzip, a whole-request deadline, a size cap, keep-alive and classified
    errors (see the module). `deadline` (a `time.monotonic()` value) bounds every request of
    the client: the end of the caller's budget."""

    def __init__(
        self,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        *,
        deadline: float | None = None,
        max_body_bytes: int = MAX_BODY_BYTES,
        max_redirects: int = MAX_REDIRECTS,
    ) -> None:
        self.timeout_s = timeout_s
        self.deadline = deadline
        self.max_body_bytes = max_body_bytes
        self.max_redirects = max_redirects
        self.requests = 0
        self._connections: dict[tuple[str, str], http.client.HTTPConnection] = {}

    def __enter__(self) -> HttpClient:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        for connection in self._connections.values():
            connection.close()
        self._connections.clear()

    def get(self, url: str, headers: dict[str, str] | None = None) -> Response:
        """GET `url`, following redirects (see the module)."""
        started, end = self._start("GET", url)
        send = self._headers(headers)
        for _ in range(self.max_redirects + 1):
            response = self._exchange("GET", url, send, None, end, started)
            location = response.headers.get("location")
            if response.status not in _REDIRECTS or not location or not self.max_redirects:
                return response
            target = urllib.parse.urljoin(url, location)
            parts = urllib.parse.urlsplit(target)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                scheme = parts.scheme or "relative"
                raise HttpError("malformed", f"GET {path_of(url)}", f"refused a redirect to a {scheme}: URL")
            if parts.netloc != urllib.parse.urlsplit(url).netloc:
                send = {k: v for k, v in send.items() if k.lower() in _KEPT_ACROSS_HOSTS}
            url = target
        raise HttpError("malformed", f"GET {path_of(url)}", f"more than {self.max_redirects} redirects")

    def send(
        self, method: str, url: str, headers: dict[str, str] | None = None, payload: Any = None
    ) -> Response:
        """`method` to `url` with `payload` (if any) as JSON, once: no redirect is followed."""
        started, end = self._start(method, url)
        send = self._headers(headers)
        body = None
        if payload is not None:
            body = json.dumps(payload).encode()
            send["Content-Type"] = "application/json"
        return self._exchange(method, url, send, body, end, started)

    def _start(self, method: str, url: str) -> tuple[float, float]:
        """When the request starts and when its deadline is."""
        self.requests += 1
        started = time.monotonic()
        end = started + self.timeout_s
        if self.deadline is not None:
            end = min(end, self.deadline)
        if end <= started:
            raise HttpError("timeout", f"{method} {path_of(url)}", "the time budget is spent")
        return started, end

    @staticmethod
    def _headers(headers: dict[str, str] | None) -> dict[str, str]:
        return {"Accept-Encoding": "gzip", "User-Agent": "trunkwatch", **(headers or {})}

    def _exchange(
        self, method: str, url: str, headers: dict[str, str], body: bytes | None, end: float, started: float
    ) -> Response:
        where = f"{method} {path_of(url)}"
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise HttpError("malformed", where, "not an http(s) URL")
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        key = (parts.scheme, parts.netloc)
        kept = self._connections.pop(key, None) if method == "GET" else None
        while True:
            connection = kept or self._connect(parts)
            remaining = end - time.monotonic()
            if remaining <= 0:
                connection.close()
                raise _timeout(where, end - started)
            connection.timeout = remaining
            if connection.sock is not None:
                connection.sock.settimeout(remaining)
            watchdog = _Watchdog(connection, remaining)
            try:
                try:
                    connection.request(method, target, body, headers)
                    raw = connection.getresponse()
                except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
                    connection.close()
                    if kept is not None and not watchdog.fired:
                        kept = None  # closed by the server while idle: once more on a fresh one
                        continue
                    raise
                status, response_headers = raw.status, {k.lower(): v for k, v in raw.getheaders()}
                data = self._body(raw, response_headers, where, watchdog)
            except HttpError:
                connection.close()
                raise
            except (TimeoutError, _Deadline):
                connection.close()
                raise _timeout(where, end - started) from None
            except (http.client.HTTPException, OSError, ValueError) as err:
                connection.close()
                if watchdog.fired:
                    raise _timeout(where, end - started) from None
                raise _classified(where, err) from None
            finally:
                watchdog.cancel()
            if method == "GET" and not raw.will_close and not watchdog.fired:
                self._connections[key] = connection
            else:
                connection.close()
            return Response(status, response_headers, data, where)

    def _connect(self, parts: urllib.parse.SplitResult) -> http.client.HTTPConnection:
        host, port = parts.hostname or "", parts.port
        if parts.scheme == "https":
            return http.client.HTTPSConnection(host, port, timeout=self.timeout_s, context=_ssl_context())
        return http.client.HTTPConnection(host, port, timeout=self.timeout_s)

    def _body(
        self, raw: http.client.HTTPResponse, headers: dict[str, str], where: str, watchdog: _Watchdog
    ) -> bytes:
        cap = self.max_body_bytes
        length = headers.get("content-length", "").strip()
        if length.isdigit() and int(length) > cap:
            raise HttpError("malformed", where, f"a body of {length} bytes is over {_mib(cap)}")
        gzipped = headers.get("content-encoding", "").strip().lower() == "gzip"
        inflate = zlib.decompressobj(16 + zlib.MAX_WBITS) if gzipped else None
        parts: list[bytes] = []
        wire = size = 0
        while True:
            if watchdog.fired:
                raise _Deadline
            chunk = raw.read1(READ_CHUNK)
            if not chunk:
                break
            wire += len(chunk)
            if wire > cap:
                raise HttpError("malformed", where, f"response body is over {_mib(cap)}")
            if inflate is not None:
                chunk = _inflate(inflate, chunk, cap - size, cap, where)
            size += len(chunk)
            parts.append(chunk)
        if watchdog.fired:
            raise _Deadline
        if raw.length:  # read1 returns b"" at a close before Content-Length bytes came
            raise http.client.IncompleteRead(b"" if wire == 0 else b"?" * wire, raw.length)
        raw.close()  # read to its end: the connection can take the next request
        if inflate is not None and wire:
            if not inflate.eof:
                raise HttpError("malformed", where, "truncated or corrupt gzip body")
            tail = inflate.flush()
            if size + len(tail) > cap:
                raise HttpError("malformed", where, f"gzip body inflates to over {_mib(cap)}")
            parts.append(tail)
        return b"".join(parts)


def _inflate(inflate: Any, data: bytes, room: int, cap: int, where: str) -> bytes:
    """Decompress `data`, never producing more than `room` bytes (+1 to detect overflow)."""
    try:
        out = inflate.decompress(data, room + 1)
    except zlib.error as err:
        raise HttpError("malformed", where, f"truncated or corrupt gzip body: {err}") from None
    if len(out) > room or inflate.unconsumed_tail:
        raise HttpError("malformed", where, f"gzip body inflates to over {_mib(cap)}")
    return bytes(out)


def _classified(where: str, err: Exception) -> HttpError:
    if isinstance(err, http.client.IncompleteRead):
        return HttpError("network", where, f"response body cut short after {len(err.partial)} bytes")
    if isinstance(err, http.client.RemoteDisconnected | ConnectionError):
        return HttpError("network", where, f"{type(err).__name__}: {err}")
    if isinstance(err, http.client.HTTPException | ValueError):
        return HttpError("malformed", where, f"broken HTTP response: {type(err).__name__}")
    return HttpError("network", where, f"{type(err).__name__}: {err}")


def _timeout(where: str, seconds: float) -> HttpError:
    return HttpError("timeout", where, f"timed out after {seconds:.3g}s", allowed_s=seconds)


def _mib(size: int) -> str:
    return f"{size / (1024 * 1024):g} MiB"
