"""Notification logs in DynamoDB: per receiver and alert fingerprint, what was last sent and
the lease of a delivery under way (conditional writes of the entry's own item); beside them,
the messages receivers refused for good; and, in a partition of their own, the alerts'
acknowledgements."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta

from pynamodb.exceptions import DoesNotExist, PutError, UpdateError

from trunkwatch.domain.acks import Acknowledgement
from trunkwatch.domain.alerts import FIRING
from trunkwatch.domain.notification_log import Lease, LogEntry, Rejection
from trunkwatch.storage import keys
from trunkwatch.storage.items import AckItem, NotificationLog, RejectionItem
from trunkwatch.storage.table import BoundModels


def _entry(item: NotificationLog) -> LogEntry:
    return LogEntry(
        receiver=str(item.receiver),
        fingerprint=str(item.fingerprint),
        alertname=str(item.alertname),
        job=item.job,
        seq=int(item.seq),
        last_status=item.last_status,
        last_sent_at=item.last_sent_at,
        starts_at=item.starts_at,
        jobs=item.jobs,
        held_by=[str(hold) for hold in item.held_by] if item.held_by is not None else None,
        labels=dict(item.labels) if item.labels is not None else None,
        annotations=dict(item.annotations) if item.annotations is not None else None,
        acknowledged=item.acknowledged,
        lease=Lease(str(item.claim_id), item.claimed_until)
        if item.claim_id is not None and item.claimed_until is not None
        else None,
    )


def _rejection(item: RejectionItem) -> Rejection:
    return Rejection(
        receiver=str(item.receiver),
        fingerprint=str(item.fingerprint),
        alertname=str(item.alertname),
        job=item.job,
        status=str(item.status),
        reason=str(item.reason),
        at=item.at,
        answer=str(item.answer),
    )


def _ack(item: AckItem) -> Acknowledgement:
    return Acknowledgement(
        fingerprint=str(item.fingerprint),
        alertname=str(item.alertname),
        job=item.job,
        at=item.at,
        by=str(item.by),
        comment=str(item.comment or ""),
        via=str(item.via),
        ended_at=item.ended_at,
    )


def _lost_race(err: PutError | UpdateError) -> bool:
    return err.cause_response_code == "ConditionalCheckFailedException"


class DynamoLogs:
    def __init__(self, table: BoundModels) -> None:
        self.logs = table.model(NotificationLog)
        self.rejections = table.model(RejectionItem)
        self.ack_items = table.model(AckItem)

    def of_receiver(self, trunk_id: str, receiver: str) -> dict[str, LogEntry]:
        """The receiver's log entries of the trunk, by fingerprint."""
        query = self.logs.query(keys.logs(trunk_id), NotificationLog.sk.startswith(keys.log_prefix(receiver)))
        return {str(item.fingerprint): _entry(item) for item in query}

    def entry(self, trunk_id: str, receiver: str, fingerprint: str) -> LogEntry | None:
        """One entry (the daily digest's: one GetItem, not the receiver's whole log)."""
        try:
            return _entry(self.logs.get(keys.logs(trunk_id), keys.log(receiver, fingerprint)))
        except DoesNotExist:
            return None

    def save(self, trunk_id: str, entry: LogEntry, now: datetime, retention: timedelta) -> None:
        """Write the entry; one last sent firing never expires (its resolution is still due),
        any other expires `retention` after this write."""
        self._item(trunk_id, entry, now, retention).save()

    def claim(
        self, trunk_id: str, entry: LogEntry, lease: Lease, now: datetime, retention: timedelta
    ) -> bool:
        """Lease the entry if it is still at the seq read and no live lease holds it."""
        log = NotificationLog
        at_seq = log.seq == entry.seq
        if entry.seq == 0:
            at_seq = log.sk.does_not_exist() | at_seq
        unleased = log.claimed_until.does_not_exist() | (log.claimed_until <= now)
        identity = [log.receiver.set(entry.receiver), log.fingerprint.set(entry.fingerprint)]
        identity += [log.alertname.set(entry.alertname), log.seq.set(entry.seq)]
        if entry.job is not None:
            identity.append(log.job.set(entry.job))
        if entry.last_status != FIRING:  # as `save` would: only a firing one never expires
            identity.append(log.expires_at.set(now + retention))
        lease_it = [log.claim_id.set(lease.claim_id), log.claimed_until.set(lease.until)]
        try:
            self.logs.upsert(
                keys.logs(trunk_id),
                keys.log(entry.receiver, entry.fingerprint),
                actions=[*identity, *lease_it],
                condition=at_seq & unleased,
            )
        except UpdateError as err:
            if _lost_race(err):
                return False
            raise
        return True

    def advance(
        self, trunk_id: str, entry: LogEntry, lease: Lease, now: datetime, retention: timedelta
    ) -> bool:
        """Write the entry, its lease cleared, while `lease` holds it."""
        item = self._item(trunk_id, replace(entry, lease=None), now, retention)
        try:
            item.save(condition=NotificationLog.claim_id == lease.claim_id)
        except PutError as err:
            if _lost_race(err):
                return False
            raise
        return True

    def release(self, trunk_id: str, entry: LogEntry, lease: Lease) -> None:
        """Clear the lease while it is `lease`; one taken over since stays."""
        try:
            self.logs(keys.logs(trunk_id), keys.log(entry.receiver, entry.fingerprint)).update(
                actions=[NotificationLog.claim_id.remove(), NotificationLog.claimed_until.remove()],
                condition=NotificationLog.claim_id == lease.claim_id,
            )
        except UpdateError as err:
            if not _lost_race(err):
                raise

    def _item(self, trunk_id: str, entry: LogEntry, now: datetime, retention: timedelta) -> NotificationLog:
        lease = entry.lease
        return self.logs(
            keys.logs(trunk_id),
            keys.log(entry.receiver, entry.fingerprint),
            receiver=entry.receiver,
            fingerprint=entry.fingerprint,
            alertname=entry.alertname,
            job=entry.job,
            seq=entry.seq,
            last_status=entry.last_status,
            last_sent_at=entry.last_sent_at,
            starts_at=entry.starts_at,
            jobs=entry.jobs,
            held_by=entry.held_by,
            labels=entry.labels,
            annotations=entry.annotations,
            acknowledged=entry.acknowledged,
            claim_id=lease.claim_id if lease is not None else None,
            claimed_until=lease.until if lease is not None else None,
            expires_at=None if entry.last_status == FIRING else now + retention,
        )

    def rejected(self, trunk_id: str) -> list[Rejection]:
        """The trunk's rejections, by receiver and fingerprint (one Query of their prefix)."""
        query = self.rejections.query(keys.logs(trunk_id), RejectionItem.sk.startswith(keys.REJECTIONS))
        return [_rejection(item) for item in query]

    def save_rejection(self, trunk_id: str, rejection: Rejection, retention: timedelta) -> None:
        """Keep the rejection (replacing the receiver's last one for the alert) until
        `retention` after it."""
        self.rejections(
            keys.logs(trunk_id),
            keys.rejection(rejection.receiver, rejection.fingerprint),
            receiver=rejection.receiver,
            fingerprint=rejection.fingerprint,
            alertname=rejection.alertname,
            job=rejection.job,
            status=rejection.status,
            reason=rejection.reason,
            at=rejection.at,
            answer=rejection.answer,
            expires_at=rejection.at + retention,
        ).save()

    def acks(self, trunk_id: str) -> list[Acknowledgement]:
        """The trunk's acknowledgements, live and ended (one Query of their partition)."""
        return [_ack(item) for item in self.ack_items.query(keys.acks(trunk_id))]

    def add_ack(self, trunk_id: str, ack: Acknowledgement) -> bool:
        """Store `ack` unless the alert has a live one (False: the first stands)."""
        item = self.ack_items(
            keys.acks(trunk_id),
            ack.fingerprint,
            fingerprint=ack.fingerprint,
            alertname=ack.alertname,
            job=ack.job,
            at=ack.at,
            by=ack.by,
            comment=ack.comment,
            via=ack.via,
        )
        try:
            item.save(condition=AckItem.sk.does_not_exist() | AckItem.ended_at.exists())
        except PutError as err:
            if _lost_race(err):
                return False
            raise
        return True

    def end_ack(self, trunk_id: str, ack: Acknowledgement, ended_at: datetime, retention: timedelta) -> None:
        """End the live acknowledgement read as `ack`; one replaced or ended since stays."""
        try:
            self.ack_items(keys.acks(trunk_id), ack.fingerprint).update(
                actions=[AckItem.ended_at.set(ended_at), AckItem.expires_at.set(ended_at + retention)],
                condition=(AckItem.at == ack.at) & AckItem.ended_at.does_not_exist(),
            )
        except UpdateError as err:
            if not _lost_race(err):
                raise
