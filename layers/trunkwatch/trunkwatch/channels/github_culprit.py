"""GitHub culprit comments: when a job alert (TrunkJobFailing) fires with a culprit pull
request, one comment on that pull request (in the trunk's own repository) saying it is the
first commit on which the job failed N times in a row, with the failure lines and the links.
With confirmation by reruns (a verdict on the alert's culprit), only a `confirmed` culprit is
commented on: at the update that confirms it, never on an unconfirmed suspect.

One comment per episode. The notification log (each delivery's claim) already gives one
delivery per transition; reminders, updates and resolutions are delivered but post nothing
(the author was told once). GitHub itself is the state against a lost log: each comment
carries a hidden marker with the alert's fingerprint and startsAt, and the pull request's
comments are read for it before posting, so a retry or a lost log never posts twice.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ClassVar

from trunkwatch.channels.base import Notification, Resolve, Route
from trunkwatch.channels.content import content
from trunkwatch.channels.github_issues import host_suffix, read_token
from trunkwatch.channels.transport import client, delivering
from trunkwatch.domain import alerts
from trunkwatch.domain.clock import format_time
from trunkwatch.domain.config import Check, ReceiverConfig, TokenRef, _nested, _nonempty, _optional
from trunkwatch.domain.verdict import VERDICT_UPDATES, CulpritVerdict
from trunkwatch.net.github import DEFAULT_API_URL, GitHub
from trunkwatch.net.http import DEFAULT_TIMEOUT_S

_MARKER = "<!-- trunkwatch-culprit: {} {} -->"


def marker(notification: Notification) -> str:
    alert = notification.alert
    return _MARKER.format(alert.fingerprint, format_time(alert.starts_at))


def first_notice(notification: Notification) -> bool:
    """The episode's first firing message to this receiver (also when a silence that held it
    from the start ends); not a reminder, an update or a resolution. With a verdict: the
    first firing message that carries `confirmed` (the update that confirms it, or a first
    message sent once it was confirmed)."""
    if notification.status != alerts.FIRING or notification.reason == "reminder":
        return False
    failing = notification.alert.failing
    verdict = failing.verdict if failing else ""
    if not verdict:
        return not notification.reason.startswith("update")
    return verdict == CulpritVerdict.CONFIRMED and (
        not notification.reason.startswith("update")
        or notification.reason == f"update; {VERDICT_UPDATES[CulpritVerdict.CONFIRMED]}"
    )


def culprit_comment(notification: Notification) -> str:
    told = content(notification)
    labels = notification.alert.labels
    failing = notification.alert.failing
    streak = failing.streak if failing else "?"
    job = _inline(labels.get("job", "?"))
    parts = [
        f"**trunkwatch**: this PR is the first commit on which {job} failed {streak} times in a row"
        f" on `{told.source}`."
    ]
    if told.culprit and told.culprit.commit_url:
        parts.append(f"Commit: {told.culprit.commit_url}")
    if told.verdict:
        parts.append(told.verdict)
    if told.failure_lines:
        code = "\n".join(line.replace("```", "'''") for line in told.failure_lines)
        parts.append(f"First failure lines:\n```\n{code}\n```")
    if told.links:
        parts.append(" · ".join(f"[{title}]({url})" for title, url in told.links))
    parts.append(marker(notification))
    return "\n\n".join(parts) + "\n"


def _inline(text: str) -> str:
    return "`" + text.replace("`", "'") + "`"


@dataclass
class GitHubCulpritChannel:
    """`token` resolves the API token when something is due; `route` is the matchers."""

    name: str
    api_url: str
    token: Callable[[], str | None] = field(repr=False)
    route: Callable[[dict[str, str]], bool]
    timeout_s: float = DEFAULT_TIMEOUT_S

    def accepts(self, labels: dict[str, str]) -> bool:
        return labels.get("alertname") == alerts.JOB_FAILING and self.route(labels)

    def send(self, notification: Notification) -> None:
        failing = notification.alert.failing
        pr = failing.culprit.pr if failing and failing.blamed else None
        if not first_notice(notification) or pr is None:
            return  # told once per episode; a culprit commit without a PR has no one to tell
        what = f"GitHub culprit receiver {self.name}"
        token = read_token(self.token, what)
        with delivering(what), client(self.timeout_s, notification.deadline) as http:
            github = GitHub(http, self.api_url, token)
            comments = github.url(f"/repos/{notification.alert.labels['repo']}/issues/{pr}/comments")
            wanted = marker(notification)
            posted = github.items(f"{comments}?per_page=100")
            if any(wanted in str(item.get("body") or "") for item in posted):
                return  # posted by an earlier try whose log entry was lost
            github.send("POST", comments, {"body": culprit_comment(notification)})


@dataclass(frozen=True, kw_only=True)
class GitHubCulpritReceiver(ReceiverConfig):
    """`type: github_culprit`: comments on the culprit pull requests of the trunks' own
    repositories, through `api_url` with `token` (a reference, as for trunks)."""

    api_url: str = DEFAULT_API_URL
    token: TokenRef | None = None

    CHECKS: ClassVar[dict[str, Check]] = {
        **ReceiverConfig.CHECKS,
        "api_url": _nonempty,
        "token": _optional(_nested(TokenRef)),
    }

    def log_name(self) -> str:
        return f"github_culprit{host_suffix(self.api_url)}"

    def channel(self, name: str, route: Route, resolve: Resolve) -> GitHubCulpritChannel:
        token = self.token
        return GitHubCulpritChannel(
            name=name, api_url=self.api_url.rstrip("/"), token=lambda: resolve(token), route=route
        )
