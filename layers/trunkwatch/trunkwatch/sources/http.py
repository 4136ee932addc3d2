"""The HTTP client the sources share, hardened against slow, huge and broken servers.

- **Deadlines.** Every request has one deadline for all of it (connect, status line,
  headers, body): `timeout_s` from its start, or the client's whole-poll `deadline` if that
  comes first. A watchdog shuts the socket down at the deadline, so a server that trickles a
  byte a second cannot hold a poll beyond it.
- **Size.** A body may be at most `max_body_bytes` on the wire and again after gzip
  decompression, which is streamed (`zlib.decompressobj(...).decompress(data, max_length)`):
  a gzip bomb never inflates past the cap.
- **Protocol errors** (short body, bad status line, broken chunking, deeply nested JSON)
  become SourceError kinds `network` or `malformed`; nothing else escapes.
- **Redirects** are followed (at most MAX_REDIRECTS) only to http/https URLs, and
  credentials never go to another host.
- **Keep-alive.** One connection per (scheme, host) is kept for the client's lifetime (one
  poll), so the GitHub source's many requests do not each pay a TLS handshake. A kept
  connection the server has closed meanwhile is retried once on a fresh one (GETs only).

Non-2xx responses (304, 403, 429, ...) are returned to the caller, which knows what they mean
for its API. Error messages name the URL's path, never its query or a header.
"""

from __future__ import annotations

import contextlib
import email.utils
import http.client
import json
import socket
import ssl
import threading
import time
import urllib.parse
import zlib
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from trunkwatch.sources.base import SourceError

DEFAULT_TIMEOUT_S = 10.0
MAX_BODY_BYTES = 32 * 1024 * 1024
MAX_REDIRECTS = 5
READ_CHUNK = 64 * 1024
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_CREDENTIAL_HEADERS = frozenset({"authorization", "x-hud-internal-bot"})
_SSL_CONTEXT: ssl.SSLContext | None = None


@dataclass
class Response:
    status: int
    headers: dict[str, str]  # lowercased names
    body: bytes

    def json(self) -> Any:
        return parse_json(self.body, "response")


def parse_json(body: bytes, what: str) -> Any:
    """JSON from a body; invalid or absurdly nested JSON is SourceError('malformed')."""
    try:
        return json.loads(body)
    except (ValueError, UnicodeDecodeError) as err:
        raise SourceError("malformed", f"{what} is not valid JSON: {err}") from None
    except RecursionError:
        raise SourceError("malformed", f"{what} is JSON nested too deeply") from None


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
    """GET with gzip, a whole-request deadline, a size cap, keep-alive and classified errors.

    `deadline` (a `time.monotonic()` value) bounds every request of the client: set it to the
    end of the poll's budget so one trunk's poll ends within it.
    """

    def __init__(
        self,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        *,
        deadline: float | None = None,
        max_body_bytes: int = MAX_BODY_BYTES,
    ) -> None:
        self.timeout_s = timeout_s
        self.deadline = deadline
        self.max_body_bytes = max_body_bytes
        self.requests = 0
        self._connections: dict[tuple[str, str], http.client.HTTPConnection] = {}

    def close(self) -> None:
        for connection in self._connections.values():
            connection.close()
        self._connections.clear()

    def get(self, url: str, headers: dict[str, str] | None = None) -> Response:
        self.requests += 1
        started = time.monotonic()
        end = started + self.timeout_s
        if self.deadline is not None:
            end = min(end, self.deadline)
        if end <= started:
            raise SourceError("timeout", f"GET {_path(url)}: the poll's time budget is spent")
        send = {"Accept-Encoding": "gzip", "User-Agent": "trunkwatch", **(headers or {})}
        for _ in range(MAX_REDIRECTS + 1):
            response = self._request(url, send, end, started)
            location = response.headers.get("location")
            if response.status not in _REDIRECTS or not location:
                return response
            target = urllib.parse.urljoin(url, location)
            parts = urllib.parse.urlsplit(target)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                scheme = parts.scheme or "relative"
                raise SourceError("malformed", f"GET {_path(url)}: refused a redirect to a {scheme}: URL")
            if parts.netloc != urllib.parse.urlsplit(url).netloc:
                # Never carry a token to another host.
                send = {k: v for k, v in send.items() if k.lower() not in _CREDENTIAL_HEADERS}
            url = target
        raise SourceError("malformed", f"GET {_path(url)}: more than {MAX_REDIRECTS} redirects")

    def _request(self, url: str, headers: dict[str, str], end: float, started: float) -> Response:
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise SourceError("malformed", f"GET {_path(url)}: not an http(s) URL")
        target = parts.path or "/"
        if parts.query:
            target += f"?{parts.query}"
        key = (parts.scheme, parts.netloc)
        for attempt in (1, 2):
            reused = key in self._connections
            connection = self._connections.pop(key, None) or self._connect(parts)
            remaining = end - time.monotonic()
            if remaining <= 0:
                connection.close()
                raise _timeout(url, end - started)
            connection.timeout = remaining
            if connection.sock is not None:
                connection.sock.settimeout(remaining)
            watchdog = _Watchdog(connection, remaining)
            try:
                try:
                    connection.request("GET", target, headers=headers)
                    raw = connection.getresponse()
                except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
                    # A kept connection the server closed while idle: once more on a fresh one.
                    connection.close()
                    if reused and attempt == 1 and not watchdog.fired:
                        continue
                    raise
                status, response_headers = raw.status, {k.lower(): v for k, v in raw.getheaders()}
                body = self._body(raw, response_headers, url, watchdog)
            except SourceError:
                connection.close()
                raise
            except (TimeoutError, _Deadline):
                connection.close()
                raise _timeout(url, end - started) from None
            except (http.client.HTTPException, OSError, ValueError) as err:
                connection.close()
                if watchdog.fired:
                    raise _timeout(url, end - started) from None
                raise _classified(url, err) from None
            finally:
                watchdog.cancel()
            if raw.will_close or watchdog.fired:
                connection.close()
            else:
                self._connections[key] = connection
            return Response(status, response_headers, body)
        raise AssertionError("unreachable")  # pragma: no cover

    def _connect(self, parts: urllib.parse.SplitResult) -> http.client.HTTPConnection:
        host, port = parts.hostname or "", parts.port
        if parts.scheme == "https":
            return http.client.HTTPSConnection(host, port, timeout=self.timeout_s, context=_ssl_context())
        return http.client.HTTPConnection(host, port, timeout=self.timeout_s)

    def _body(
        self, raw: http.client.HTTPResponse, headers: dict[str, str], url: str, watchdog: _Watchdog
    ) -> bytes:
        cap = self.max_body_bytes
        length = headers.get("content-length", "").strip()
        if length.isdigit() and int(length) > cap:
            raise SourceError("malformed", f"GET {_path(url)}: a body of {length} bytes is over {_mib(cap)}")
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
                raise SourceError("malformed", f"GET {_path(url)}: response body is over {_mib(cap)}")
            if inflate is not None:
                chunk = _inflate(inflate, chunk, cap - size, cap, url)
            size += len(chunk)
            parts.append(chunk)
        if watchdog.fired:
            raise _Deadline
        if raw.length:  # read1 returns b"" at a close before Content-Length bytes came
            raise http.client.IncompleteRead(b"" if wire == 0 else b"?" * wire, raw.length)
        raw.close()  # read to its end: the connection can take the next request
        if inflate is not None and wire:
            if not inflate.eof:
                raise SourceError("malformed", f"GET {_path(url)}: truncated or corrupt gzip body")
            tail = inflate.flush()
            if size + len(tail) > cap:
                raise SourceError("malformed", f"GET {_path(url)}: gzip body inflates to over {_mib(cap)}")
            parts.append(tail)
        return b"".join(parts)


def _inflate(inflate: Any, data: bytes, room: int, cap: int, url: str) -> bytes:
    """Decompress `data`, never producing more than `room` bytes (+1 to detect overflow)."""
    try:
        out = inflate.decompress(data, room + 1)
    except zlib.error as err:
        raise SourceError("malformed", f"GET {_path(url)}: truncated or corrupt gzip body: {err}") from None
    if len(out) > room or inflate.unconsumed_tail:
        raise SourceError("malformed", f"GET {_path(url)}: gzip body inflates to over {_mib(cap)}")
    return bytes(out)


def _classified(url: str, err: Exception) -> SourceError:
    if isinstance(err, http.client.IncompleteRead):
        got = len(err.partial)
        return SourceError("network", f"GET {_path(url)}: response body cut short after {got} bytes")
    if isinstance(err, http.client.RemoteDisconnected | ConnectionError):
        return SourceError("network", f"GET {_path(url)} failed: {type(err).__name__}: {err}")
    if isinstance(err, http.client.HTTPException | ValueError):
        return SourceError("malformed", f"GET {_path(url)}: broken HTTP response: {type(err).__name__}")
    return SourceError("network", f"GET {_path(url)} failed: {type(err).__name__}: {err}")


def _timeout(url: str, seconds: float) -> SourceError:
    return SourceError("timeout", f"GET {_path(url)} timed out after {seconds:.3g}s")


def _mib(size: int) -> str:
    return f"{size / (1024 * 1024):g} MiB"


def _path(url: str) -> str:
    """The URL without its query string (which may carry a token in some setups)."""
    return url.split("?", 1)[0]
