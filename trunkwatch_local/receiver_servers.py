"""Stand-ins on 127.0.0.1 for the receivers that are no GitHub (whose stand-in is
`github_server`): a Slack incoming webhook and a plain webhook. Each records what it was
sent and can be told to misbehave for its next N requests (`Misbehaving.fail_next`)."""

from __future__ import annotations

import json
from typing import Any

from trunkwatch_local.stand_in import Answer, Misbehaving, Request


class SlackServer(Misbehaving):
    """An incoming webhook at any path: answers `ok`, keeps each posted payload."""

    def __init__(self) -> None:
        self.posts: list[dict[str, Any]] = []
        super().__init__()

    def respond(self, request: Request) -> Answer:
        if request.method != "POST":
            return 405, {}, b""
        self.posts.append(json.loads(request.body))
        return 200, {"Content-Type": "text/plain"}, b"ok"


class WebhookServer(Misbehaving):
    """A webhook receiver at any path (a dead man's switch's ping URL, say): answers `OK`,
    keeps each (path, posted JSON)."""

    def __init__(self) -> None:
        self.posts: list[tuple[str, dict[str, Any]]] = []
        super().__init__()

    def respond(self, request: Request) -> Answer:
        if request.method != "POST":
            return 405, {}, b""
        self.posts.append((request.target, json.loads(request.body)))
        return 200, {"Content-Type": "text/plain"}, b"OK"
