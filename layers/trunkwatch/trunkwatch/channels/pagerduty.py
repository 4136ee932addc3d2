"""PagerDuty's Events API v2 (`POST {url}/v2/enqueue`): each transition of an alert is an
alert event whose `dedup_key` is the alert's fingerprint, so PagerDuty keeps one alert per
firing episode: `trigger` when it fires (reminders and updates too: PagerDuty adds them to
the open alert), `acknowledge` when someone acknowledges it (design.md §4.3), `resolve`
when it resolves. With `change_events`, a culprit that reruns
confirmed also goes out as a change event (`POST {url}/v2/change/enqueue`), which PagerDuty
shows beside incidents as context and never pages for.

PagerDuty answers 202 for an event it takes, 400 for one it refuses (a ChannelRejected:
recorded, alarmed, never retried), 429 when it throttles the integration key and 5xx when it
fails (ChannelErrors: the notifier retries at the next tick). The routing key is a
credential: it is resolved when a message is due and never appears in an error.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from trunkwatch.channels.base import ChannelError, Notification, Resolve, Route
from trunkwatch.channels.content import Content, content
from trunkwatch.channels.github_culprit import first_notice
from trunkwatch.channels.transport import client, delivering, refusal
from trunkwatch.domain import acks, alerts
from trunkwatch.domain.clock import format_time
from trunkwatch.domain.config import (
    Check,
    ConfigError,
    ReceiverConfig,
    TokenRef,
    _boolean,
    _pattern,
    _secret_or_string,
)
from trunkwatch.domain.verdict import CulpritVerdict, verdict_words
from trunkwatch.net.http import DEFAULT_TIMEOUT_S, Response, parse_json

DEFAULT_URL = "https://events.pagerduty.com"
EVENTS_PATH = "/v2/enqueue"
CHANGE_EVENTS_PATH = "/v2/change/enqueue"
CLIENT = "trunkwatch"
MAX_SUMMARY_CHARS = 1024  # PagerDuty's limit on payload.summary
TRIGGER = "trigger"
ACKNOWLEDGE = "acknowledge"
RESOLVE = "resolve"
# payload.severity by the alert's priority; anything else (the Watchdog's `none`) is info.
SEVERITIES = {"P1": "critical", "P2": "error", "P3": "warning"}
OTHER_SEVERITY = "info"
_HTTP_URL = re.compile(r"^https?://\S+$")
MAX_ANSWER_READ = 16 * 1024  # of an error answer: its message and errors
MAX_DETAIL_CHARS = 300


def event_action(notification: Notification) -> str:
    if notification.reason == acks.ACKNOWLEDGED:
        return ACKNOWLEDGE
    return RESOLVE if notification.status == alerts.RESOLVED else TRIGGER


def severity(priority: str) -> str:
    return SEVERITIES.get(priority, OTHER_SEVERITY)


def summary(notification: Notification) -> str:
    """`<alertname> on <repo>@<branch>: <summary>`, on one line, at most 1,024 characters."""
    told = content(notification)
    name = notification.alert.name
    text = told.summary if told.source == CLIENT else f"{name} on {told.source}: {told.summary}"
    return text if len(text) <= MAX_SUMMARY_CHARS else text[: MAX_SUMMARY_CHARS - 3] + "..."


def alert_event(notification: Notification, routing_key: str) -> dict[str, Any]:
    """The alert event for one transition: a trigger carries the alert (payload, links,
    client); an acknowledge or a resolve needs only which alert."""
    alert = notification.alert
    action = event_action(notification)
    event: dict[str, Any] = {
        "routing_key": routing_key,
        "event_action": action,
        "dedup_key": alert.fingerprint,
    }
    if action != TRIGGER:
        return event
    told = content(notification)
    labels = alert.labels
    payload = {
        "summary": summary(notification),
        "source": told.source,
        "severity": severity(labels.get("priority", "")),
        "timestamp": alert.webhook_form()["startsAt"],
        "component": labels.get("job") or alert.name,
        "group": labels.get("team", ""),
        "class": alert.name,
        "custom_details": custom_details(notification, told),
    }
    return {
        **event,
        "payload": {key: value for key, value in payload.items() if value},
        "client": CLIENT,
        **({"client_url": notification.external_url} if _HTTP_URL.match(notification.external_url) else {}),
        "links": links(told),
    }


def custom_details(notification: Notification, told: Content) -> dict[str, Any]:
    """What the on-call reads in the incident: the culprit (or the suspect reruns cleared)
    and its verdict, the streak, the failing jobs with theirs, the first failure lines."""
    failing = notification.alert.failing
    details: dict[str, Any] = {
        "alertname": notification.alert.name,
        "notification_reason": notification.reason,
        "fingerprint": told.fingerprint,
    }
    if failing and told.culprit:
        culprit = told.culprit
        commit = {
            "sha": failing.culprit.sha,  # whole: the content shows 12 characters
            "pr": culprit.pr,
            "title": culprit.title,
            "author": culprit.author,
            "url": culprit.commit_url,
        }
        details["culprit" if culprit.blamed else "suspect"] = {k: v for k, v in commit.items() if v}
    if failing and failing.verdict:
        details["verdict"] = verdict_words(failing.verdict)
        if failing.reason:
            details["verdict_reason"] = failing.reason
    if failing:
        details["streak"] = failing.streak
    if told.jobs:
        details["failing_jobs"] = [_job(job, told) for job in told.jobs]
        if told.more_jobs:
            details["more_jobs"] = told.jobs_total - len(told.jobs)
    elif notification.alert.labels.get("job"):  # a job alert: its own job, its culprit above
        job = {"job": notification.alert.labels["job"], "streak": details.get("streak")}
        details["failing_jobs"] = [{k: v for k, v in job.items() if v is not None}]
    if told.failure_lines:
        details["failure_lines"] = list(told.failure_lines)
    if told.acknowledged:
        details["acknowledged"] = told.acknowledged
    return details


def _job(job: str, told: Content) -> dict[str, Any]:
    failing = told.failing[job]
    culprit = failing.culprit
    entry: dict[str, Any] = {
        "job": job,
        "streak": failing.streak,
        "culprit" if failing.blamed else "suspect": culprit.sha[:12],
        "author": culprit.author,
    }
    if culprit.pr:
        entry["pr"] = culprit.pr
    if failing.verdict:
        entry["verdict"] = verdict_words(failing.verdict)
    return entry


def links(told: Content) -> list[dict[str, str]]:
    """The culprit, the trunk's view, the runbook, the dashboard and the silence form: the
    ones the alert has, as http(s) links (PagerDuty shows each with its text)."""
    found: list[tuple[str, str]] = []
    culprit = told.culprit
    if culprit and culprit.blamed:
        if culprit.pr_url:
            found.append((culprit.pr_url, f"Culprit PR #{culprit.pr}"))
        if culprit.commit_url:
            found.append((culprit.commit_url, f"Culprit commit {culprit.sha}"))
    texts = {"View": "The trunk", "Runbook": "Runbook", "Dashboard": "Dashboard", "Silence": "Silence it"}
    found += [(url, texts.get(title, title)) for title, url in told.links]
    return [{"href": url, "text": text} for url, text in found if _HTTP_URL.match(url)]


def confirms_culprit(notification: Notification) -> bool:
    """The job alert's message that first names its culprit as confirmed by reruns."""
    alert = notification.alert
    return (
        alert.name == alerts.JOB_FAILING
        and alert.failing is not None
        and alert.failing.verdict == CulpritVerdict.CONFIRMED
        and first_notice(notification)
    )


def change_event(notification: Notification, routing_key: str) -> dict[str, Any]:
    """A confirmed culprit as a change event: the commit that broke the job, when it landed."""
    told = content(notification)
    failing = notification.alert.failing
    culprit = told.culprit
    sha = culprit.sha if culprit else "?"
    pr = f" #{culprit.pr}" if culprit and culprit.pr else ""
    author = f" by {culprit.author}" if culprit and culprit.author else ""
    job = notification.alert.labels.get("job", "?")
    text = f"Culprit confirmed by reruns: {sha}{pr}{author} broke {job} on {told.source}"
    payload = {
        "summary": text if len(text) <= MAX_SUMMARY_CHARS else text[: MAX_SUMMARY_CHARS - 3] + "...",
        "source": told.source,
        "timestamp": format_time(failing.culprit.time) if failing and failing.blamed else "",
        "custom_details": custom_details(notification, told),
    }
    return {
        "routing_key": routing_key,
        "payload": {key: value for key, value in payload.items() if value},
        "links": links(told),
    }


def answered(response: Response, what: str) -> str:
    """`<what> answered <status>: <message> (<errors>)`, as PagerDuty's error body says."""
    said = response.said()
    try:
        body = parse_json(response.body[:MAX_ANSWER_READ])
    except ValueError:
        body = None
    errors = body.get("errors") if isinstance(body, dict) else None
    listed = errors if isinstance(errors, list) else []
    detail = "; ".join(" ".join(e.split()) for e in listed if isinstance(e, str))[:MAX_DETAIL_CHARS]
    told = f"{what} answered {response.status}" + (f": {said}" if said else "")
    return told + (f" ({detail})" if detail else "")


@dataclass
class PagerDutyChannel:
    """`routing_key` resolves the key when a message is due; `route` is the matchers."""

    name: str
    url: str  # the Events API's base URL, no trailing slash
    routing_key: Callable[[], str | None] = field(repr=False)
    route: Route
    change_events: bool = False
    timeout_s: float = DEFAULT_TIMEOUT_S

    def accepts(self, labels: dict[str, str]) -> bool:
        return self.route(labels)

    def send(self, notification: Notification) -> None:
        key = self._key()
        self._post(EVENTS_PATH, alert_event(notification, key), notification.deadline)
        if self.change_events and confirms_culprit(notification):
            # After the alert event: a retry of a failed change event triggers the alert
            # again, which PagerDuty adds to the open alert.
            self._post(CHANGE_EVENTS_PATH, change_event(notification, key), notification.deadline)

    def acknowledge(self, notification: Notification) -> None:
        self._post(EVENTS_PATH, alert_event(notification, self._key()), notification.deadline)

    def _key(self) -> str:
        try:
            key = self.routing_key()
        except ConfigError as err:
            raise ChannelError(f"{self._what}: {err}") from None
        if not key:
            raise ChannelError(f"{self._what}: no routing key")
        return key

    @property
    def _what(self) -> str:
        return f"PagerDuty receiver {self.name}"

    def _post(self, path: str, event: dict[str, Any], deadline: float) -> None:
        with delivering(self._what), client(self.timeout_s, deadline) as http:
            response = http.send("POST", self.url + path, payload=event)
        if not 200 <= response.status < 300:
            raise refusal(response.status, answered(response, self._what))


@dataclass(frozen=True, kw_only=True)
class PagerDutyReceiver(ReceiverConfig):
    """`type: pagerduty`: an Events API v2 integration. `routing_key` is its integration key,
    a reference to where it is kept (`{secret: name}`; `env` and `ssm` work too) or, for a
    local run, the key itself; `url` the Events API's (EU accounts:
    `https://events.eu.pagerduty.com`); `change_events` also sends confirmed culprits as
    change events."""

    routing_key: str | TokenRef
    url: str = DEFAULT_URL
    change_events: bool = False

    CHECKS: ClassVar[dict[str, Check]] = {
        **ReceiverConfig.CHECKS,
        "routing_key": _secret_or_string,
        "url": _pattern(_HTTP_URL),
        "change_events": _boolean,
    }

    def log_name(self) -> str:
        """`pagerduty:<where the key is>`, or a digest of a literal key (itself the credential)."""
        key = self.routing_key
        if isinstance(key, TokenRef):
            return f"pagerduty:{key.place}"
        return f"pagerduty:{hashlib.sha256(key.encode()).hexdigest()[:12]}"

    def channel(self, name: str, route: Route, resolve: Resolve) -> PagerDutyChannel:
        key = self.routing_key
        routing_key = (lambda: resolve(key)) if isinstance(key, TokenRef) else (lambda: key)
        return PagerDutyChannel(
            name=name,
            url=self.url.rstrip("/"),
            routing_key=routing_key,
            route=route,
            change_events=self.change_events,
        )
