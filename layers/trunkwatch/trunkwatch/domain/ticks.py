"""Tick barriers: a poll's, a webhook group's and a sweep's (storage/ticks.py keeps them)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

# How long a tick is kept, and a webhook group's bucket (storage/ticks.py: the protocol).
TICK_TTL = timedelta(days=2)
GROUP_WINDOW = timedelta(milliseconds=500)

# A sweep's tick id starts with this (storage keeps it as the tick's `poll`): the notifier
# sends the heartbeat on sweeps' ticks, which come every schedule period.
SWEEP_TICK_PREFIX = "sweep-"


def is_sweep_tick(tick_id: str) -> bool:
    return tick_id.startswith(SWEEP_TICK_PREFIX)


@dataclass(frozen=True)
class Group:
    """A webhook group tick: the deliveries of one GROUP_WINDOW bucket settle together."""

    id: str
    closes_at: datetime
    opened: bool  # this delivery opened it: it waits for `closes_at`, then settles it


def group_bucket(at: datetime) -> tuple[str, datetime]:
    """The bucket (end - GROUP_WINDOW, end] holding `at`: its id and its end. A delivery at a
    bucket's end closes it at once (the evaluator settles it at its last cell)."""
    step = GROUP_WINDOW.total_seconds()
    end = datetime.fromtimestamp(-(-at.timestamp() // step) * step, UTC)
    return f"hook-{end.strftime('%Y%m%dT%H%M%S')}.{end.microsecond // 1000:03d}", end
