"""Notification logs: per receiver and alert fingerprint, what was last sent."""

from __future__ import annotations

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


def save(entry: NotificationLog) -> None:
    entry.save()
