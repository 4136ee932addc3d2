"""Tick barriers: a poll's tick settles once every cell it wrote has been evaluated (and the
trunk's firing jobs re-judged at the poll's time); the settled tick (stream, kind=tick) is
what the notifier runs on.

Webhook deliveries share a group tick per trunk and time bucket (`GROUP_WINDOW`): each
delivery that writes cells that may change a verdict adds them to the bucket's `expected`
while the bucket is open (`closes_at` not past, not settled), and the tick settles only once
every expected cell is evaluated and the bucket has closed. A tick that never settles (its
cells' records dead-lettered, or its poll died before writing them all) is settled by the
sweep (`force_settle`, design.md §3.4). Joining and settling are each one conditional update,
so a delivery either joins before the tick can settle or finds it settled and joins the next
bucket's group: deliveries of the same instant settle together, like one poll's cells. Whoever
comes last settles: the evaluator counting the last cell after the bucket closed, or the
delivery that opened the group, which waits for `closes_at` and settles it if its cells were
already evaluated."""

from __future__ import annotations

import contextlib
import hashlib
import uuid
from collections.abc import Sequence
from datetime import datetime, timedelta

from pynamodb.exceptions import UpdateError

from trunkwatch.domain.ticks import TICK_TTL, Group, group_bucket
from trunkwatch.storage import keys, trunks
from trunkwatch.storage.items import BaseItem, TickCount, TickItem, TrunkStateItem
from trunkwatch.storage.table import BoundModels


class DynamoTicks:
    def __init__(self, table: BoundModels) -> None:
        self.ticks = table.model(TickItem)
        self.counts = table.model(TickCount)
        self.items = table.any
        self.states = table.model(TrunkStateItem)

    def open_poll(self, trunk_id: str, poll: str, expected: int, now: datetime) -> None:
        """Before a poll's cells are written: its tick, and the trunk's open poll (the barrier
        a sweep waits on)."""
        self.ticks(
            keys.ticks(trunk_id),
            poll,
            trunk=trunk_id,
            poll=poll,
            expected=expected,
            at=now,
            expires_at=now + TICK_TTL,
        ).save()
        trunks.open_poll(self.states, trunk_id, poll, now)

    def count(self, trunk_id: str, poll: str, sequences: Sequence[str], now: datetime) -> bool:
        """Add one evaluator batch's stream records (their sequence numbers) to the poll's
        tick. The tick's count is the union of every batch's records, so a retried batch, or
        the halves of a bisected one, count no record twice. True when every cell of the tick
        has now been counted, the tick is not settled and (for a group) its bucket has closed:
        the caller finishes the poll's work, then `settle`s it. A retry of a batch whose
        invocation died before settling gets True again, so no tick is left open by a crash."""
        digest = hashlib.sha256("\n".join(sorted(sequences)).encode()).hexdigest()[:16]
        self.counts(
            keys.ticks(trunk_id), f"{poll}#{digest}", sequences=set(sequences), expires_at=now + TICK_TTL
        ).save()
        tick, counted = None, set[str]()
        # The tick (sk `poll`) and its counts (sk `poll#...`) in one strongly consistent Query:
        # of two batches counting at once, the later one sees both.
        for item in self.items.query(
            keys.ticks(trunk_id), BaseItem.sk.between(poll, f"{poll}#\uffff"), consistent_read=True
        ):
            if isinstance(item, TickItem) and item.sk == poll:
                tick = item
            elif isinstance(item, TickCount):
                counted |= item.sequences
        if tick is None or tick.settled:
            return False  # settled before, or the tick expired: nothing more to do
        if len(counted) > int(tick.evaluated or 0):
            with contextlib.suppress(UpdateError):  # a concurrent count stored a larger union
                tick.update(
                    actions=[TickItem.evaluated.set(len(counted))],
                    condition=TickItem.evaluated.does_not_exist() | (TickItem.evaluated < len(counted)),
                )
        return len(counted) >= int(tick.expected) and (tick.closes_at is None or tick.closes_at <= now)

    def settle(self, trunk_id: str, poll: str, now: datetime) -> bool:
        """Mark a fully counted tick settled (its stream record runs the notifier) and close
        the trunk's open poll, if every expected cell is evaluated and (for a group) its bucket
        has closed, in one conditional update: a delivery joining at the same moment either
        counts before this (and the tick waits for its cell) or finds the tick settled. False
        if it cannot settle yet or a concurrent evaluation settled it first."""
        tick = self.ticks(keys.ticks(trunk_id), poll)
        try:
            tick.update(
                actions=[TickItem.settled.set(True)],
                condition=TickItem.settled.does_not_exist()
                & (TickItem.evaluated >= TickItem.expected)
                & (TickItem.closes_at.does_not_exist() | (TickItem.closes_at <= now)),
            )
        except UpdateError:
            return False  # settled already, cells still to evaluate, or the bucket still open
        trunks.close_poll(self.states, trunk_id, poll, tick.at)
        return True

    def force_settle(self, trunk_id: str, poll: str, opened_at: datetime) -> bool:
        """Settle a tick whatever its count (the sweep's last resort for a tick whose cells'
        records were dead-lettered or never written) and close it on the trunk. False if it
        had settled meanwhile, or expired (then it is only closed)."""
        settled = True
        try:
            self.ticks(keys.ticks(trunk_id), poll).update(
                actions=[TickItem.settled.set(True)],
                condition=TickItem.poll.exists() & TickItem.settled.does_not_exist(),
            )
        except UpdateError:
            settled = False
        trunks.close_poll(self.states, trunk_id, poll, opened_at)
        return settled

    def join_group(self, trunk_id: str, cells: int, now: datetime) -> Group:
        """Add `cells` to the webhook group of `now`'s bucket, opening it if new. A bucket that
        settled already (a late delivery) sends its cells to the next bucket's group."""
        at, token = now, uuid.uuid4().hex
        while True:
            group, closes_at = group_bucket(at)
            tick = self.ticks(keys.ticks(trunk_id), group)
            try:
                tick.update(
                    actions=[
                        TickItem.expected.add(cells),
                        TickItem.evaluated.set(TickItem.evaluated | 0),
                        TickItem.trunk.set(trunk_id),
                        TickItem.poll.set(group),
                        TickItem.at.set(TickItem.at | now),
                        TickItem.opened_by.set(TickItem.opened_by | token),
                        TickItem.closes_at.set(closes_at),
                        TickItem.expires_at.set(closes_at + TICK_TTL),
                        self.ticks.kind.set(self.ticks),
                    ],
                    condition=TickItem.settled.does_not_exist()
                    & (TickItem.closes_at.does_not_exist() | (TickItem.closes_at >= now)),
                )
            except UpdateError:
                at = closes_at + timedelta(microseconds=1)  # settled, or closed by the clock: the next bucket
                continue
            opened = tick.opened_by == token
            if opened:
                trunks.open_poll(self.states, trunk_id, group, now, delivered=True)
            return Group(group, closes_at, opened)

    def settle_sweep(self, trunk_id: str, sweep: str, now: datetime) -> None:
        """A scheduled sweep's tick: settled at once, so the notifier runs for the trunk."""
        self.ticks(
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
