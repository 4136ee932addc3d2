"""A HUD API stand-in on 127.0.0.1 that serves whatever snapshot it was last given."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class HudServer:
    def __init__(self) -> None:
        self.body = b'{"jobNames": [], "shaGrid": []}'
        self.requests = 0
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                owner.requests += 1
                ok = self.path.startswith("/api/hud/")
                body = owner.body if ok else b'{"error": "not found"}'
                self.send_response(200 if ok else 404)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host!s}:{port}"

    def serve(self, snapshot: Any) -> None:
        self.body = json.dumps(snapshot).encode()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
