"""A GitHub or Buildkite webhook request (a Lambda function URL event, payload version 2.0)
-> a response.

Cheapest checks first, so that the deliveries trunkwatch does not ingest (every pull
request's jobs) cost no table access: the event header, size, the signature (HMAC-SHA256 of
the raw body, compared in constant time), the JSON, then the repository and branch (and a
job's status: only `completed` carries a result). `triage` makes those checks alone (the
handler runs them before any Powertools wrapper); only a delivery about a webhook-fed
trunk reaches `store`. Nothing claims a delivery: each write is conditional on what it
changes (a shard only by a newer or the same report, a cell only where the commit's state
string says otherwise), so a redelivery, or the retry of an invocation that died halfway,
writes only what the first try did not.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from typing import Any

from aws_lambda_powertools import Logger

from trunkwatch.app.webhook import DeliveryResult, buildkite_trunk_of, ingest_delivery, settle, trunk_of
from trunkwatch.domain.clock import Clock
from trunkwatch.domain.config import Deployment, RuleConfig, TrunkConfig
from trunkwatch.sources.buildkite_webhook import EVENTS as BUILDKITE_EVENTS
from trunkwatch.sources.webhook import EVENTS, PayloadError
from trunkwatch.storage.port import Storage

# GitHub caps payloads at 25 MB; the deliveries ingested are far smaller (a push lists at
# most 20 commits). A larger body is refused before it is hashed or parsed.
MAX_BODY_BYTES = 2 * 1024 * 1024
SIGNATURE_PREFIX = "sha256="
# A Buildkite signature's timestamp this far from now is a replay (Buildkite's docs suggest
# a window of about five minutes).
SIGNATURE_WINDOW = timedelta(minutes=5)

logger = Logger(child=True)


@dataclass(frozen=True)
class WebhookSecrets:
    """How to read each CI's webhook secret: GitHub's signing secret, the Buildkite webhook's
    token. Each is read only for a delivery of its CI (a stack fed by one needs no other)."""

    github: Callable[[], str]
    buildkite: Callable[[], str]


@dataclass(frozen=True)
class Accepted:
    """A delivery about a webhook-fed trunk, to be stored."""

    event: str
    delivery_id: str
    trunk: TrunkConfig
    rule: RuleConfig
    payload: dict[str, Any]


def handle_request(
    event: dict[str, Any],
    secrets: WebhookSecrets,
    deployment: Callable[[], Deployment],
    storage: Callable[[], Storage],
    clock: Clock,
) -> dict[str, Any]:
    """Answer one delivery at `clock`'s time (`triage`, then `store`)."""
    verdict = triage(event, secrets, deployment, clock.now)
    return verdict if isinstance(verdict, dict) else store(verdict, storage(), clock)


def triage(
    event: dict[str, Any],
    secrets: WebhookSecrets,
    deployment: Callable[[], Deployment],
    now: Callable[[], datetime],
) -> Accepted | dict[str, Any]:
    """The delivery to store, or the answer to a delivery that is not stored (no storage,
    no log line but a refused signature's, never the payload). `secrets` and `deployment`
    are read only when needed. A request with `X-Buildkite-Event` is Buildkite's
    (`_triage_buildkite`, authenticated by the Buildkite token), any other GitHub's."""
    headers = {str(k).lower(): str(v) for k, v in (event.get("headers") or {}).items()}
    if "x-buildkite-event" in headers:
        return _triage_buildkite(event, headers, secrets.buildkite, deployment, now())
    name = headers.get("x-github-event", "")
    if name not in EVENTS and name != "ping":
        return _answer(202, f"ignored: event {name!r} is not ingested")
    body = _body(event)
    if not isinstance(body, bytes):
        return body
    if not _signed(body, headers.get("x-hub-signature-256", ""), secrets.github()):
        logger.warning("webhook delivery refused: bad or missing signature", extra={"event": name})
        return _answer(401, "bad or missing X-Hub-Signature-256")
    if name == "ping":
        return _answer(200, "pong")
    payload = _json_object(body)
    if isinstance(payload, str):
        return _answer(400, payload)
    current = deployment()
    trunk = trunk_of(current, name, payload)
    if isinstance(trunk, str):
        return _answer(202, f"ignored: {trunk}")
    delivery_id = headers.get("x-github-delivery", "")
    if not delivery_id:
        return _answer(400, "missing X-GitHub-Delivery")
    return Accepted(name, delivery_id, trunk, current.rule_for(trunk), payload)


def _json_object(body: bytes) -> dict[str, Any] | str:
    """The body as a JSON object, or why it is not one."""
    try:
        payload = json.loads(body)
    except (ValueError, RecursionError):
        return "the body is not valid JSON (or is nested too deeply)"
    return payload if isinstance(payload, dict) else "the body must be a JSON object"


def _triage_buildkite(
    event: dict[str, Any],
    headers: dict[str, str],
    token: Callable[[], str],
    deployment: Callable[[], Deployment],
    now: datetime,
) -> Accepted | dict[str, Any]:
    """A Buildkite delivery (`triage`), authenticated by its `X-Buildkite-Token` (the
    webhook's `token` in clear) or its `X-Buildkite-Signature` (`timestamp=<epoch
    seconds>,signature=<hex HMAC-SHA256 of "<timestamp>.<body>" with the token>`, within
    SIGNATURE_WINDOW of now), compared in constant time."""
    name = headers.get("x-buildkite-event", "")
    if name not in BUILDKITE_EVENTS and name != "ping":
        return _answer(202, f"ignored: event {name!r} is not ingested")
    body = _body(event)
    if not isinstance(body, bytes):
        return body
    refused = _buildkite_refusal(body, headers, token(), now)
    if refused:
        logger.warning("webhook delivery refused: " + refused, extra={"event": name})
        return _answer(401, refused)
    if name == "ping":
        return _answer(200, "pong")
    payload = _json_object(body)
    if isinstance(payload, str):
        return _answer(400, payload)
    current = deployment()
    trunk = buildkite_trunk_of(current, name, payload)
    if isinstance(trunk, str):
        return _answer(202, f"ignored: {trunk}")
    about = payload.get("job") if name.startswith("job.") else payload.get("build")
    delivery_id = f"{name} {about.get('id', '')}" if isinstance(about, dict) else name
    return Accepted(name, delivery_id, trunk, current.rule_for(trunk), payload)


def _buildkite_refusal(body: bytes, headers: dict[str, str], secret: str, now: datetime) -> str:
    """Why a Buildkite delivery is not authentic ("": it is)."""
    if not secret:
        return "no webhook token is configured"
    signature = headers.get("x-buildkite-signature")
    if signature is None:
        token = headers.get("x-buildkite-token", "")
        if not token:
            return "missing X-Buildkite-Token or X-Buildkite-Signature"
        if not hmac.compare_digest(token.encode(), secret.encode()):
            return "bad X-Buildkite-Token"
        return ""
    parts = dict(part.strip().partition("=")[::2] for part in signature.split(","))
    timestamp, signed = parts.get("timestamp", ""), parts.get("signature", "")
    if not timestamp.isdigit() or not signed:
        return "X-Buildkite-Signature must be timestamp=<seconds>,signature=<hex>"
    message = timestamp.encode() + b"." + body
    expected = hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()
    if not hmac.compare_digest(signed.encode(), expected.encode()):
        return "bad X-Buildkite-Signature"
    if abs(now.timestamp() - int(timestamp)) > SIGNATURE_WINDOW.total_seconds():
        return f"stale X-Buildkite-Signature (its timestamp is over {SIGNATURE_WINDOW} from now)"
    return ""


def store(accepted: Accepted, stored: Storage, clock: Clock) -> dict[str, Any]:
    """Write a delivery about a webhook-fed trunk; a group it opens is settled when it closes
    (`clock.call_at`)."""
    trunk, name = accepted.trunk, accepted.event
    try:
        result = ingest_delivery(stored, trunk, accepted.rule, name, accepted.payload, clock.now())
    except PayloadError as err:
        logger.warning("webhook delivery refused", extra={"event": name, "error": str(err)})
        return _answer(400, str(err))
    _report(accepted.delivery_id, result)
    group = result.group
    if group is not None and group.opened:
        # This delivery opened its bucket's group: wait for the bucket to end (at most
        # GROUP_WINDOW), then settle the group if the evaluator counted every cell of it.
        clock.call_at(group.closes_at, lambda: settle(stored, trunk.trunk_id, group, clock.now()))
    return _answer(200, f"ignored: {result.ignored}" if result.ignored else "stored")


def _report(delivery_id: str, result: DeliveryResult) -> None:
    fields = {k: v for k, v in asdict(result).items() if k != "group"}
    # Its counts are in this line, not metrics: nothing alarms on them (CellsMissedByWebhooks
    # is the webhooks' health), and a custom metric is a monthly fee.
    logger.info("webhook delivery", extra={"delivery": delivery_id, **fields})


def _body(event: dict[str, Any]) -> bytes | dict[str, Any]:
    """The request's body, or the answer refusing it (not base64, or too large)."""
    raw = event.get("body") or ""
    if not event.get("isBase64Encoded"):
        body = str(raw).encode()
    else:
        try:
            body = base64.b64decode(str(raw), validate=True)
        except (binascii.Error, ValueError):
            return _answer(400, "the body is not valid base64")
    if len(body) > MAX_BODY_BYTES:
        return _answer(413, f"payload over {MAX_BODY_BYTES} bytes")
    return body


def _signed(body: bytes, signature: str, secret: str) -> bool:
    if not signature.startswith(SIGNATURE_PREFIX) or not secret:
        return False
    expected = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(signature.removeprefix(SIGNATURE_PREFIX).encode(), expected.encode())


def _answer(status: int, message: str) -> dict[str, Any]:
    return {
        "statusCode": status,
        "headers": {"Content-Type": "application/json"},
        "body": json.dumps({"message": message}),
    }
