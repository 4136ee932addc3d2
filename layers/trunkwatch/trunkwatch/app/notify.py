"""Notifier: when a poll or a sweep has settled, send every due transition of the trunk's
alerts to every receiver, exactly once per receiver.

Stages per receiver, as in Alertmanager's notify pipeline: its matchers pick the alerts
(route), silences and inhibition hold them (mute), its own notification log decides what is
due (dedup), and the log entry is also the delivery's claim: before sending, a conditional
write leases the entry, only if it is still at the sequence number read and no live lease
holds it; after sending, a conditional write advances it (the transition recorded, its
sequence number one more, the lease cleared) only while this delivery's lease holds it. So a
retried batch, a duplicate stream record or a concurrent tick cannot deliver a transition
twice. A lease lasts the delivery's own time budget (DELIVERY_BUDGET_S, not the function's
timeout), on the handler's clock: one left by an invocation that died is taken over by the
next tick after that, and meeting a live one is not a failure (the receiver's messages wait
for the next tick). The one duplicate left: a message sent by an invocation that died
before advancing the log goes out again once its lease has passed. The log is the ledger:
what is due is derived from the alerts and what the log says was sent, so whatever a dead
invocation or a dead-lettered batch left unsent goes out with the next settled tick, at the
latest the next sweep's. A delivery that fails releases its lease and leaves the log as it
was: the next tick tries again, and the receiver's later messages wait behind it, in order
(retry). A message the receiver refuses for good (ChannelRejected) is recorded in the log as
rejected, with the receiver's answer, and the next ones go on: one bad message cannot jam a
receiver (log). Failures and rejections are counted service-wide (the alarms' metrics) and
per receiver (dimension `receiver`).

An acknowledged alert (design.md §4.3) gets no reminders; a receiver that takes
acknowledgements (`Acknowledging`) is told of one once, as a transition of its own before
anything else due for the alert, and the acknowledgement ends once the trunk's pass sees
its alert no longer firing.

The heartbeat (`Watchdog`, design.md §4.2) takes the same stages on its own log partition,
at each sweep's tick, for the heartbeat's receivers only; so does each trunk's daily digest
(`app/digest.py`, design.md §4.4), on an entry of its own in the trunk's log.

An invocation has one time budget for all its ticks and receivers (`remaining_s`, from the
Lambda context): every request of a delivery ends before the budget does (the notification's
deadline), no delivery starts with less than DELIVERY_RESERVE_S left, and what is left waits
for the next tick, untouched (budget).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit, single_metric
from aws_lambda_powertools.metrics.functions import is_metrics_disabled

from trunkwatch.app.acks import by_ack_silences
from trunkwatch.app.settings import Settings
from trunkwatch.app.trunk_metrics import ALERTS_FIRING, FAILING_JOBS, trunk_gauge
from trunkwatch.app.views import trunk_views, watchdog_alert
from trunkwatch.channels.base import Acknowledging, Channel, ChannelError, ChannelRejected, Notification
from trunkwatch.channels.sns import TopicReceiver
from trunkwatch.domain import acks as acknowledgements
from trunkwatch.domain import alerts
from trunkwatch.domain.acks import Acknowledgement
from trunkwatch.domain.alerts import Alert, AlertView, FailingJob, Links
from trunkwatch.domain.clock import Clock
from trunkwatch.domain.config import (
    STACK_TOPIC,
    Deployment,
    HeartbeatConfig,
    ReceiverConfig,
    RuleConfig,
    TrunkConfig,
)
from trunkwatch.domain.dedup import VERDICT_ANNOTATION, DueNotification, LogState, due_notification, holders
from trunkwatch.domain.notification_log import Lease, LogEntry, Rejection
from trunkwatch.silences import Silence
from trunkwatch.storage.port import Storage

logger = Logger(child=True)
metrics = Metrics()

# A delivery starts only with this much time left; each ends FINISH_RESERVE_S before the
# budget does, leaving time to write the log and report the stream batch.
DELIVERY_RESERVE_S = 10.0
FINISH_RESERVE_S = 5.0
# One delivery's own budget: its requests end FINISH_RESERVE_S before it, and its lease on
# the log entry blocks another delivery of the same transition no longer than this. A publish
# that succeeded in an invocation that died before recording it is sent again after this: the
# one duplicate no design avoids with SNS (standard topics do not deduplicate).
DELIVERY_BUDGET_S = 20.0
# The heartbeat's log partition (`LOG#heartbeat`: no trunk's id, which is `owner/name#branch`).
HEARTBEAT_LOG = "heartbeat"
# How long its rejections are kept (its log entries, always last sent firing, never expire).
HEARTBEAT_RETENTION = timedelta(days=30)
# Transitions of one alert one receiver may get in one tick: its acknowledgement, then what
# else is due (its resolution, say).
TRANSITIONS_PER_TICK = 2

RemainingSeconds = Callable[[], float]  # the invocation's time left (the Lambda context's)


@dataclass
class TickResult:
    trunk: str
    sent: list[dict[str, Any]] = field(default_factory=list)
    held: int = 0
    failed: int = 0
    rejected: int = 0
    deferred: int = 0  # receivers left for the next tick: the time budget was spent

    def done(self, receiver: str, alertname: str, decision: DueNotification, refused: str | None) -> None:
        """A transition done with: sent, or refused for good."""
        if refused is not None:
            self.rejected += 1
            return
        status, reason = decision.status, decision.reason
        self.sent.append({"receiver": receiver, "status": status, "alertname": alertname, "reason": reason})


@dataclass(frozen=True)
class Round:
    """What the receivers' passes over a set of alerts share: where their logs are, how often
    a firing alert is repeated, how long a resolved one's log is kept, and the tick's time
    (`now`, what dedup decides on; `clock`, what leases are taken on), links and time budget."""

    storage: Storage
    log: str  # the logs' partition: the trunk's id, or HEARTBEAT_LOG
    repeat_interval: timedelta
    retention: timedelta
    links: Links
    now: datetime
    clock: Clock
    remaining_s: RemainingSeconds


@dataclass(frozen=True)
class Tick:
    """One settled tick of one trunk: what each receiver's pass shares."""

    storage: Storage
    trunk: TrunkConfig
    rule: RuleConfig
    links: Links
    now: datetime
    clock: Clock
    settings: Settings
    remaining_s: RemainingSeconds

    def round(self) -> Round:
        rule = self.rule
        return Round(
            self.storage,
            self.trunk.trunk_id,
            rule.repeat_interval,
            rule.retention,
            self.links,
            self.now,
            self.clock,
            self.remaining_s,
        )


def notify_trunk(tick: Tick, silences: Sequence[Silence], channels: Sequence[Channel]) -> TickResult:
    """Send the trunk's due transitions to each receiver in turn (after acknowledging what
    active `ACK!` silences match), then end the acknowledgements of alerts that no longer
    fire."""
    trunk = tick.trunk
    result = TickResult(trunk.trunk_id)
    acks = tick.storage.logs.acks(trunk.trunk_id)
    views = trunk_views(
        tick.storage, trunk, tick.rule, silences, tick.links, tick.now, include_resolved=True, acks=acks
    )
    for view, ack in by_ack_silences(views, silences, tick.now):
        if tick.storage.logs.add_ack(trunk.trunk_id, ack):  # else another one stands: next tick
            view.acknowledge(ack)
            acks.append(ack)
    firing = [v.alert for v in views if v.alert.status == alerts.FIRING]
    if tick.settings.dashboard_metrics:
        metrics.add_metric(name="AlertsFiring", unit=MetricUnit.Count, value=len(firing))
        trunk_gauge(ALERTS_FIRING, trunk.trunk_id, len(firing))
        trunk_gauge(FAILING_JOBS, trunk.trunk_id, sum(a.name == alerts.JOB_FAILING for a in firing))
    live = acknowledgements.live_by_fingerprint(acks)
    for channel in channels:
        _notify_receiver(channel, tick.round(), views, result, live)
    # After every receiver's pass: one told of the acknowledgement and the resolution in this
    # tick was told them in that order.
    for ack in acknowledgements.over(acks, [a.fingerprint for a in firing]):
        tick.storage.logs.end_ack(trunk.trunk_id, ack, tick.now, tick.rule.retention)
    return result


def send_heartbeat(
    heartbeat: HeartbeatConfig,
    storage: Storage,
    clock: Clock,
    settings: Settings,
    remaining_s: RemainingSeconds,
) -> TickResult:
    """Send the Watchdog to each of the heartbeat's receivers when its log says it is due:
    first, then every `every` (a reminder), exactly once per beat as any transition is."""
    from trunkwatch.app.receivers import receiver_channels

    links = Links(settings.api_url, settings.dashboard_url)
    every, now = heartbeat.every, clock.now()
    beat = Round(storage, HEARTBEAT_LOG, every, HEARTBEAT_RETENTION, links, now, clock, remaining_s)
    views = [AlertView(watchdog_alert(links, every, now), HEARTBEAT_LOG)]
    result = TickResult(HEARTBEAT_LOG)
    for channel in receiver_channels(heartbeat.receivers):
        _notify_receiver(channel, beat, views, result)
    return result


def _notify_receiver(
    channel: Channel,
    tick: Round,
    views: list[AlertView],
    result: TickResult,
    acked: Mapping[str, Acknowledgement] | None = None,
) -> None:
    """The stages, per alert in order: route, mute, dedup, budget, deliver, log. A failing
    receiver or a spent budget leaves the receiver's rest for the next tick, in order.
    `acked`: the live acknowledgements, by fingerprint (for alerts resolved from the log)."""
    tells_acks = isinstance(channel, Acknowledging)
    for view, entry in _routed(channel, tick, views, acked or {}):
        alert = view.alert
        if view.suppressed:
            result.held += 1
            _mute(entry, view, tick)
            continue
        for _ in range(TRANSITIONS_PER_TICK):
            decision = due_notification(view, _log_state(entry), tick.now, tick.repeat_interval, tells_acks)
            if decision is None:
                break
            if not budget_left(channel.name, tick):
                result.deferred += 1
                return
            notification = _notification(channel, alert, decision, tick)
            try:
                lease, refused = deliver_once(entry, alert.name, _sender(channel, notification), tick)
                _log(entry, view, decision, tick, refused, lease)
            except DeliveryInProgress:
                result.deferred += 1
                return  # another invocation holds it (or held it and died): the next tick retries
            except ChannelError:
                result.failed += 1
                return  # this receiver is failing: its later transitions wait for the retry too
            result.done(channel.name, alert.name, decision, refused)


def _sender(channel: Channel, notification: Notification) -> Callable[[], None]:
    """What delivers the transition: an acknowledgement's own call, or the channel's send."""
    if notification.reason == acknowledgements.ACKNOWLEDGED and isinstance(channel, Acknowledging):
        return lambda: channel.acknowledge(notification)
    return lambda: channel.send(notification)


def _routed(
    channel: Channel, tick: Round, views: list[AlertView], acked: Mapping[str, Acknowledgement]
) -> list[tuple[AlertView, LogEntry]]:
    """The alerts the receiver's matchers pick (by their labels, and the authors they blame;
    with those resolved from its log), and those it was sent firing: what it was told began,
    it is told the rest of, even when the alert no longer matches (its culprit, and so its
    author, changed). Each with its entry in the receiver's log (a new one if it has none)."""
    entries = tick.storage.logs.of_receiver(tick.log, channel.name)
    return [
        (
            view,
            entries.get(view.alert.fingerprint)
            or LogEntry(channel.name, view.alert.fingerprint, view.alert.name, view.alert.labels.get("job")),
        )
        for view in [*views, *_resolved_from_log(entries, views, tick, acked)]
        if any(channel.accepts(labels) for labels in view.alert.routing_labels())
        or _told(entries.get(view.alert.fingerprint))
    ]


def _told(entry: LogEntry | None) -> bool:
    return entry is not None and entry.last_status == alerts.FIRING


def due(storage: Storage, clock: Clock, settings: Settings, deployment: Deployment) -> int:
    """How many transitions the trunks' receivers have due now: what the next settled tick
    would try to send (a failed or throttled delivery's retry, say). Sends nothing."""
    from trunkwatch.silences import store

    now = clock.now()
    silences = store.active(storage.silences, now)
    channels = channels_for(settings, deployment)
    links = Links(settings.api_url, settings.dashboard_url)
    count = 0
    for trunk in deployment.trunks:
        rule = deployment.rule_for(trunk)
        tick = Tick(storage, trunk, rule, links, now, clock, settings, lambda: DELIVERY_BUDGET_S).round()
        acks = storage.logs.acks(trunk.trunk_id)
        views = trunk_views(storage, trunk, rule, silences, links, now, include_resolved=True, acks=acks)
        acked = acknowledgements.live_by_fingerprint(acks)
        for channel in channels:
            tells_acks = isinstance(channel, Acknowledging)
            count += sum(
                due_notification(view, _log_state(entry), now, tick.repeat_interval, tells_acks) is not None
                for view, entry in _routed(channel, tick, views, acked)
                if not view.suppressed
            )
    return count


def _mute(entry: LogEntry, view: AlertView, tick: Round) -> None:
    """A suppressed alert is held; remember what holds a firing one back, so its release can
    say which silence ended."""
    held = list(holders(view))
    if view.alert.status != alerts.FIRING or entry.held_by == held:
        return
    entry.held_by = held
    tick.storage.logs.save(tick.log, entry, tick.now, tick.retention)


def _log_state(entry: LogEntry) -> LogState:
    """What dedup reads of the receiver's log entry."""
    return LogState(
        last_status=entry.last_status,
        last_sent_at=entry.last_sent_at,
        jobs=tuple(sorted(str(job) for job in entry.jobs or ())),
        held_by=tuple(str(hold) for hold in entry.held_by or ()),
        verdict=(entry.annotations or {}).get(VERDICT_ANNOTATION, ""),
        job_verdicts=tuple(
            (str(job), str(data.get("verdict") or ""))
            for job, data in sorted((entry.jobs or {}).items() if isinstance(entry.jobs, dict) else ())
            if isinstance(data, dict)
        ),
        acknowledged=entry.acknowledged or "",
    )


def budget_left(receiver: str, tick: Round) -> bool:
    """Whether a delivery may start; if not, the receiver's due messages wait, untouched."""
    if tick.remaining_s() >= DELIVERY_RESERVE_S:
        return True
    logger.warning(
        "time budget spent; the receiver's due messages wait for the next tick",
        extra={"receiver": receiver, "trunk": tick.log},
    )
    metrics.add_metric(name="NotificationsDeferred", unit=MetricUnit.Count, value=1)
    return False


def _notification(channel: Channel, alert: Alert, decision: DueNotification, tick: Round) -> Notification:
    """The transition as the receiver gets it, to be delivered before its budget ends."""
    return Notification(
        alert, decision.status, decision.reason, tick.links.api_url, channel.name, delivery_deadline(tick)
    )


def delivery_deadline(tick: Round) -> float:
    """When (time.monotonic()) a delivery starting now must be done: its budget's end."""
    return time.monotonic() + _budget_s(tick) - FINISH_RESERVE_S


def _budget_s(tick: Round) -> float:
    """The delivery's own budget: DELIVERY_BUDGET_S, or the invocation's time left if less."""
    return min(DELIVERY_BUDGET_S, tick.remaining_s())


class DeliveryInProgress(Exception):
    """The transition's delivery is in progress elsewhere, or was until its invocation died."""


def deliver_once(
    entry: LogEntry, alertname: str, send: Callable[[], None], tick: Round
) -> tuple[Lease, str | None]:
    """Claim the transition after `entry` (lease the entry at the seq read), then `send` it:
    the lease to record it under (`record`), and None once sent or why the receiver refused
    it for good (sending it again cannot help). Raises DeliveryInProgress when another
    delivery holds the entry or has advanced it. Any other failure releases the lease and is
    raised: nothing is recorded, and the next tick (at the latest the next sweep) tries again."""
    logs, receiver = tick.storage.logs, entry.receiver
    where = {"receiver": receiver, "fingerprint": entry.fingerprint}
    now = tick.clock.now()
    lease = Lease(uuid.uuid4().hex, now + timedelta(seconds=_budget_s(tick)))
    if not logs.claim(tick.log, entry, lease, now, tick.retention):
        logger.warning("delivery in progress elsewhere; retried at the next tick", extra={**where})
        metrics.add_metric(name="NotificationsInProgress", unit=MetricUnit.Count, value=1)
        raise DeliveryInProgress(f"{receiver}: {entry.fingerprint} is claimed")
    try:
        send()
    except ChannelRejected as err:
        logger.error(
            "delivery rejected by the receiver; recorded as rejected, not retried",
            extra={**where, "alertname": alertname, "error": str(err)},
        )
        metrics.add_metric(name="NotificationsRejected", unit=MetricUnit.Count, value=1)
        _per_receiver("NotificationsRejected", receiver)
        return lease, str(err)
    except Exception as err:
        logs.release(tick.log, entry, lease)
        if not isinstance(err, ChannelError):
            raise
        logger.error("delivery failed; retried at the next tick", extra={**where, "error": str(err)})
        metrics.add_metric(name="NotificationErrors", unit=MetricUnit.Count, value=1)
        _per_receiver("NotificationErrors", receiver)
        raise
    metrics.add_metric(name="NotificationsSent", unit=MetricUnit.Count, value=1)
    return lease, None


def record(entry: LogEntry, lease: Lease, tick: Round) -> None:
    """Write `entry`, the delivered transition recorded (its seq one more), under the
    delivery's lease; DeliveryInProgress if another delivery took the lease over (the message
    went out, and that delivery sends it again)."""
    if not tick.storage.logs.advance(tick.log, entry, lease, tick.now, tick.retention):
        logger.warning(
            "delivery's lease taken over before it was recorded; the other delivery sends it again",
            extra={"receiver": entry.receiver, "fingerprint": entry.fingerprint},
        )
        metrics.add_metric(name="NotificationsInProgress", unit=MetricUnit.Count, value=1)
        raise DeliveryInProgress(f"{entry.receiver}: {entry.fingerprint} was taken over")


def _per_receiver(name: str, receiver: str) -> None:
    """The receiver's own count beside the service-wide one the alarm watches: its own EMF
    record (dimension `receiver`), published only when it fails, like the alarm's."""
    if is_metrics_disabled():  # single_metric prints even then (as in trunk_metrics)
        return
    with single_metric(name=name, unit=MetricUnit.Count, value=1) as metric:
        metric.add_dimension(name="receiver", value=receiver)


def _log(
    entry: LogEntry,
    view: AlertView,
    decision: DueNotification,
    tick: Round,
    refused: str | None,
    lease: Lease,
) -> None:
    """The transition is done with: sent, or refused for good (`refused`: the receiver's
    answer), which the log keeps beside the entry as a rejection, written first: a crash
    between the two leaves the transition due, and its retry writes both. The entry advances
    under the delivery's lease (`record`). It keeps what a resolution sent from it needs:
    labels, annotations and each failing job with its streak and culprit, as data. An
    acknowledgement told leaves the last message's time (the reminders' clock) as it was."""
    alert = view.alert
    if refused is not None:
        rejection = Rejection(
            entry.receiver,
            entry.fingerprint,
            alert.name,
            entry.job,
            decision.status,
            decision.reason,
            tick.now,
            refused,
        )
        tick.storage.logs.save_rejection(tick.log, rejection, tick.retention)
    entry.seq = int(entry.seq) + 1
    entry.last_status = decision.status
    if decision.reason == acknowledgements.ACKNOWLEDGED and view.acknowledgement is not None:
        entry.acknowledged = view.acknowledgement.key
    else:
        entry.last_sent_at = tick.now
    entry.starts_at = alert.starts_at
    entry.jobs = {job: failing.as_data() for job, failing in sorted(alert.jobs.items())} or None
    entry.labels = alert.labels
    entry.annotations = alert.annotations
    entry.held_by = None
    record(entry, lease, tick)


def _resolved_from_log(
    entries: dict[str, LogEntry], views: list[AlertView], tick: Round, acked: Mapping[str, Acknowledgement]
) -> list[AlertView]:
    """A trunk-level alert that stopped firing exists only in the log: as last sent, now
    resolved, with its acknowledgement until that ends."""
    current = {view.alert.fingerprint for view in views}
    return [
        _resolved(entry, tick, acked.get(fingerprint))
        for fingerprint, entry in entries.items()
        if fingerprint not in current and entry.last_status == alerts.FIRING and entry.job is None
    ]


def _resolved(entry: LogEntry, tick: Round, ack: Acknowledgement | None) -> AlertView:
    alert = Alert(
        dict(entry.labels or {}),
        dict(entry.annotations or {}),
        starts_at=entry.starts_at or tick.now,
        ends_at=tick.now,
        jobs=_logged_jobs(entry),
    )
    view = AlertView(alert, tick.log)
    if ack is not None:
        view.acknowledge(ack)
    return view


def _logged_jobs(entry: LogEntry) -> dict[str, FailingJob]:
    """The jobs of the last message, each with its streak and culprit. An entry written
    before the log kept them holds their names alone: its resolution lists no jobs."""
    if not isinstance(entry.jobs, dict):
        return {}
    return {str(job): FailingJob.from_data(data) for job, data in entry.jobs.items()}


def channels_for(settings: Settings, deployment: Deployment) -> list[Channel]:
    """The stack's SNS topic, then each configured receiver."""
    from trunkwatch.app.receivers import receiver_channels

    return receiver_channels(receivers_for(settings, deployment))


def receivers_for(settings: Settings, deployment: Deployment) -> list[ReceiverConfig]:
    """The stack's SNS topic (as its `topic` entry configures it, if there is one; left out
    when turned off), then each other configured receiver."""
    entry = next(
        (r for r in deployment.receivers if isinstance(r, TopicReceiver)), TopicReceiver(type=STACK_TOPIC)
    )
    others = [r for r in deployment.receivers if not isinstance(r, TopicReceiver)]
    topic = [entry.at(settings.topic_arn, settings.endpoint_url)] if entry.takes_alerts() else []
    return [*topic, *others]
