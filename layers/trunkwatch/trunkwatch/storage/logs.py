"""Notification logs: per receiver and alert fingerprint, what was last sent."""

from __future__ import annotations

from datetime import datetime, timedelta

from trunkwatch.domain.alerts import FIRING
from trunkwatch.storage import keys
from trunkwatch.storage.items import NotificationLog


def of_receiver(trunk_id: str, receiver: str) -> dict[str, NotificationLog]:
    """The receiver's log entries of the trunk, by fingerprint."""
    query = NotificationLog.query(
        keys.logs(trunk_id), NotificationLog.sk.startswith(keys.log_prefix(receiver))
    )
    return {entry.fingerprint: entry for entry in query}


def new(trunk_id: str, receiver: str, fingerprint: str, alertname: str, job: str | None) -> NotificationLog:
    return NotificationLog(
        keys.logs(trunk_id),
        keys.log(receiver, fingerprint),
        receiver=receiver,
        fingerprint=fingerprint,
        alertname=alertname,
        job=job,
    )


def save(entry: NotificationLog, now: datetime, retention: timedelta) -> None:
    """Write the entry; one last sent firing never expires (its resolution is still due),
    any other expires `retention` after this write."""
    entry.expires_at = None if entry.last_status == FIRING else now + retention
    entry.save()
