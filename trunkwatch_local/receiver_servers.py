"""Stand-ins on 127.0.0.1 for the receivers that are no GitHub (whose stand-in is
`github_server`): a Slack incoming webhook, a plain webhook and PagerDuty's Events API v2.
Each records what it was sent and can be told to misbehave for its next N requests
(`Misbehaving.fail_next`)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from trunkwatch_local.stand_in import Answer, Misbehaving, Request, json_answer


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


# PagerDuty's Events API v2, as its documentation and OpenAPI document describe it.
PAGERDUTY_EVENTS = "/v2/enqueue"
PAGERDUTY_CHANGES = "/v2/change/enqueue"
PAGERDUTY_ACTIONS = ("trigger", "acknowledge", "resolve")
PAGERDUTY_SEVERITIES = ("critical", "error", "warning", "info")
ROUTING_KEY_CHARS = 32
MAX_PAGERDUTY_SUMMARY_CHARS = 1024
MAX_DEDUP_KEY_CHARS = 255
# The throttle's window: PagerDuty counts an integration key's events over the last minute.
THROTTLE_WINDOW = timedelta(minutes=1)


@dataclass
class PagerDutyAlert:
    """What PagerDuty holds for one dedup_key: the open alert's status, and every action
    applied to it (a trigger on an acknowledged alert adds to it and leaves it acknowledged)."""

    status: str  # triggered | acknowledged | resolved
    actions: list[str] = field(default_factory=list)


class PagerDutyServer(Misbehaving):
    """PagerDuty's Events API v2 (alert events at `/v2/enqueue`, change events at
    `/v2/change/enqueue`), answered as PagerDuty answers: 202 for an event it takes, 400 with
    its `errors` for one it refuses, 429 over `limit` events a minute for one routing key
    (PagerDuty throttles at about 120; None: never). Accepted events are kept in `events`
    and `changes`, each dedup_key's alert in `alerts` as PagerDuty applies them."""

    def __init__(self, limit: int | None = None, clock: Callable[[], datetime] | None = None) -> None:
        self.limit = limit
        self.clock = clock or (lambda: datetime.now(UTC))
        self.events: list[dict[str, Any]] = []
        self.changes: list[dict[str, Any]] = []
        self.alerts: dict[str, PagerDutyAlert] = {}
        self.throttled = 0  # 429s answered by the throttle
        self._calls: dict[str, list[datetime]] = {}
        super().__init__()

    def respond(self, request: Request) -> Answer:
        if request.method != "POST" or request.path not in (PAGERDUTY_EVENTS, PAGERDUTY_CHANGES):
            return json_answer(404, {"status": "not found", "message": "no such endpoint"})
        try:
            event = json.loads(request.body)
        except ValueError:
            return _invalid(["the body is not valid JSON"])
        if not isinstance(event, dict):
            return _invalid(["the body must be a JSON object"])
        change = request.path == PAGERDUTY_CHANGES
        errors = _errors(event, change)
        if errors:
            return _invalid(errors)
        if self._throttled(str(event["routing_key"])):
            self.throttled += 1
            return json_answer(429, {"status": "throttled", "message": "too many events; retry later"})
        if change:
            self.changes.append(event)
            return json_answer(202, {"status": "success", "message": "Change event processed"})
        key = str(event.get("dedup_key") or uuid.uuid4().hex)
        self.events.append(event)
        self._apply(key, str(event["event_action"]))
        return json_answer(202, {"status": "success", "message": "Event processed", "dedup_key": key})

    def _throttled(self, routing_key: str) -> bool:
        now = self.clock()
        calls = [at for at in self._calls.get(routing_key, []) if now - at < THROTTLE_WINDOW]
        calls.append(now)
        self._calls[routing_key] = calls
        return self.limit is not None and len(calls) > self.limit

    def _apply(self, key: str, action: str) -> None:
        alert = self.alerts.get(key)
        if action == "trigger":
            if alert is None or alert.status == "resolved":
                alert = self.alerts[key] = PagerDutyAlert("triggered")
            alert.actions.append(action)
        elif alert is not None and alert.status != "resolved":
            alert.status = "acknowledged" if action == "acknowledge" else "resolved"
            alert.actions.append(action)

    def actions(self, dedup_key: str) -> list[str]:
        """The event actions accepted for `dedup_key`, in order (dropped ones included)."""
        return [str(e["event_action"]) for e in self.events if e.get("dedup_key") == dedup_key]


def _invalid(errors: list[str]) -> Answer:
    return json_answer(
        400, {"status": "invalid event", "message": "Event object is invalid", "errors": errors}
    )


def _errors(event: dict[str, Any], change: bool) -> list[str]:
    """What PagerDuty says is wrong with an alert event (a change event, if `change`)."""
    errors = []
    if not isinstance(event.get("routing_key"), str) or len(event["routing_key"]) != ROUTING_KEY_CHARS:
        errors.append(f"routing_key must be the integration's {ROUTING_KEY_CHARS}-character key")
    action, dedup_key, payload = event.get("event_action"), event.get("dedup_key"), event.get("payload")
    if change and not isinstance(payload, dict):
        return [*errors, "payload is required"]
    if not change and action not in PAGERDUTY_ACTIONS:
        errors.append(f"event_action must be one of {', '.join(PAGERDUTY_ACTIONS)}")
    if (
        not change
        and dedup_key is not None
        and (not isinstance(dedup_key, str) or len(dedup_key) > MAX_DEDUP_KEY_CHARS)
    ):
        errors.append(f"dedup_key must be a string of at most {MAX_DEDUP_KEY_CHARS} characters")
    if not change and action in ("acknowledge", "resolve") and not dedup_key:
        errors.append(f"dedup_key is required to {action}")
    if action == "trigger" and not isinstance(payload, dict):  # a change event's is, by now
        errors.append("payload is required to trigger")
    elif isinstance(payload, dict) and (change or action == "trigger"):
        summary = payload.get("summary")
        if not isinstance(summary, str) or not summary:
            errors.append("payload.summary is required")
        elif len(summary) > MAX_PAGERDUTY_SUMMARY_CHARS:
            errors.append(f"payload.summary is longer than {MAX_PAGERDUTY_SUMMARY_CHARS} characters")
    if not change and action == "trigger" and isinstance(payload, dict):
        if not isinstance(payload.get("source"), str) or not payload["source"]:
            errors.append("payload.source is required")
        if payload.get("severity") not in PAGERDUTY_SEVERITIES:
            errors.append(f"payload.severity must be one of {', '.join(PAGERDUTY_SEVERITIES)}")
        if "custom_details" in payload and not isinstance(payload["custom_details"], dict):
            errors.append("payload.custom_details must be an object")
    for name, required in (("links", "href"), *(() if change else (("images", "src"),))):
        listed = event.get(name)
        if listed is not None and (
            not isinstance(listed, list) or not all(isinstance(i, dict) and i.get(required) for i in listed)
        ):
            errors.append(f"each of {name} must be an object with {required!r}")
    return errors
