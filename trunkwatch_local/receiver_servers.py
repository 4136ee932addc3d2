"""Stand-ins on 127.0.0.1 for the receivers: a Slack incoming webhook, a plain webhook, and
GitHub's issues API (issues, and comments on issues and pull requests). Each records what it
was sent and can be told to misbehave for its next N requests (an HTTP status, or a 200
whose body is not JSON), so tests can see a receiver fail for a while and recover."""

from __future__ import annotations

import json
import re
import threading
import urllib.parse
from dataclasses import dataclass, field
from typing import Any

from trunkwatch_local.stand_in import Answer, StandInServer

JSON = {"Content-Type": "application/json"}
GARBAGE = "garbage"  # answer 200 with a body that is not JSON


class _Misbehaving(StandInServer):
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.failures = 0
        self.failure: int | str = 500
        self.requests: list[tuple[str, str]] = []  # (method, path) of every request
        super().__init__()

    def fail_next(self, count: int, failure: int | str = 500) -> None:
        """Answer the next `count` requests with HTTP `failure` (or GARBAGE)."""
        with self.lock:
            self.failures, self.failure = count, failure

    def _failing(self, method: str, path: str) -> Answer | None:
        self.requests.append((method, path))
        if not self.failures:
            return None
        self.failures -= 1
        if self.failure == GARBAGE:
            return 200, JSON, b"<html>not json"
        return int(self.failure), JSON, json.dumps({"message": "scripted failure"}).encode()


class SlackServer(_Misbehaving):
    """An incoming webhook at any path: answers `ok`, keeps each posted payload."""

    def __init__(self) -> None:
        self.posts: list[dict[str, Any]] = []
        super().__init__()

    def answer(self, path: str, if_none_match: str | None) -> Answer:
        return 405, {}, b""

    def receive(self, method: str, path: str, headers: dict[str, str], body: bytes) -> Answer:
        with self.lock:
            failed = self._failing(method, path)
            if failed:
                return failed
            self.posts.append(json.loads(body))
            return 200, {"Content-Type": "text/plain"}, b"ok"


class WebhookServer(_Misbehaving):
    """A webhook receiver at any path (a dead man's switch's ping URL, say): answers `OK`,
    keeps each (path, posted JSON)."""

    def __init__(self) -> None:
        self.posts: list[tuple[str, dict[str, Any]]] = []
        super().__init__()

    def answer(self, path: str, if_none_match: str | None) -> Answer:
        return 405, {}, b""

    def receive(self, method: str, path: str, headers: dict[str, str], body: bytes) -> Answer:
        with self.lock:
            failed = self._failing(method, path)
            if failed:
                return failed
            self.posts.append((path, json.loads(body)))
            return 200, {"Content-Type": "text/plain"}, b"OK"


@dataclass
class Issue:
    number: int
    title: str
    body: str
    labels: list[str]
    state: str = "open"
    state_reason: str | None = None
    comments: list[str] = field(default_factory=list)

    def as_json(self, base: str, repo: str) -> dict[str, Any]:
        return {
            "number": self.number,
            "title": self.title,
            "body": self.body,
            "state": self.state,
            "state_reason": self.state_reason,
            "labels": [{"name": name} for name in self.labels],
            "comments": len(self.comments),
            "html_url": f"{base}/{repo}/issues/{self.number}",
        }


_ISSUES = re.compile(r"^/repos/([^/]+/[^/]+)/issues$")
_ISSUE = re.compile(r"^/repos/([^/]+/[^/]+)/issues/(\d+)$")
_COMMENTS = re.compile(r"^/repos/([^/]+/[^/]+)/issues/(\d+)/comments$")


class GitHubIssuesServer(_Misbehaving):
    """The issue endpoints the GitHub receivers use, for any owner/name: list (open, by
    labels, `page`/`per_page` with a Link header), create, comment, update state. Pull
    requests can be added: the issues list returns them too, as GitHub's does, and their
    comments are listed and posted at the same issues/{number}/comments endpoint."""

    def __init__(self) -> None:
        self.issues: dict[int, Issue] = {}
        self.pull_requests: list[dict[str, Any]] = []
        self.pull_comments: dict[int, list[str]] = {}  # by pull request number
        self.authorizations: list[str] = []
        super().__init__()

    def add_pull_request(self, body: str, number: int | None = None) -> int:
        number = number or len(self.issues) + len(self.pull_requests) + 1
        self.pull_requests.append({"number": number, "body": body, "state": "open", "pull_request": {}})
        self.pull_comments[number] = []
        return number

    def _comments(self, number: int) -> list[str] | None:
        return self.issues[number].comments if number in self.issues else self.pull_comments.get(number)

    def answer(self, path: str, if_none_match: str | None) -> Answer:
        with self.lock:
            failed = self._failing("GET", path)
            if failed:
                return failed
            parts = urllib.parse.urlsplit(path)
            query = dict(urllib.parse.parse_qsl(parts.query))
            per_page, page = int(query.get("per_page", 30)), int(query.get("page", 1))
            listed = _ISSUES.match(parts.path)
            if listed:
                wanted = set(filter(None, query.get("labels", "").split(",")))
                items = [
                    issue.as_json(self.url, listed.group(1))
                    for issue in self.issues.values()
                    if issue.state == query.get("state", "open") and wanted <= set(issue.labels)
                ] + self.pull_requests
                return self._page(items, parts.path, query, page, per_page)
            commented = _COMMENTS.match(parts.path)
            comments = self._comments(int(commented.group(2))) if commented else None
            if comments is not None:
                items = [{"id": n + 1, "body": text} for n, text in enumerate(comments)]
                return self._page(items, parts.path, query, page, per_page)
            return 404, JSON, b'{"message": "Not Found"}'

    def _page(
        self, items: list[dict[str, Any]], path: str, query: dict[str, str], page: int, per_page: int
    ) -> Answer:
        shown = items[(page - 1) * per_page : page * per_page]
        headers = dict(JSON)
        if page * per_page < len(items):
            following = urllib.parse.urlencode({**query, "page": str(page + 1)})
            headers["Link"] = f'<{self.url}{path}?{following}>; rel="next"'
        return 200, headers, json.dumps(shown).encode()

    def receive(self, method: str, path: str, headers: dict[str, str], body: bytes) -> Answer:
        with self.lock:
            failed = self._failing(method, path)
            if failed:
                return failed
            self.authorizations.append(headers.get("authorization", ""))
            sent = json.loads(body)
            created = _ISSUES.match(path)
            if method == "POST" and created:
                number = len(self.issues) + len(self.pull_requests) + 1
                issue = Issue(number, sent["title"], sent.get("body", ""), list(sent.get("labels", [])))
                self.issues[number] = issue
                return 201, JSON, json.dumps(issue.as_json(self.url, created.group(1))).encode()
            commented = _COMMENTS.match(path)
            comments = self._comments(int(commented.group(2))) if commented else None
            if method == "POST" and comments is not None:
                comments.append(sent["body"])
                return 201, JSON, json.dumps({"id": len(comments), "body": sent["body"]}).encode()
            updated = _ISSUE.match(path)
            if method == "PATCH" and updated and int(updated.group(2)) in self.issues:
                issue = self.issues[int(updated.group(2))]
                issue.state = sent.get("state", issue.state)
                issue.state_reason = sent.get("state_reason", issue.state_reason)
                return 200, JSON, json.dumps(issue.as_json(self.url, updated.group(1))).encode()
            return 404, JSON, b'{"message": "Not Found"}'
