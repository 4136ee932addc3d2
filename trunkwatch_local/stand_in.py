"""A stand-in for a remote HTTP API on 127.0.0.1, served from a daemon thread."""

from __future__ import annotations

import hashlib
import json
import threading
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from email.message import Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Answer = tuple[int, dict[str, str], bytes]
JSON = {"Content-Type": "application/json"}
GARBAGE = "garbage"  # a scripted failure: 200 with a body that is not JSON
SHUTDOWN_POLL_S = 0.05


@dataclass(frozen=True)
class Request:
    method: str
    target: str  # the path and query, as sent
    headers: Message  # names are case-insensitive, as in HTTP
    body: bytes

    @property
    def path(self) -> str:
        return urllib.parse.urlsplit(self.target).path

    @property
    def query(self) -> dict[str, str]:
        return dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(self.target).query))


def json_answer(status: int, body: Any, headers: dict[str, str] | None = None) -> Answer:
    """`body` as JSON with `status` (and `headers` beside the content type)."""
    return status, {**JSON, **(headers or {})}, json.dumps(body).encode()


def weak_etag(body: bytes) -> str:
    return f'W/"{hashlib.sha256(body).hexdigest()[:32]}"'


def paged(request: Request, items: list[Any], base: str, path: str = "") -> tuple[list[Any], str]:
    """The page of `items` `request` asks for and the `Link` header to the others, at `base`
    + `path` (the request's path unless given), as GitHub and Buildkite page (30 a page unless
    asked, 100 at most)."""
    query, page = request.query, int(request.query.get("page", 1))
    size = min(int(query.get("per_page", 30)), 100)
    last = max(1, -(-len(items) // size))

    def url(n: int) -> str:
        return f"{base}{path or request.path}?" + urllib.parse.urlencode({**query, "page": str(n)})

    links = []
    if page < last:
        links += [f'<{url(page + 1)}>; rel="next"', f'<{url(last)}>; rel="last"']
    if page > 1:
        links += [f'<{url(page - 1)}>; rel="prev"', f'<{url(1)}>; rel="first"']
    return items[(page - 1) * size : page * size], ", ".join(links)


class StandInServer:
    """Answers every request with `handle(request)`: the one given, or a subclass's. On
    127.0.0.1 at a free port unless told."""

    def __init__(
        self, host: str = "127.0.0.1", port: int = 0, handle: Callable[[Request], Answer] | None = None
    ) -> None:
        answer = handle or self.handle

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self._answer()

            do_POST = do_PATCH = do_PUT = do_DELETE = do_GET

            def _answer(self) -> None:
                size = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(size) if size else b""
                status, headers, data = answer(Request(self.command, self.path, self.headers, body))
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer((host, port), Handler)
        # `stop` waits for the loop to see it: a short poll keeps a stop (a test's teardown) quick.
        self.thread = threading.Thread(target=self.server.serve_forever, args=(SHUTDOWN_POLL_S,), daemon=True)
        self.thread.start()

    def handle(self, request: Request) -> Answer:
        raise NotImplementedError

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host!s}:{port}"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class Misbehaving(StandInServer):
    """A stand-in that records every request and can be told to fail its next N requests (an
    HTTP status with a JSON `message`, or GARBAGE), so tests see a caller fail for a while and
    recover. Subclasses answer the others with `respond`, under `lock`."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.failures = 0
        self.failure: int | str = 500
        self.message = "scripted failure"
        self.requests: list[Request] = []  # every request, in order
        super().__init__()

    def fail_next(self, count: int, failure: int | str = 500, message: str = "scripted failure") -> None:
        """Answer the next `count` requests with HTTP `failure` saying `message` (or GARBAGE)."""
        with self.lock:
            self.failures, self.failure, self.message = count, failure, message

    def take(self) -> list[Request]:
        """The requests since the last take, forgotten here."""
        with self.lock:
            taken, self.requests = self.requests, []
        return taken

    def handle(self, request: Request) -> Answer:
        with self.lock:
            self.requests.append(request)
            if not self.failures:
                return self.respond(request)
            self.failures -= 1
            if self.failure == GARBAGE:
                return 200, JSON, b"<html>not json"
            return json_answer(int(self.failure), {"message": self.message})

    def respond(self, request: Request) -> Answer:
        raise NotImplementedError
