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
from typing import Any, ClassVar

from trunkwatch.channels import http
from trunkwatch.channels.base import Notification, Resolve, Route
from trunkwatch.channels.content import Content, content
from trunkwatch.channels.github_rest import DEFAULT_API_URL, GitHubRest, host_suffix
from trunkwatch.domain import alerts
from trunkwatch.domain.config import (
    _REPO,
    Check,
    ReceiverConfig,
    TokenRef,
    _items,
    _nested,
    _nonempty,
    _optional,
    _pattern,
)

MAX_TITLE_CHARS = 256
_MARKER = "<!-- trunkwatch-fingerprint: {} -->"
_COMMENT_MARKER = "<!-- trunkwatch-comment: {} -->"
_COMMENT_KEY = re.compile(r"<!-- trunkwatch-comment: (\S+) -->")


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
    lines = [f"{told.jobs_heading}:"]
    for job in told.jobs:
        lines.append(f"- {_inline(job)}: {_inline(told.job_culprit(job))}")
    return "\n".join([*lines, f"- {told.more_jobs}"] if told.more_jobs else lines)


def _details(told: Content) -> list[str]:
    parts = []
    if told.culprit:
        c = told.culprit
        line = f"{c.heading}: {c.commit_url}" if c.commit_url else f"{c.heading}: `{c.sha}`"
        if c.pr:
            line += f" (PR {c.pr_url or '#' + c.pr})"
        if c.title:
            line += f" {_inline(c.title)}"
        if c.author:
            line += f" by {_inline(c.author)}"
        parts.append(line)
        if told.verdict:
            parts.append(told.verdict)
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
        what = f"GitHub issues receiver {self.name}"
        rest = _Repo(
            GitHubRest(self.api_url, self.token, what, self.timeout_s, notification.deadline), self.repo
        )
        issue = self._open_issue(rest, notification.alert.fingerprint)
        if notification.status == alerts.RESOLVED:
            if issue is None:
                return  # closed already (by a person, or by an earlier try of this one)
            _comment_once(rest, issue, resolved_comment(notification))
            rest.call("PATCH", f"/issues/{issue}", {"state": "closed", "state_reason": "completed"})
            return
        if issue is None:
            body: dict[str, Any] = {"title": issue_title(notification), "body": issue_body(notification)}
            if self.labels:
                body["labels"] = list(self.labels)
            rest.call("POST", "/issues", body)
        elif notification.reason.startswith("update"):
            _comment_once(rest, issue, update_comment(notification))
        # A reminder, or a release from a silence, of an episode whose issue is open: the
        # issue already says it.

    def _open_issue(self, rest: _Repo, fingerprint: str) -> int | None:
        """The open issue carrying the fingerprint's marker (pull requests skipped)."""
        query = {"state": "open", "per_page": "100"}
        if self.labels:
            query["labels"] = ",".join(self.labels)
        wanted = marker(fingerprint)
        for item in rest.pages(f"/issues?{urllib.parse.urlencode(query)}"):
            if "pull_request" in item or not isinstance(item.get("number"), int):
                continue
            if wanted in str(item.get("body") or ""):
                return int(item["number"])
        return None


class _Repo:
    """One delivery's calls to the repository (the token is read once, when it starts)."""

    def __init__(self, rest: GitHubRest, repo: str) -> None:
        self.rest, self.headers = rest, rest.headers()
        self.base = rest.url(f"/repos/{repo}")

    def pages(self, path: str) -> Iterator[dict[str, Any]]:
        return self.rest.pages(self.base + path, self.headers)

    def call(self, method: str, path: str, payload: dict[str, Any]) -> None:
        self.rest.call(method, self.base + path, self.headers, payload)


def _comment_once(rest: _Repo, issue: int, text: str) -> None:
    """Post `text` unless the issue's newest trunkwatch comment carries the same key."""
    wanted = _COMMENT_KEY.search(text)
    last = None
    for item in rest.pages(f"/issues/{issue}/comments?per_page=100"):
        found = _COMMENT_KEY.search(str(item.get("body") or ""))
        last = found.group(1) if found else last
    if wanted and last == wanted.group(1):
        return
    rest.call("POST", f"/issues/{issue}/comments", {"body": text})


@dataclass(frozen=True, kw_only=True)
class GitHubIssuesReceiver(ReceiverConfig):
    """`type: github_issues`: issues in `repo` (with `labels`), through `api_url` (GitHub
    Enterprise: `https://<host>/api/v3`) with `token` (a reference, as for trunks)."""

    repo: str
    api_url: str = DEFAULT_API_URL
    labels: tuple[str, ...] = ()
    token: TokenRef | None = None

    CHECKS: ClassVar[dict[str, Check]] = {
        **ReceiverConfig.CHECKS,
        "repo": _pattern(_REPO),
        "api_url": _nonempty,
        "labels": _items(_nonempty),
        "token": _optional(_nested(TokenRef)),
    }

    def log_name(self) -> str:
        return f"github_issues:{self.repo}{host_suffix(self.api_url)}"

    def channel(self, name: str, route: Route, resolve: Resolve) -> GitHubIssuesChannel:
        token = self.token
        return GitHubIssuesChannel(
            name=name,
            api_url=self.api_url.rstrip("/"),
            repo=self.repo,
            labels=self.labels,
            token=lambda: resolve(token),
            route=route,
        )
