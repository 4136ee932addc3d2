"""The local stream pump's reads: the stream is described once per drain and mappings at one
position read each record once (a fake streams client stands in for moto)."""

from __future__ import annotations

from typing import Any

from trunkwatch_local.pump import StreamPump
from trunkwatch_local.wiring import StreamSource

ARN = "arn:aws:dynamodb:us-east-1:123456789012:table/t/stream/2026-11-18T00:00:00.000"


class FakeStreams:
    """One shard; an iterator is `it:<position>`; every call is counted."""

    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []
        self.calls: dict[str, int] = {"describe_stream": 0, "get_shard_iterator": 0, "get_records": 0}

    def write(self, pk: str) -> None:
        sequence = str(100 + len(self.records))
        keys = {"pk": {"S": pk}, "sk": {"S": "X"}}
        self.records.append(
            {"eventName": "INSERT", "dynamodb": {"Keys": keys, "NewImage": keys, "SequenceNumber": sequence}}
        )

    def describe_stream(self, StreamArn: str) -> dict[str, Any]:
        self.calls["describe_stream"] += 1
        return {"StreamDescription": {"Shards": [{"ShardId": "shard-1"}]}}

    def get_shard_iterator(self, StreamArn: str, ShardId: str, ShardIteratorType: str) -> dict[str, Any]:
        self.calls["get_shard_iterator"] += 1
        return {"ShardIterator": f"it:{0 if ShardIteratorType == 'TRIM_HORIZON' else len(self.records)}"}

    def get_records(self, ShardIterator: str) -> dict[str, Any]:
        self.calls["get_records"] += 1
        start = int(ShardIterator.split(":")[1])
        page = self.records[start : start + 2]  # small pages: several reads per drain
        return {"Records": page, "NextShardIterator": f"it:{start + len(page)}"}


def source(function: str, patterns: tuple[dict[str, Any], ...] = ()) -> StreamSource:
    return StreamSource(function, patterns, 10, -1, False, False, "TRIM_HORIZON")


def test_a_drain_describes_once_and_reads_each_record_once_for_all_mappings() -> None:
    streams = FakeStreams()
    delivered: dict[str, list[str]] = {"a": [], "b": []}

    def invoke(function: str, event: dict[str, Any]) -> None:
        delivered[function] += [r["dynamodb"]["Keys"]["pk"]["S"] for r in event["Records"]]
        if function == "a" and len(streams.records) < 8:
            streams.write(f"written-by-a-{len(streams.records)}")  # a handler writing more

    only_p = ({"dynamodb": {"Keys": {"pk": {"S": [{"prefix": "P"}]}}}},)
    pump = StreamPump(streams, None, ARN, "dlq", "us-east-1", [source("a"), source("b", only_p)], invoke)
    for n in range(5):
        streams.write(f"P{n}")
    streams.calls = dict.fromkeys(streams.calls, 0)

    assert pump.drain() == 2 * len(streams.records) == 2 * 8  # records seen, per mapping
    assert delivered["a"] == [r["dynamodb"]["Keys"]["pk"]["S"] for r in streams.records]
    assert delivered["b"] == ["P0", "P1", "P2", "P3", "P4"]
    assert streams.calls["describe_stream"] == 1
    # Read once for both mappings: round 1 reads P0..P4 in 3 pages and an empty one; rounds 2
    # to 4 each read the one record a wrote and an empty page; round 5 an empty page.
    assert streams.calls["get_records"] == 4 + 3 * 2 + 1
    assert streams.calls["get_shard_iterator"] == 0  # the iterators opened at the start are kept

    streams.write("P9")
    assert pump.drain() == 2 and delivered["b"][-1] == "P9"
    assert streams.calls["describe_stream"] == 2  # once per drain
