"""The daily digest (design.md §4.4): at each sweep's settled tick, each receiver that carries
it (the stack's SNS topic always, a receiver with `digest: true`) is sent every day's digest
of the trunk its notification log says is due, exactly once.

The stages are an alert's (budget, claim the log entry at its transition number, deliver,
then advance it under the claim), on an entry of the receiver's own in the trunk's log
partition, which holds the start of the last day
sent (`starts_at`); so a digest whose notifier died, or whose receiver failed, goes at the
next sweep, and a retried batch or two concurrent sweeps cannot send it twice. A receiver met
for the first time is anchored there (nothing sent): its first digest is the next due day's,
not that of a day before it carried them. The entry is never `firing`: no resolution is due.

Read, decide, write: the log entries, then (only when a day is due) the trunk's breakages
fixed before a page, its job episodes and firing alerts; `domain/digest.py` decides what a
day's digest says.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date, timedelta

from trunkwatch.app.health import fixed_job, job_episode
from trunkwatch.app.notify import (
    DeliveryInProgress,
    Round,
    Tick,
    TickResult,
    budget_left,
    deliver_once,
    delivery_deadline,
    record,
)
from trunkwatch.channels.base import ChannelError, DigestChannel, DigestNotification
from trunkwatch.domain.alerts import fingerprint
from trunkwatch.domain.config import ReceiverConfig, TrunkConfig
from trunkwatch.domain.digest import KIND, Digest, FixedJob, daily_digest, day_start, due_days, latest_due
from trunkwatch.domain.episodes import EPISODE_RETENTION
from trunkwatch.domain.history import JobEpisode
from trunkwatch.domain.notification_log import Lease, LogEntry, Rejection
from trunkwatch.domain.rule import trunk_alertname

DIGEST_NAME = "DailyDigest"  # its log entries' and rejections' `alertname`: no alert's
SENT = "digest"  # its log entries' `last_status`


def digest_fingerprint(trunk: TrunkConfig) -> str:
    """The trunk's digest's id in the logs (no alert has its labels)."""
    return fingerprint({"kind": KIND, "repo": trunk.repo, "branch": trunk.branch})


def digest_channels(receivers: Sequence[ReceiverConfig]) -> list[DigestChannel]:
    """The channels of the receivers that carry the digest, named as for alerts."""
    from trunkwatch.app.receivers import receiver_channels

    return [
        channel
        for receiver, channel in zip(receivers, receiver_channels(receivers), strict=True)
        if receiver.takes_digest() and isinstance(channel, DigestChannel)
    ]


def send_digests(tick: Tick, channels: Sequence[DigestChannel]) -> TickResult:
    """Send each channel the trunk's digests due at the tick, oldest first; a failing
    receiver, or a spent budget, leaves the channel's rest for the next sweep."""
    trunk, storage = tick.trunk, tick.storage
    result = TickResult(trunk.trunk_id)
    mark = digest_fingerprint(trunk)
    due: list[tuple[DigestChannel, LogEntry, list[date]]] = []
    for channel in channels:
        entry = storage.logs.entry(trunk.trunk_id, channel.name, mark)
        if entry is None or entry.starts_at is None:
            _anchor(tick, channel.name, mark)
            continue
        days = due_days(entry.starts_at.date(), tick.now, tick.rule.digest_hour)
        if days:
            due.append((channel, entry, days))
    if not due:
        return result
    digests = _Digests(tick)
    beat = tick.round()
    for channel, entry, days in due:
        for day in days:
            if not budget_left(channel.name, beat):
                result.deferred += 1
                break
            notification = DigestNotification(
                digests.of(day), channel.name, tick.links.api_url, delivery_deadline(beat)
            )
            send = functools.partial(channel.send_digest, notification)
            try:
                lease, refused = deliver_once(entry, DIGEST_NAME, send, beat)
                _log(entry, day, beat, refused, lease)
            except DeliveryInProgress:
                result.deferred += 1
                break
            except ChannelError:
                result.failed += 1
                break
            if refused is not None:
                result.rejected += 1
            else:
                result.sent.append(
                    {"receiver": channel.name, "status": SENT, "alertname": DIGEST_NAME, "reason": str(day)}
                )
    return result


def _anchor(tick: Tick, receiver: str, mark: str) -> None:
    """A receiver's first digest is the first day due after this one."""
    anchored = LogEntry(
        receiver, mark, DIGEST_NAME, starts_at=day_start(latest_due(tick.now, tick.rule.digest_hour))
    )
    tick.storage.logs.save(tick.trunk.trunk_id, anchored, tick.now, tick.rule.retention)


def _log(entry: LogEntry, day: date, beat: Round, refused: str | None, lease: Lease) -> None:
    """The day's digest is done with: sent, or refused for good (kept as a rejection, written
    first, as an alert's); the entry advances under the delivery's lease."""
    if refused is not None:
        rejection = Rejection(
            entry.receiver, entry.fingerprint, DIGEST_NAME, None, SENT, day.isoformat(), beat.now, refused
        )
        beat.storage.logs.save_rejection(beat.log, rejection, beat.retention)
    entry.seq = int(entry.seq) + 1
    entry.last_status = SENT
    entry.last_sent_at = beat.now
    entry.starts_at = day_start(day)
    record(entry, lease, beat)


@dataclass
class _Digests:
    """The digests of one tick, each day's made once, from one read of the trunk."""

    tick: Tick
    _fixed: list[FixedJob] | None = None
    _episodes: list[JobEpisode] | None = None
    _made: dict[date, Digest] = field(default_factory=dict)

    def of(self, day: date) -> Digest:
        if day not in self._made:
            tick = self.tick
            trunk, rule = tick.trunk, tick.rule
            if self._fixed is None or self._episodes is None:
                self._fixed, self._episodes = self._read()
            self._made[day] = daily_digest(
                trunk.repo,
                trunk.branch,
                day,
                self._fixed,
                self._episodes,
                lambda failing: trunk_alertname(failing, rule),
                tick.now,
            )
        return self._made[day]

    def _read(self) -> tuple[list[FixedJob], list[JobEpisode]]:
        """The trunk's breakages fixed before a page, and its job episodes (every one kept,
        for the culprits that paged), each with its latest verdict."""
        tick = self.tick
        trunk_id, rule, alerts = tick.trunk.trunk_id, tick.rule, tick.storage.alerts
        fixed = [fixed_job(record) for record in alerts.fixed(trunk_id) if rule.in_scope(record.job)]
        live = {(a.job, a.starts_at): a.culprit_verdict for a in alerts.of_trunk(trunk_id, firing_only=True)}
        episodes = [
            job_episode(e, live.get((e.job, e.starts_at)))
            for e in alerts.episodes(trunk_id, tick.now - EPISODE_RETENTION - timedelta(days=1))
            if rule.in_scope(e.job)
        ]
        return fixed, episodes
