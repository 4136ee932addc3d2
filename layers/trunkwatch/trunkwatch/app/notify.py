"""Notifier: at the end of a tick, publish every due transition to SNS exactly once.

A transition is (alert fingerprint, the log's sequence number + 1). Publishing goes through
Powertools idempotency keyed on exactly that, so a retried batch, a duplicate stream record
or a concurrent sweep cannot publish it twice; a publish that fails deletes the idempotency
record and is tried again. The notification log entry is advanced only after the publish.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit
from pynamodb.exceptions import PutError

from trunkwatch.app.evaluate import TrunkReads, evaluate_job
from trunkwatch.app.views import AlertView, trunk_views
from trunkwatch.domain import alerts
from trunkwatch.domain.alerts import Alert
from trunkwatch.domain.config import RuleConfig, TrunkConfig
from trunkwatch.domain.dedup import Decision, LogState, decide, holders, message
from trunkwatch.silences import Silence
from trunkwatch.storage.items import AlertItem, NotificationLog
from trunkwatch.storage.table import trunk_pk

logger = Logger(child=True)
metrics = Metrics()

# A sweep waits this long for an open poll to settle before notifying anyway.
BARRIER_TIMEOUT = timedelta(minutes=5)
IDEMPOTENCY_TTL_S = 7 * 24 * 3600


@functools.cache
def _idempotency_config() -> Any:
    """Made on first use: Powertools idempotency (and boto3) load with the first call, not
    at import."""
    from aws_lambda_powertools.utilities.idempotency import IdempotencyConfig

    # One transition = one fingerprint at one log sequence number; the message text may differ.
    return IdempotencyConfig(event_key_jmespath="[fingerprint, seq]", expires_after_seconds=IDEMPOTENCY_TTL_S)


def __getattr__(name: str) -> Any:
    """`idempotency_config`, the IdempotencyConfig the handler registers its context with."""
    if name == "idempotency_config":
        return _idempotency_config()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@dataclass
class TickResult:
    trunk: str
    sent: list[dict[str, Any]] = field(default_factory=list)
    held: int = 0
    waiting_for_poll: bool = False


def sweep_trunk(
    trunk: TrunkConfig, rule: RuleConfig, silences: Sequence[Silence], now: datetime
) -> TickResult:
    """Scheduled tick: re-judge firing jobs (age, staleness) then notify, unless a poll is
    still being evaluated (its settled tick will notify)."""
    pk = trunk_pk(trunk.trunk_id)
    reads = TrunkReads(pk)  # the barrier check and the re-judging share one state read
    state = reads.state
    if state.open_poll and state.open_poll_at and now - state.open_poll_at < BARRIER_TIMEOUT:
        return TickResult(trunk.trunk_id, waiting_for_poll=True)
    for item in AlertItem.query(
        pk, AlertItem.sk.startswith("ALERT#"), filter_condition=AlertItem.status == alerts.FIRING
    ):
        evaluate_job(pk, item.job, rule, now, reads)
    return notify_trunk(trunk, rule, silences, now)


def notify_trunk(
    trunk: TrunkConfig, rule: RuleConfig, silences: Sequence[Silence], now: datetime
) -> TickResult:
    pk = trunk_pk(trunk.trunk_id)
    result = TickResult(trunk.trunk_id)
    views = trunk_views(trunk, rule, silences, include_resolved=True)
    logs = {
        log.sk.removeprefix("NOTIFY#"): log
        for log in NotificationLog.query(pk, NotificationLog.sk.startswith("NOTIFY#"))
    }
    current = {view.alert.fingerprint for view in views}
    # A trunk-level alert that stopped firing exists only in the log: resolve it from there.
    views += [
        _resolved_from_log(log, trunk, now)
        for fp, log in logs.items()
        if fp not in current and log.last_status == alerts.FIRING and log.job is None
    ]
    firing = 0
    for view in views:
        alert = view.alert
        firing += alert.status == alerts.FIRING
        log = logs.get(alert.fingerprint) or NotificationLog(
            pk, f"NOTIFY#{alert.fingerprint}", alertname=alert.name, job=alert.labels.get("job")
        )
        decision = decide(view, _log_state(log), now, rule.repeat_interval)
        if decision is None:
            result.held += _record_hold(log, view)
            continue
        publish = _publisher(
            os.environ["TABLE_NAME"], os.environ["TOPIC_ARN"], os.environ.get("AWS_ENDPOINT_URL")
        )
        sent = publish(
            transition={
                "fingerprint": alert.fingerprint,
                "seq": int(log.seq) + 1,
                **message(view, decision, os.environ.get("API_URL", "")),
            }
        )
        _advance(log, alert, decision, now)
        result.sent.append(
            {
                "subject": sent["Subject"],
                "status": decision.status,
                "alertname": alert.name,
                "reason": decision.reason,
            }
        )
        metrics.add_metric(name="NotificationsSent", unit=MetricUnit.Count, value=1)
    metrics.add_metric(name="AlertsFiring", unit=MetricUnit.Count, value=firing)
    return result


def _log_state(log: NotificationLog) -> LogState:
    return LogState(
        last_status=log.last_status,
        last_sent_at=log.last_sent_at,
        jobs=tuple(str(job) for job in log.jobs or ()),
        held_by=tuple(str(hold) for hold in log.held_by or ()),
    )


def _record_hold(log: NotificationLog, view: AlertView) -> int:
    """Remember what holds a firing alert back, so its release can say which silence ended."""
    held = list(holders(view)) or None
    if not view.suppressed or view.alert.status != alerts.FIRING or (log.held_by or None) == held:
        return int(view.suppressed)
    log.held_by = held
    _save_log(log)
    return 1


def _advance(log: NotificationLog, alert: Alert, decision: Decision, now: datetime) -> None:
    log.seq = int(log.seq) + 1
    log.last_status = decision.status
    log.last_sent_at = now
    log.starts_at = alert.starts_at
    log.jobs = sorted(alert.jobs) or None
    log.labels = alert.labels
    log.annotations = alert.annotations
    log.held_by = None
    _save_log(log)


def _save_log(log: NotificationLog) -> None:
    try:
        log.save()
    except PutError:
        logger.exception("could not record notification log entry", extra={"sk": log.sk})
        raise


def _resolved_from_log(log: NotificationLog, trunk: TrunkConfig, now: datetime) -> AlertView:
    """The alert as last sent, now resolved."""
    alert = Alert(
        dict(log.labels or {}), dict(log.annotations or {}), starts_at=log.starts_at or now, ends_at=now
    )
    return AlertView(alert, trunk.trunk_id)


@functools.cache
def _publisher(table: str, topic: str, endpoint: str | None) -> Callable[..., dict[str, Any]]:
    """The idempotent publish for one table/topic (cached per warm container; the endpoint
    is part of the key because boto3 reads it from the environment when the client is made)."""
    import boto3
    from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer, idempotent_function

    persistence = DynamoDBPersistenceLayer(
        table_name=table,
        key_attr="pk",
        sort_key_attr="sk",
        static_pk_value="IDEMPOTENCY",
        expiry_attr="expires_at",
    )
    sns = boto3.client("sns")

    @idempotent_function(
        data_keyword_argument="transition", persistence_store=persistence, config=_idempotency_config()
    )
    def publish(transition: dict[str, Any]) -> dict[str, Any]:
        sns.publish(
            TopicArn=topic,
            Subject=transition["Subject"],
            Message=transition["Message"],
            MessageAttributes=transition["MessageAttributes"],
        )
        return {"Subject": transition["Subject"]}

    return publish


def on_settled_tick(pk: str, now: datetime) -> TickResult | None:
    """A poll's evaluation finished: notify its trunk."""
    from trunkwatch.app import settings
    from trunkwatch.silences import store

    deployment = settings.deployment()
    trunk_id = pk.removeprefix("TRUNK#")
    trunk = next((t for t in deployment.trunks if t.trunk_id == trunk_id), None)
    if trunk is None:
        logger.warning("tick of a trunk no longer configured", extra={"trunk": trunk_id})
        return None
    return notify_trunk(trunk, deployment.rule_for(trunk), store.active(now), now)


def sweep_all(now: datetime) -> list[TickResult]:
    from trunkwatch.app import settings
    from trunkwatch.silences import store

    deployment = settings.deployment()
    silences = store.active(now)
    return [sweep_trunk(trunk, deployment.rule_for(trunk), silences, now) for trunk in deployment.trunks]
