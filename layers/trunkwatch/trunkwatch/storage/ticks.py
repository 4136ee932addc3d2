"""Tick barriers: a poll's tick settles once every cell it wrote has been evaluated (and the
trunk's firing jobs re-judged at the poll's time); the settled tick (stream, kind=tick) is
what the notifier runs on."""

from __future__ import annotations

from datetime import datetime, timedelta

from pynamodb.exceptions import UpdateError

from trunkwatch.storage import keys, trunks
from trunkwatch.storage.items import TickItem

TICK_TTL = timedelta(days=2)


def open_poll(trunk_id: str, poll: str, expected: int, now: datetime) -> None:
    """Before a poll's cells are written: its tick, and the trunk's open poll (the barrier
    a sweep waits on)."""
    TickItem(
        keys.ticks(trunk_id),
        poll,
        trunk=trunk_id,
        poll=poll,
        expected=expected,
        at=now,
        expires_at=now + TICK_TTL,
    ).save()
    trunks.open_poll(trunk_id, poll, now)


def count(trunk_id: str, poll: str, batch_key: str, evaluated: int) -> bool:
    """Add one stream batch's records to the poll's tick, once per batch (a redelivered batch
    has the same key). True when every cell of the poll has now been counted and the tick is
    not settled yet: the caller finishes the poll's work, then `settle`s it."""
    tick = TickItem(keys.ticks(trunk_id), poll)
    try:
        tick.update(
            actions=[TickItem.evaluated.add(evaluated), TickItem.batches.add({batch_key})],
            condition=TickItem.poll.exists() & ~TickItem.batches.contains(batch_key),
        )
    except UpdateError:
        return False  # counted before, or the tick expired: nothing more to do
    return not tick.settled and int(tick.evaluated or 0) >= int(tick.expected)


def settle(trunk_id: str, poll: str) -> bool:
    """Mark a fully counted poll's tick settled (its stream record runs the notifier) and
    close the trunk's open poll. False if a concurrent evaluation settled it first."""
    try:
        TickItem(keys.ticks(trunk_id), poll).update(
            actions=[TickItem.settled.set(True)], condition=TickItem.settled.does_not_exist()
        )
    except UpdateError:
        return False
    trunks.close_poll(trunk_id, poll)
    return True


def settle_sweep(trunk_id: str, sweep: str, now: datetime) -> None:
    """A scheduled sweep's tick: settled at once, so the notifier runs for the trunk."""
    TickItem(
        keys.ticks(trunk_id),
        sweep,
        trunk=trunk_id,
        poll=sweep,
        expected=0,
        evaluated=0,
        settled=True,
        at=now,
        expires_at=now + TICK_TTL,
    ).save()
