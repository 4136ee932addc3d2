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
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from trunkwatch.channels.base import ChannelError, Notification, Resolve, Route
from trunkwatch.channels.content import Content, content
from trunkwatch.channels.transport import client, delivering
from trunkwatch.domain import alerts
from trunkwatch.domain.config import (
    _REPO,
    Check,
    ConfigError,
    ReceiverConfig,
    TokenRef,
    _items,
    _nested,
    _nonempty,
    _optional,
    _pattern,
)
from trunkwatch.net.github import DEFAULT_API_URL, GitHub
from trunkwatch.net.http import DEFAULT_TIMEOUT_S

MAX_TITLE_CHARS = 256
_MARKER = "<!-- trunkwatch-fingerprint: {} -->"
_COMMENT_MARKER = "<!-- trunkwatch-comment: {} -->"
_COMMENT_KEY = re.compile(r"<!-- trunkwatch-comment: (\S+) -->")


def host_suffix(api_url: str) -> str:
    """`@host` for GitHub Enterprise, nothing for github.com: part of a receiver's log name."""
    api_url = api_url.rstrip("/")
    return "" if api_url == DEFAULT_API_URL else "@" + urllib.parse.urlsplit(api_url).netloc


def read_token(token: Callable[[], str | None], what: str) -> str | None:
    """The API token, read once per delivery (when something is due: it may be a secret)."""
    try:
        return token()
    except ConfigError as err:
        raise ChannelError(f"{what}: {err}") from None


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
    timeout_s: float = DEFAULT_TIMEOUT_S

    def accepts(self, labels: dict[str, str]) -> bool:
        return not labels.get("job") and self.route(labels)

    def send(self, notification: Notification) -> None:
        what = f"GitHub issues receiver {self.name}"
        token = read_token(self.token, what)
        with delivering(what), client(self.timeout_s, notification.deadline) as http:
            github = GitHub(http, self.api_url, token)
            repo = github.url(f"/repos/{self.repo}")
            issue = self._open_issue(github, repo, notification.alert.fingerprint)
            if notification.status == alerts.RESOLVED:
                if issue is None:
                    return  # closed already (by a person, or by an earlier try of this one)
                _comment_once(github, issue, resolved_comment(notification))
                github.send("PATCH", issue, {"state": "closed", "state_reason": "completed"})
                return
            if issue is None:
                body: dict[str, Any] = {"title": issue_title(notification), "body": issue_body(notification)}
                if self.labels:
                    body["labels"] = list(self.labels)
                github.send("POST", f"{repo}/issues", body)
            elif notification.reason.startswith("update"):
                _comment_once(github, issue, update_comment(notification))
            # A reminder, or a release from a silence, of an episode whose issue is open: the
            # issue already says it.

    def _open_issue(self, github: GitHub, repo: str, fingerprint: str) -> str | None:
        """The API URL of the open issue carrying the fingerprint's marker (pull requests
        skipped)."""
        query = {"state": "open", "per_page": "100"}
        if self.labels:
            query["labels"] = ",".join(self.labels)
        wanted = marker(fingerprint)
        for item in github.items(f"{repo}/issues?{urllib.parse.urlencode(query)}"):
            if "pull_request" in item or not isinstance(item.get("number"), int):
                continue
            if wanted in str(item.get("body") or ""):
                return f"{repo}/issues/{item['number']}"
        return None


def _comment_once(github: GitHub, issue: str, text: str) -> None:
    """Post `text` on the issue (its API URL) unless its newest trunkwatch comment carries
    the same key."""
    wanted = _COMMENT_KEY.search(text)
    last = None
    for item in github.items(f"{issue}/comments?per_page=100"):
        found = _COMMENT_KEY.search(str(item.get("body") or ""))
        last = found.group(1) if found else last
    if wanted and last == wanted.group(1):
        return
    github.send("POST", f"{issue}/comments", {"body": text})


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
