"""A trunk's state: the counters its evaluator, notifier and ingest share."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

# A delivery that opens no group records its time (WebhooksDown's `last_delivery_at`) only
# this often: a steady stream of passes writes the trunk's state once per period, not once
# per delivery.
LAST_DELIVERY_PRECISION = timedelta(minutes=5)


@dataclass
class TrunkState:
    """Per-trunk counters the evaluator and notifier share (an empty one before the first poll)."""

    # Jobs with a firing TrunkJobFailing: K of design.md §3.3.
    failing: set[str] = field(default_factory=set)
    # Jobs whose newest failures (two or more commits, one breakage) have not paged: a pass
    # on one is judged, to find the breakage it fixed (design.md §3.7).
    unpaged: set[str] = field(default_factory=set)
    # Seqs of the newest commits that ran any job (for staleness), newest first.
    recent_seqs: list[int] = field(default_factory=list)
    # Polls (and webhook groups) whose ticks have not settled yet, with when each opened: a
    # sweep waits for a young one (tick barrier) and settles one left open too long.
    unsettled: dict[str, datetime] = field(default_factory=dict)
    # The source's health (SourceDown): the last good poll, and since when polls fail.
    last_poll_ok_at: datetime | None = None
    polls_failing_since: datetime | None = None
    poll_error_cause: str | None = None
    poll_error: str | None = None
    # When a webhook-fed trunk was last polled (it is polled only every `poll_every`).
    last_polled_at: datetime | None = None
    # The last second a delivery wrote cells, and since when the poll finds results without
    # deliveries (WebhooksDown).
    last_delivery_at: datetime | None = None
    deliveries_missing_since: datetime | None = None
