"""Notifier: when a poll or a sweep has settled, send every due transition of the trunk's
alerts to every receiver, exactly once per receiver.

Stages per receiver, as in Alertmanager's notify pipeline: its matchers pick the alerts
(route), silences and inhibition hold them (mute), its own notification log decides what is
due (dedup), and delivery goes through Powertools idempotency keyed on (receiver,
fingerprint, the log's sequence number + 1), so a retried batch, a duplicate stream record
or a concurrent tick cannot deliver it twice. A delivery that fails deletes its idempotency
record and leaves the log as it was: the next tick tries again, and the receiver's later
messages wait behind it, in order (retry). A message the receiver refuses for good
(ChannelRejected) is recorded in the log as failed, with the reason, and the next ones go on:
one bad message cannot jam a receiver. The log entry is advanced only after the delivery.

An invocation has one time budget for all its ticks and receivers (`remaining_s`, from the
Lambda context): every request of a delivery ends before the budget does (the notification's
deadline), no delivery starts with less than DELIVERY_RESERVE_S left, and what is left waits
for the next tick, untouched.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit

from trunkwatch.app.settings import Settings
from trunkwatch.app.trunk_metrics import ALERTS_FIRING, FAILING_JOBS, trunk_gauge
from trunkwatch.app.views import trunk_views
from trunkwatch.channels.base import Channel, ChannelError, ChannelRejected, Notification
from trunkwatch.channels.sns import SnsChannel
from trunkwatch.domain import alerts
from trunkwatch.domain.alerts import Alert, AlertView, Links
from trunkwatch.domain.config import IDEMPOTENCY_TTL, Deployment, RuleConfig, TrunkConfig
from trunkwatch.domain.dedup import Decision, LogState, decide, holders
from trunkwatch.silences import Silence
from trunkwatch.storage import keys
from trunkwatch.storage.keys import TTL_ATTRIBUTE
from trunkwatch.storage.port import Logs, Storage
from trunkwatch.storage.records import LogEntry

logger = Logger(child=True)
metrics = Metrics()

IDEMPOTENCY_TTL_S = int(IDEMPOTENCY_TTL.total_seconds())
# Powertools writes the record's expiry (epoch seconds) here: the table's TTL attribute.
IDEMPOTENCY_EXPIRY_ATTRIBUTE = TTL_ATTRIBUTE
# A delivery starts only with this much time left; each ends FINISH_RESERVE_S before the
# budget does, leaving time to write the log and report the stream batch.
DELIVERY_RESERVE_S = 10.0
FINISH_RESERVE_S = 5.0

RemainingSeconds = Callable[[], float]  # the invocation's time left (the Lambda context's)


@dataclass
class TickResult:
    trunk: str
    sent: list[dict[str, Any]] = field(default_factory=list)
    held: int = 0
    failed: int = 0
    rejected: int = 0
    deferred: int = 0  # receivers left for the next tick: the time budget was spent


def notify_trunk(
    storage: Storage,
    trunk: TrunkConfig,
    rule: RuleConfig,
    silences: Sequence[Silence],
    channels: Sequence[Channel],
    links: Links,
    now: datetime,
    settings: Settings,
    remaining_s: RemainingSeconds,
) -> TickResult:
    """Send the trunk's due transitions; `settings` name the table of the idempotency records."""
    result = TickResult(trunk.trunk_id)
    views = trunk_views(storage, trunk, rule, silences, links, now, include_resolved=True)
    firing = [v.alert for v in views if v.alert.status == alerts.FIRING]
    metrics.add_metric(name="AlertsFiring", unit=MetricUnit.Count, value=len(firing))
    trunk_gauge(ALERTS_FIRING, trunk.trunk_id, len(firing))
    trunk_gauge(FAILING_JOBS, trunk.trunk_id, sum(a.name == alerts.JOB_FAILING for a in firing))
    for channel in channels:
        _notify_channel(storage.logs, channel, trunk, rule, views, links, now, settings, remaining_s, result)
    return result


def _notify_channel(
    logs: Logs,
    channel: Channel,
    trunk: TrunkConfig,
    rule: RuleConfig,
    views: list[AlertView],
    links: Links,
    now: datetime,
    settings: Settings,
    remaining_s: RemainingSeconds,
    result: TickResult,
) -> None:
    entries = logs.of_receiver(trunk.trunk_id, channel.name)
    current = {view.alert.fingerprint for view in views}
    # A trunk-level alert that stopped firing exists only in the log: resolve it from there.
    resolved_from_log = [
        _resolved_from_log(entry, trunk, now)
        for fingerprint, entry in entries.items()
        if fingerprint not in current and entry.last_status == alerts.FIRING and entry.job is None
    ]
    for view in [*views, *resolved_from_log]:
        alert = view.alert
        if not channel.accepts(alert.labels):
            continue
        entry = entries.get(alert.fingerprint) or LogEntry(
            channel.name, alert.fingerprint, alert.name, alert.labels.get("job")
        )
        decision = decide(view, _log_state(entry), now, rule.repeat_interval)
        if decision is None:
            result.held += _record_hold(logs, trunk.trunk_id, entry, view, now, rule.retention)
            continue
        if remaining_s() < DELIVERY_RESERVE_S:
            logger.warning(
                "time budget spent; the receiver's due messages wait for the next tick",
                extra={"receiver": channel.name, "trunk": trunk.trunk_id},
            )
            metrics.add_metric(name="NotificationsDeferred", unit=MetricUnit.Count, value=1)
            result.deferred += 1
            return
        deadline = time.monotonic() + remaining_s() - FINISH_RESERVE_S
        notification = Notification(
            alert, decision.status, decision.reason, links.api_url, channel.name, deadline
        )
        try:
            _deliver(channel, notification, int(entry.seq) + 1, settings)
        except ChannelRejected as err:
            # Sending it again cannot help: record why, and go on with the next message.
            logger.error(
                "delivery rejected by the receiver; recorded as failed, not retried",
                extra={"receiver": channel.name, "fingerprint": alert.fingerprint, "error": str(err)},
            )
            metrics.add_metric(name="NotificationsRejected", unit=MetricUnit.Count, value=1)
            result.rejected += 1
            _advance(logs, trunk.trunk_id, entry, alert, decision, now, rule.retention, failed=str(err))
            continue
        except ChannelError as err:
            # Nothing recorded: the next tick (at the latest the next sweep) tries again.
            logger.error(
                "delivery failed; retried at the next tick",
                extra={"receiver": channel.name, "fingerprint": alert.fingerprint, "error": str(err)},
            )
            metrics.add_metric(name="NotificationErrors", unit=MetricUnit.Count, value=1)
            result.failed += 1
            return  # this receiver is failing: its other transitions wait for the retry too
        _advance(logs, trunk.trunk_id, entry, alert, decision, now, rule.retention)
        result.sent.append(
            {
                "receiver": channel.name,
                "status": decision.status,
                "alertname": alert.name,
                "reason": decision.reason,
            }
        )
        metrics.add_metric(name="NotificationsSent", unit=MetricUnit.Count, value=1)


def _deliver(channel: Channel, notification: Notification, seq: int, settings: Settings) -> None:
    """Send once per (receiver, fingerprint, seq), whatever retries and redeliveries happen."""
    deliver = _idempotent(settings.table_name, settings.endpoint_url)
    deliver(
        transition={"receiver": channel.name, "fingerprint": notification.alert.fingerprint, "seq": seq},
        send=lambda: channel.send(notification),
    )


@functools.cache
def _idempotency_config() -> Any:
    from aws_lambda_powertools.utilities.idempotency import IdempotencyConfig

    return IdempotencyConfig(
        event_key_jmespath="[receiver, fingerprint, seq]", expires_after_seconds=IDEMPOTENCY_TTL_S
    )


def register_lambda_context(context: Any) -> None:
    """A delivery cut off by the function's timeout may be retried once the invocation's
    time has run out, not only after the idempotency record expires."""
    _idempotency_config().register_lambda_context(context)


@functools.cache
def _idempotent(table: str, endpoint: str | None) -> Callable[..., Any]:
    """The idempotent delivery for one table (cached per warm container; the endpoint is part
    of the key because boto3 reads it from the environment when the client is made)."""
    from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer, idempotent_function

    persistence = DynamoDBPersistenceLayer(
        table_name=table,
        key_attr="pk",
        sort_key_attr="sk",
        static_pk_value=keys.IDEMPOTENCY,
        expiry_attr=IDEMPOTENCY_EXPIRY_ATTRIBUTE,
    )

    @idempotent_function(
        data_keyword_argument="transition", persistence_store=persistence, config=_idempotency_config()
    )
    def deliver(transition: dict[str, Any], send: Callable[[], None]) -> dict[str, Any]:
        send()
        return {"receiver": transition["receiver"]}

    return deliver


def _log_state(entry: LogEntry) -> LogState:
    return LogState(
        last_status=entry.last_status,
        last_sent_at=entry.last_sent_at,
        jobs=tuple(str(job) for job in entry.jobs or ()),
        held_by=tuple(str(hold) for hold in entry.held_by or ()),
    )


def _record_hold(
    logs: Logs, trunk_id: str, entry: LogEntry, view: AlertView, now: datetime, retention: timedelta
) -> int:
    """Remember what holds a firing alert back, so its release can say which silence ended."""
    held = list(holders(view)) or None
    if not view.suppressed or view.alert.status != alerts.FIRING or (entry.held_by or None) == held:
        return int(view.suppressed)
    entry.held_by = held
    logs.save(trunk_id, entry, now, retention)
    return 1


def _advance(
    logs: Logs,
    trunk_id: str,
    entry: LogEntry,
    alert: Alert,
    decision: Decision,
    now: datetime,
    retention: timedelta,
    failed: str | None = None,
) -> None:
    """The transition is done with: sent, or `failed` (refused for good, with the reason)."""
    entry.seq = int(entry.seq) + 1
    entry.failed = failed
    entry.last_status = decision.status
    entry.last_sent_at = now
    entry.starts_at = alert.starts_at
    entry.jobs = sorted(alert.jobs) or None
    entry.labels = alert.labels
    entry.annotations = alert.annotations
    entry.held_by = None
    logs.save(trunk_id, entry, now, retention)


def _resolved_from_log(entry: LogEntry, trunk: TrunkConfig, now: datetime) -> AlertView:
    """The alert as last sent, now resolved."""
    alert = Alert(
        dict(entry.labels or {}), dict(entry.annotations or {}), starts_at=entry.starts_at or now, ends_at=now
    )
    return AlertView(alert, trunk.trunk_id)


def channels_for(settings: Settings, deployment: Deployment) -> list[Channel]:
    """The SNS topic, then each configured receiver."""
    topic = SnsChannel(settings.topic_arn, settings.region, settings.endpoint_url)
    if not deployment.receivers:
        return [topic]
    from trunkwatch.app.receivers import receiver_channels

    return [topic, *receiver_channels(deployment.receivers)]


def on_settled_tick(
    storage: Storage,
    trunk_id: str,
    now: datetime,
    settings: Settings,
    deployment: Deployment,
    remaining_s: RemainingSeconds,
) -> TickResult | None:
    """A poll's evaluation or a sweep finished: notify its trunk."""
    from trunkwatch.silences import store

    trunk = deployment.trunk(trunk_id)
    if trunk is None:
        logger.warning("tick of a trunk no longer configured", extra={"trunk": trunk_id})
        return None
    links = Links(settings.api_url, settings.dashboard_url)
    return notify_trunk(
        storage,
        trunk,
        deployment.rule_for(trunk),
        store.active(storage.silences, now),
        channels_for(settings, deployment),
        links,
        now,
        settings,
        remaining_s,
    )
