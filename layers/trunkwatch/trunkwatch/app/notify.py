"""Notifier: when a poll or a sweep has settled, send every due transition of the trunk's
alerts to every receiver, exactly once per receiver.

Stages per receiver, as in Alertmanager's notify pipeline: its matchers pick the alerts
(route), silences and inhibition hold them (mute), its own notification log decides what is
due (dedup), and delivery goes through Powertools idempotency keyed on (receiver,
fingerprint, the log's sequence number + 1), so a retried batch, a duplicate stream record
or a concurrent tick cannot deliver it twice. A delivery that fails deletes its idempotency
record and leaves the log as it was: the next tick tries again (retry). The log entry is
advanced only after the delivery.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit

from trunkwatch.app import settings
from trunkwatch.app.trunk_metrics import ALERTS_FIRING, FAILING_JOBS, trunk_gauge
from trunkwatch.app.views import trunk_views
from trunkwatch.channels.base import Channel, ChannelError, Notification
from trunkwatch.channels.sns import SnsChannel
from trunkwatch.domain import alerts
from trunkwatch.domain.alerts import Alert, AlertView, Links
from trunkwatch.domain.config import IDEMPOTENCY_TTL, Deployment, RuleConfig, TrunkConfig
from trunkwatch.domain.dedup import Decision, LogState, decide, holders
from trunkwatch.silences import Silence
from trunkwatch.storage import keys, logs
from trunkwatch.storage.items import NotificationLog
from trunkwatch.storage.table import TTL_ATTRIBUTE

logger = Logger(child=True)
metrics = Metrics()

IDEMPOTENCY_TTL_S = int(IDEMPOTENCY_TTL.total_seconds())
# Powertools writes the record's expiry (epoch seconds) here: the table's TTL attribute.
IDEMPOTENCY_EXPIRY_ATTRIBUTE = TTL_ATTRIBUTE


@dataclass
class TickResult:
    trunk: str
    sent: list[dict[str, Any]] = field(default_factory=list)
    held: int = 0
    failed: int = 0


def notify_trunk(
    trunk: TrunkConfig,
    rule: RuleConfig,
    silences: Sequence[Silence],
    channels: Sequence[Channel],
    links: Links,
    now: datetime,
) -> TickResult:
    result = TickResult(trunk.trunk_id)
    views = trunk_views(trunk, rule, silences, links, now, include_resolved=True)
    firing = [v.alert for v in views if v.alert.status == alerts.FIRING]
    metrics.add_metric(name="AlertsFiring", unit=MetricUnit.Count, value=len(firing))
    trunk_gauge(ALERTS_FIRING, trunk.trunk_id, len(firing))
    trunk_gauge(FAILING_JOBS, trunk.trunk_id, sum(a.name == alerts.JOB_FAILING for a in firing))
    for channel in channels:
        _notify_channel(channel, trunk, rule, views, links, now, result)
    return result


def _notify_channel(
    channel: Channel,
    trunk: TrunkConfig,
    rule: RuleConfig,
    views: list[AlertView],
    links: Links,
    now: datetime,
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
        entry = entries.get(alert.fingerprint) or logs.new(
            trunk.trunk_id, channel.name, alert.fingerprint, alert.name, alert.labels.get("job")
        )
        decision = decide(view, _log_state(entry), now, rule.repeat_interval)
        if decision is None:
            result.held += _record_hold(entry, view, now, rule.retention)
            continue
        notification = Notification(alert, decision.status, decision.reason, links.api_url, channel.name)
        try:
            _deliver(channel, notification, int(entry.seq) + 1)
        except ChannelError as err:
            # Nothing recorded: the next tick (at the latest the next sweep) tries again.
            logger.error(
                "delivery failed; retried at the next tick",
                extra={"receiver": channel.name, "fingerprint": alert.fingerprint, "error": str(err)},
            )
            metrics.add_metric(name="NotificationErrors", unit=MetricUnit.Count, value=1)
            result.failed += 1
            return  # this receiver is failing: its other transitions wait for the retry too
        _advance(entry, alert, decision, now, rule.retention)
        result.sent.append(
            {
                "receiver": channel.name,
                "status": decision.status,
                "alertname": alert.name,
                "reason": decision.reason,
            }
        )
        metrics.add_metric(name="NotificationsSent", unit=MetricUnit.Count, value=1)


def _deliver(channel: Channel, notification: Notification, seq: int) -> None:
    """Send once per (receiver, fingerprint, seq), whatever retries and redeliveries happen."""
    current = settings.current()
    deliver = _idempotent(current.table_name, current.endpoint_url)
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


def _log_state(entry: NotificationLog) -> LogState:
    return LogState(
        last_status=entry.last_status,
        last_sent_at=entry.last_sent_at,
        jobs=tuple(str(job) for job in entry.jobs or ()),
        held_by=tuple(str(hold) for hold in entry.held_by or ()),
    )


def _record_hold(entry: NotificationLog, view: AlertView, now: datetime, retention: timedelta) -> int:
    """Remember what holds a firing alert back, so its release can say which silence ended."""
    held = list(holders(view)) or None
    if not view.suppressed or view.alert.status != alerts.FIRING or (entry.held_by or None) == held:
        return int(view.suppressed)
    entry.held_by = held
    logs.save(entry, now, retention)
    return 1


def _advance(
    entry: NotificationLog, alert: Alert, decision: Decision, now: datetime, retention: timedelta
) -> None:
    entry.seq = int(entry.seq) + 1
    entry.last_status = decision.status
    entry.last_sent_at = now
    entry.starts_at = alert.starts_at
    entry.jobs = sorted(alert.jobs) or None
    entry.labels = alert.labels
    entry.annotations = alert.annotations
    entry.held_by = None
    logs.save(entry, now, retention)


def _resolved_from_log(entry: NotificationLog, trunk: TrunkConfig, now: datetime) -> AlertView:
    """The alert as last sent, now resolved."""
    alert = Alert(
        dict(entry.labels or {}), dict(entry.annotations or {}), starts_at=entry.starts_at or now, ends_at=now
    )
    return AlertView(alert, trunk.trunk_id)


def channels_for(current: settings.Settings, deployment: Deployment) -> list[Channel]:
    """The SNS topic, then each configured receiver."""
    if not deployment.receivers:
        return [SnsChannel(current.topic_arn)]
    from trunkwatch.app.receivers import receiver_channels

    return [SnsChannel(current.topic_arn), *receiver_channels(deployment.receivers)]


def on_settled_tick(trunk_id: str, now: datetime) -> TickResult | None:
    """A poll's evaluation or a sweep finished: notify its trunk."""
    from trunkwatch.silences import store

    current = settings.current()
    deployment = settings.deployment(current)
    trunk = next((t for t in deployment.trunks if t.trunk_id == trunk_id), None)
    if trunk is None:
        logger.warning("tick of a trunk no longer configured", extra={"trunk": trunk_id})
        return None
    links = Links(current.api_url, current.dashboard_url)
    return notify_trunk(
        trunk, deployment.rule_for(trunk), store.active(now), channels_for(current, deployment), links, now
    )
