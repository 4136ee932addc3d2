"""A stand-in for a remote HTTP API on 127.0.0.1, served from a daemon thread."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Answer = tuple[int, dict[str, str], bytes]


class StandInServer:
    """Answers every GET with `answer(path, if_none_match)` and every POST/PATCH with
    `receive(method, path, headers, body)`; subclasses say what."""

    def __init__(self) -> None:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self._reply(*owner.answer(self.path, self.headers.get("If-None-Match")))

            def do_POST(self) -> None:
                self._receive()

            def do_PATCH(self) -> None:
                self._receive()

            def _receive(self) -> None:
                size = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(size) if size else b""
                headers = {k.lower(): v for k, v in self.headers.items()}
                self._reply(*owner.receive(self.command, self.path, headers, body))

            def _reply(self, status: int, headers: dict[str, str], body: bytes) -> None:
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        # `stop` waits for the serving loop to look up: at its default 0.5 s, half a second a stop.
        serve = {"poll_interval": 0.05}
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs=serve, daemon=True)
        self.thread.start()

    def answer(self, path: str, if_none_match: str | None) -> Answer:
        raise NotImplementedError

    def receive(self, method: str, path: str, headers: dict[str, str], body: bytes) -> Answer:
        return 405, {}, b""

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host!s}:{port}"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
