"""GitHub issues: one issue per firing episode of a trunk-level alert (TrunkBroken,
TrunkBadlyBroken, SourceDown), a comment when its failing jobs change, closed with a comment
when it resolves.

GitHub itself is the state. The issue body carries a hidden marker with the alert's
fingerprint, and before opening an issue the channel looks for an open one carrying it, so a
lost notification log, a retried tick or a redelivered batch never opens a second issue.
Comments carry a marker too, and a comment is not posted again when the issue's newest
trunkwatch comment already says the same (a retry after a comment went through but the
close did not). Job alerts are not sent here: a trunk-level alert already lists every
failing job, and an issue per job would bury it.
"""

from __future__ import annotations

import hashlib
import re
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from trunkwatch.channels import http
from trunkwatch.channels.base import ChannelError, Notification
from trunkwatch.channels.content import Content, content
from trunkwatch.domain import alerts
from trunkwatch.domain.config import ConfigError

API_VERSION = "2022-11-28"
MAX_PAGES = 10  # 1,000 open issues with the labels, or comments on one issue
MAX_TITLE_CHARS = 256
_MARKER = "<!-- trunkwatch-fingerprint: {} -->"
_COMMENT_MARKER = "<!-- trunkwatch-comment: {} -->"
_COMMENT_KEY = re.compile(r"<!-- trunkwatch-comment: (\S+) -->")
_NEXT = re.compile(r'<([^>]+)>;\s*rel="next"')


def marker(fingerprint: str) -> str:
    return _MARKER.format(fingerprint)


def issue_title(notification: Notification) -> str:
    labels = notification.alert.labels
    told = content(notification)
    where = f"{labels.get('repo', '?')}@{labels.get('branch', '?')}"
    title = f"{notification.alert.name} on {where}: {told.summary}"
    return title if len(title) <= MAX_TITLE_CHARS else title[: MAX_TITLE_CHARS - 3] + "..."


def issue_body(notification: Notification) -> str:
    told = content(notification)
    parts = [f"**{told.summary}**", "\n".join(f"- {line}" for line in told.when)]
    parts += _details(told)
    parts.append(f"Source: `{told.source}` · Fingerprint: `{told.fingerprint}`")
    parts.append(marker(told.fingerprint))
    return "\n\n".join(parts) + "\n"


def update_comment(notification: Notification) -> str:
    """The comment for a change of the failing jobs (the notification's reason names it)."""
    told = content(notification)
    change = notification.reason.removeprefix("update").lstrip("; ")
    parts = [f"**Failing jobs changed**: {_inline(change)}" if change else "**Failing jobs changed**"]
    if told.jobs:
        parts.append(_jobs(told))
    return _with_key(parts, f"jobs-{_digest(told.jobs)}")


def resolved_comment(notification: Notification) -> str:
    told = content(notification)
    when = "\n".join(f"- {line}" for line in told.when)
    return _with_key([f"**Resolved**: {told.summary}", when], "resolved")


def _with_key(parts: list[str], key: str) -> str:
    return "\n\n".join([*parts, _COMMENT_MARKER.format(key)]) + "\n"


def _digest(jobs: tuple[str, ...]) -> str:
    return hashlib.sha256("\n".join(sorted(jobs)).encode()).hexdigest()[:16]


def _inline(text: str) -> str:
    """Text shown as typed: GitHub markdown would otherwise render `<`, `*`, `@`, links."""
    return "`" + text.replace("`", "'") + "`"


def _jobs(told: Content) -> str:
    lines = [f"{told.jobs_heading}:", *(f"- {_inline(job)}" for job in told.jobs)]
    return "\n".join([*lines, f"- {told.more_jobs}"] if told.more_jobs else lines)


def _details(told: Content) -> list[str]:
    parts = []
    if told.culprit:
        c = told.culprit
        line = f"Culprit: {c.commit_url}" if c.commit_url else f"Culprit: `{c.sha}`"
        if c.pr:
            line += f" (PR {c.pr_url or '#' + c.pr})"
        if c.title:
            line += f" {_inline(c.title)}"
        if c.author:
            line += f" by {_inline(c.author)}"
        parts.append(line)
    if told.jobs:
        parts.append(_jobs(told))
    if told.failure_lines:
        code = "\n".join(line.replace("```", "'''") for line in told.failure_lines)
        parts.append(f"First failure lines:\n```\n{code}\n```")
    if told.links:
        parts.append(" · ".join(f"[{title}]({url})" for title, url in told.links))
    return parts


@dataclass
class GitHubIssuesChannel:
    """`token` resolves the API token when something is due; `route` is the matchers."""

    name: str
    api_url: str  # https://api.github.com, or https://<host>/api/v3 for GitHub Enterprise
    repo: str  # owner/name
    labels: tuple[str, ...]
    token: Callable[[], str | None] = field(repr=False)
    route: Callable[[dict[str, str]], bool]
    timeout_s: float = http.DEFAULT_TIMEOUT_S

    def accepts(self, labels: dict[str, str]) -> bool:
        return not labels.get("job") and self.route(labels)

    def send(self, notification: Notification) -> None:
        headers = self._headers()
        fingerprint = notification.alert.fingerprint
        issue = self._open_issue(fingerprint, headers)
        if notification.status == alerts.RESOLVED:
            if issue is None:
                return  # closed already (by a person, or by an earlier try of this one)
            self._comment_once(issue, resolved_comment(notification), headers)
            self._call("PATCH", f"/issues/{issue}", headers, {"state": "closed", "state_reason": "completed"})
            return
        if issue is None:
            body: dict[str, Any] = {"title": issue_title(notification), "body": issue_body(notification)}
            if self.labels:
                body["labels"] = list(self.labels)
            self._call("POST", "/issues", headers, body)
        elif notification.reason.startswith("update"):
            self._comment_once(issue, update_comment(notification), headers)
        # A reminder, or a release from a silence, of an episode whose issue is open: the
        # issue already says it.

    def _headers(self) -> dict[str, str]:
        try:
            token = self.token()
        except ConfigError as err:
            raise ChannelError(f"GitHub issues receiver {self.name}: {err}") from None
        headers = {"Accept": "application/vnd.github+json", "X-GitHub-Api-Version": API_VERSION}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        return headers

    @property
    def _repo_url(self) -> str:
        return f"{self.api_url.rstrip('/')}/repos/{self.repo}"

    def _open_issue(self, fingerprint: str, headers: dict[str, str]) -> int | None:
        """The open issue carrying the fingerprint's marker (pull requests skipped)."""
        query = {"state": "open", "per_page": "100"}
        if self.labels:
            query["labels"] = ",".join(self.labels)
        wanted = marker(fingerprint)
        for item in self._pages(f"{self._repo_url}/issues?{urllib.parse.urlencode(query)}", headers):
            if "pull_request" in item or not isinstance(item.get("number"), int):
                continue
            if wanted in str(item.get("body") or ""):
                return int(item["number"])
        return None

    def _comment_once(self, issue: int, text: str, headers: dict[str, str]) -> None:
        """Post `text` unless the issue's newest trunkwatch comment carries the same key."""
        wanted = _COMMENT_KEY.search(text)
        last = None
        for item in self._pages(f"{self._repo_url}/issues/{issue}/comments?per_page=100", headers):
            found = _COMMENT_KEY.search(str(item.get("body") or ""))
            last = found.group(1) if found else last
        if wanted and last == wanted.group(1):
            return
        self._call("POST", f"/issues/{issue}/comments", headers, {"body": text})

    def _pages(self, url: str, headers: dict[str, str]) -> Iterator[dict[str, Any]]:
        for _ in range(MAX_PAGES):
            answer = self._answer("GET", url, headers)
            items = answer.json(self._what)
            if not isinstance(items, list):
                raise ChannelError(f"{self._what} answered a list request with no list")
            yield from (item for item in items if isinstance(item, dict))
            found = _NEXT.search(answer.headers.get("link", ""))
            if not found:
                return
            url = found.group(1)
            if not url.startswith(self.api_url.rstrip("/") + "/"):
                raise ChannelError(f"{self._what} gave a next page on another host")

    def _call(self, method: str, path: str, headers: dict[str, str], payload: dict[str, Any]) -> None:
        self._answer(method, f"{self._repo_url}{path}", headers, payload)

    def _answer(
        self, method: str, url: str, headers: dict[str, str], payload: dict[str, Any] | None = None
    ) -> http.Answer:
        answer = http.request(
            method, url, what=self._what, payload=payload, headers=headers, timeout_s=self.timeout_s
        )
        if not 200 <= answer.status < 300:
            path = urllib.parse.urlsplit(url).path
            raise ChannelError(f"{self._what}: {method} {path} answered {answer.status}")
        return answer

    @property
    def _what(self) -> str:
        return f"GitHub issues receiver {self.name}"
