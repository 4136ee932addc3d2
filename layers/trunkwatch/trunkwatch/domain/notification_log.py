"""The notification log (design.md §4): what was sent for an alert to a receiver, the
delivery that holds it, and what a receiver refused."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any


@dataclass(frozen=True)
class Lease:
    """A delivery's claim on a log entry: one invocation's, by its id, until `until` (the
    delivery's time budget after the claim). One that has passed may be taken over."""

    claim_id: str
    until: datetime

    def live(self, now: datetime) -> bool:
        return now < self.until


@dataclass
class LogEntry:
    """What was last sent for one alert fingerprint to one receiver (Alertmanager's
    notification log: each receiver keeps its own), and the lease of a delivery under way.
    The entry is the delivery's claim: a delivery starts by leasing it at the `seq` it read,
    and ends by advancing it under that lease (design.md §4)."""

    receiver: str
    fingerprint: str
    alertname: str
    job: str | None = None
    seq: int = 0  # transitions sent so far; a claim holds only at the seq it read
    last_status: str | None = None  # firing | resolved | None (never sent)
    last_sent_at: datetime | None = None
    starts_at: datetime | None = None
    # Trunk-level: the jobs of the last message as stored, each with its streak and culprit
    # ({job: FailingJob.as_data()}); the job names alone in entries written before.
    jobs: dict[str, Any] | list[str] | None = None
    held_by: list[str] | None = None  # silences/inhibitions holding it now
    labels: dict[str, str] | None = None  # as last sent: a trunk-level alert resolves from these
    annotations: dict[str, str] | None = None
    acknowledged: str | None = None  # the acknowledgement last told (Acknowledgement.key)
    lease: Lease | None = None  # the delivery under way, if any (live or not)


@dataclass(frozen=True)
class Rejection:
    """A message a receiver refused for good (not retried), kept in the trunk's notification
    log beside the receiver's entry for the alert: which alert (`alertname`, `job`,
    `fingerprint`), which transition (`status`, and `reason` as notification_reason), when,
    and what the receiver answered (its status and error, never a URL or a credential)."""

    receiver: str
    fingerprint: str
    alertname: str
    job: str | None
    status: str
    reason: str
    at: datetime
    answer: str
