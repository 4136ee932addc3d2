"""A HUD API stand-in on 127.0.0.1 that serves whatever snapshot it was last given."""

from __future__ import annotations

import json
from typing import Any

from trunkwatch_local.stand_in import Answer, StandInServer

JSON = {"Content-Type": "application/json"}


class HudServer(StandInServer):
    def __init__(self) -> None:
        self.body = b'{"jobNames": [], "shaGrid": []}'
        self.status = 200  # a scripted outage answers another status with an error body
        self.requests = 0
        super().__init__()

    def answer(self, path: str, if_none_match: str | None) -> Answer:
        self.requests += 1
        if not path.startswith("/api/hud/"):
            return 404, JSON, b'{"error": "not found"}'
        if self.status != 200:
            return self.status, JSON, json.dumps({"error": f"scripted status {self.status}"}).encode()
        return 200, JSON, self.body

    def serve(self, snapshot: Any) -> None:
        self.body = json.dumps(snapshot).encode()
        self.status = 200

    def fail_with(self, status: int) -> None:
        """Answer `status` until the next `serve` (the snapshot is kept for then)."""
        self.status = status
