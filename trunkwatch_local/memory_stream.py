"""The in-memory store with a stream: `--store memory` runs the pipeline on it instead of
moto's table.

Deployed, the table's stream drives the pipeline (a cell written starts the evaluator, a tick
settled the notifier). Here the cells and ticks stores record each change of one of their
items as a DynamoDB stream record, its images made by the PynamoDB item classes the DynamoDB
store writes (every attribute spelled as in the table), and the stream answers the DynamoDB
Streams calls `StreamPump` makes: the same pump delivers them to the same handlers. Other
items are recorded nowhere: no stream mapping selects them.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from trunkwatch.domain.cells import CellWrite
from trunkwatch.domain.clock import Clock
from trunkwatch.domain.ticks import TICK_TTL, Group
from trunkwatch.storage import keys
from trunkwatch.storage.cells import cell_item
from trunkwatch.storage.items import CellItem, TickItem
from trunkwatch.storage.memory import MemoryCells, MemoryTicks, MemoryTrunks, memory_storage
from trunkwatch.storage.port import Storage

SHARD = "shardId-00000000000000000000-memory"
PAGE = 1000  # records per GetRecords, as DynamoDB Streams' limit
Image = dict[str, Any]  # an item in DynamoDB JSON


@dataclass
class MemoryStream:
    """A table's stream of NEW_AND_OLD_IMAGES records, one shard, oldest first, read through
    the DynamoDB Streams calls; a shard iterator is the sequence number to read from."""

    arn: str
    clock: Clock
    records: list[dict[str, Any]] = field(default_factory=list)
    first_sequence: int = 1  # the sequence number of records[0]
    next_sequence: int = 1  # the sequence number of the next record
    images: dict[tuple[str, str], Image] = field(default_factory=dict)  # each item's last

    def change(self, item: Any) -> None:
        """`item` (a PynamoDB item) was written."""
        key = {"pk": {"S": item.pk}, "sk": {"S": item.sk}}
        new, old = {**item.serialize(), **key}, self.images.get((item.pk, item.sk))
        if old == new:
            return  # DynamoDB Streams records no write that changes nothing
        self.images[item.pk, item.sk] = new
        sequence, self.next_sequence = self.next_sequence, self.next_sequence + 1
        if not self.records:
            self.first_sequence = sequence
        self.records.append(
            {
                "eventID": f"{sequence:x}",
                "eventName": "INSERT" if old is None else "MODIFY",
                "eventSource": "aws:dynamodb",
                "awsRegion": "us-east-1",
                "dynamodb": {
                    "ApproximateCreationDateTime": self.clock.now(),
                    "Keys": key,
                    "NewImage": new,
                    **({"OldImage": old} if old is not None else {}),
                    "SequenceNumber": str(sequence),
                    "SizeBytes": 0,
                    "StreamViewType": "NEW_AND_OLD_IMAGES",
                },
            }
        )

    def release(self, _arn: str, through_sequence: int) -> None:
        """Every mapping has read through `through_sequence`: those records go."""
        drop = max(0, min(len(self.records), through_sequence + 1 - self.first_sequence))
        del self.records[:drop]
        self.first_sequence = self.next_sequence if not self.records else self.first_sequence + drop

    def describe_stream(self, StreamArn: str) -> dict[str, Any]:
        return {"StreamDescription": {"StreamArn": StreamArn, "Shards": [{"ShardId": SHARD}]}}

    def get_shard_iterator(
        self, StreamArn: str, ShardId: str, ShardIteratorType: str, SequenceNumber: str | None = None
    ) -> dict[str, Any]:
        positions = {
            "TRIM_HORIZON": self.first_sequence if self.records else self.next_sequence,
            "LATEST": self.next_sequence,
            "AFTER_SEQUENCE_NUMBER": int(SequenceNumber or 0) + 1,
            "AT_SEQUENCE_NUMBER": int(SequenceNumber or 0),
        }
        if ShardIteratorType not in positions:
            raise ValueError(f"unknown shard iterator type {ShardIteratorType}")
        return {"ShardIterator": str(positions[ShardIteratorType])}

    def get_records(self, ShardIterator: str) -> dict[str, Any]:
        position = max(int(ShardIterator), self.first_sequence if self.records else 0)
        start = position - self.first_sequence
        page = self.records[start : start + PAGE] if self.records and start >= 0 else []
        after = int(page[-1]["dynamodb"]["SequenceNumber"]) + 1 if page else position
        return {"Records": copy.deepcopy(page), "NextShardIterator": str(after)}


class StreamedCells(MemoryCells):
    """Cells in memory; each cell item written is a stream record."""

    def __init__(self, stream: MemoryStream) -> None:
        super().__init__()
        self.stream = stream

    def save_all(self, trunk_id: str, writes: Iterable[CellWrite], retention: timedelta) -> None:
        written = list(writes)
        super().save_all(trunk_id, written, retention)
        for write in written:
            self.stream.change(cell_item(CellItem, trunk_id, write, retention))


class StreamedTicks(MemoryTicks):
    """Ticks in memory; each change of a tick item is a stream record of its image."""

    def __init__(self, trunks: MemoryTrunks, stream: MemoryStream) -> None:
        super().__init__(trunks)
        self.stream = stream

    def _changed(self, trunk_id: str, poll: str) -> None:
        tick = self._ticks.get((trunk_id, poll))
        if tick is None:
            return
        self.stream.change(
            TickItem(
                keys.ticks(trunk_id),
                poll,
                trunk=trunk_id,
                poll=poll,
                expected=tick.expected,
                evaluated=tick.evaluated,
                settled=True if tick.settled else None,
                at=tick.at,
                expires_at=(tick.closes_at or tick.at) + TICK_TTL,
                closes_at=tick.closes_at,
                opened_by=tick.opened_by,
            )
        )

    def open_poll(self, trunk_id: str, poll: str, expected: int, now: datetime) -> None:
        super().open_poll(trunk_id, poll, expected, now)
        self._changed(trunk_id, poll)

    def count(self, trunk_id: str, poll: str, sequences: Sequence[str], now: datetime) -> bool:
        due = super().count(trunk_id, poll, sequences, now)
        self._changed(trunk_id, poll)
        return due

    def force_settle(self, trunk_id: str, poll: str, opened_at: datetime) -> bool:
        settled = super().force_settle(trunk_id, poll, opened_at)
        self._changed(trunk_id, poll)
        return settled

    def settle(self, trunk_id: str, poll: str, now: datetime) -> bool:
        settled = super().settle(trunk_id, poll, now)
        self._changed(trunk_id, poll)
        return settled

    def join_group(self, trunk_id: str, cells: int, now: datetime) -> Group:
        group = super().join_group(trunk_id, cells, now)
        self._changed(trunk_id, group.id)
        return group

    def settle_sweep(self, trunk_id: str, sweep: str, now: datetime) -> None:
        super().settle_sweep(trunk_id, sweep, now)
        self._changed(trunk_id, sweep)


def streamed_storage(stream: MemoryStream) -> Storage:
    """An empty in-memory storage whose cells and ticks record their changes on `stream`."""
    plain = memory_storage()
    trunks = plain.trunks
    assert isinstance(trunks, MemoryTrunks)
    return dataclasses.replace(plain, cells=StreamedCells(stream), ticks=StreamedTicks(trunks, stream))
