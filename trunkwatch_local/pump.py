"""Lambda's event source mappings, locally.

DynamoDB streams (`StreamPump`): each mapping's FilterCriteria, batches in Lambda's shape,
`batchItemFailures`, bisect-on-error, the retry limit and the DLQ. Mappings at one shard
iterator share its reads within a round (the stream is read once for all of them); a record
a handler writes meanwhile is read in the next round.

SQS queues (`QueuePump`): batches of each mapping's size in Lambda's SQS event shape, and
`batchItemFailures`. A failed message is made visible again for the next drain, unless its
queue would expire it first (retention no longer than the visibility timeout): then it is
dropped."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from moto.events.models import EventPattern

from trunkwatch_local.wiring import QueueSource, StreamSource

REGION = "us-east-1"
Invoke = Callable[[str, dict[str, Any]], Any]
# Told, after each drain, the sequence number through which every mapping has read the stream.
Release = Callable[[str, int], None]


@dataclass
class Mapping:
    source: StreamSource
    patterns: list[EventPattern]
    iterators: dict[str, str] = field(default_factory=dict)  # shard id -> next iterator
    read_through: dict[str, int] = field(default_factory=dict)  # shard id -> last sequence read

    def wants(self, record: dict[str, Any]) -> bool:
        return not self.patterns or any(p.matches_event(record) for p in self.patterns)  # type: ignore[arg-type]


@dataclass
class PumpStats:
    invocations: int = 0
    records: int = 0
    retries: int = 0
    dead_lettered: int = 0


class StreamPump:
    def __init__(
        self,
        streams_client: Any,
        sqs_client: Any,
        stream_arn: str,
        dlq_url: str,
        region: str,
        sources: list[StreamSource],
        invoke: Invoke,
        release: Release | None = None,
    ) -> None:
        self.client = streams_client
        self.sqs = sqs_client
        self.stream_arn = stream_arn
        self.dlq_url = dlq_url
        self.region = region
        self.invoke = invoke
        self.release = release
        self.stats = PumpStats()
        self.mappings = [Mapping(s, [EventPattern.load(json.dumps(p)) for p in s.patterns]) for s in sources]
        self.describe_calls = 0
        # This round's reads: (shard, iterator) -> (records, the iterator after them).
        self._pages: dict[tuple[str, str], tuple[list[dict[str, Any]], str | None]] = {}
        self._open()

    def _open(self) -> None:
        """Start every mapping on the shards it does not read yet."""
        self.describe_calls += 1
        shards = self.client.describe_stream(StreamArn=self.stream_arn)["StreamDescription"]["Shards"]
        for shard in shards:
            opened: dict[str, str] = {}  # starting position -> iterator, shared
            for mapping in self.mappings:
                if shard["ShardId"] in mapping.iterators:
                    continue
                position = mapping.source.starting_position
                if position not in opened:
                    opened[position] = self.client.get_shard_iterator(
                        StreamArn=self.stream_arn, ShardId=shard["ShardId"], ShardIteratorType=position
                    )["ShardIterator"]
                mapping.iterators[shard["ShardId"]] = opened[position]

    def drain(self, max_rounds: int = 1000) -> int:
        """Deliver until no mapping has new records (handlers may write more). Records seen."""
        self._open()
        seen = 0
        for _ in range(max_rounds):
            moved = 0
            for mapping in self.mappings:
                records = self._read(mapping)
                moved += len(records)
                wanted = [r for r in records if mapping.wants(r)]
                for start in range(0, len(wanted), mapping.source.batch_size):
                    self._deliver(mapping, wanted[start : start + mapping.source.batch_size])
            seen += moved
            self._pages.clear()
            if not moved:
                self._release()
                return seen
        raise RuntimeError(
            f"stream did not go quiet after {max_rounds} rounds (a handler writing in a loop?)"
        )

    def _release(self) -> None:
        """Every mapping has read each shard at least this far: its consumers are done with it."""
        if self.release is None:
            return
        for shard in {shard for mapping in self.mappings for shard in mapping.iterators}:
            positions = [mapping.read_through.get(shard) for mapping in self.mappings]
            if positions and None not in positions:
                self.release(self.stream_arn, min(p for p in positions if p is not None))

    def _read(self, mapping: Mapping) -> list[dict[str, Any]]:
        records: list[dict[str, Any]] = []
        for shard, start in list(mapping.iterators.items()):
            if (shard, start) not in self._pages:
                read: list[dict[str, Any]] = []
                iterator: str | None = start
                while iterator:
                    page = self.client.get_records(ShardIterator=iterator)
                    read.extend(self._lambda_record(r) for r in page["Records"])
                    iterator = page.get("NextShardIterator")
                    if not page["Records"]:
                        break
                self._pages[shard, start] = (read, iterator)
            read, after = self._pages[shard, start]
            records.extend(read)
            if read:
                mapping.read_through[shard] = int(read[-1]["dynamodb"]["SequenceNumber"])
            if after:
                mapping.iterators[shard] = after
        return records

    def skip_written(self) -> None:
        """Move every mapping past the records written so far, unread (items put back, say)."""
        self._open()
        for mapping in self.mappings:
            for shard in mapping.iterators:
                mapping.iterators[shard] = self.client.get_shard_iterator(
                    StreamArn=self.stream_arn, ShardId=shard, ShardIteratorType="LATEST"
                )["ShardIterator"]

    def _lambda_record(self, record: dict[str, Any]) -> dict[str, Any]:
        """The stream API's record in the shape Lambda delivers it."""
        dynamodb = dict(record["dynamodb"])
        created = dynamodb.get("ApproximateCreationDateTime")
        if isinstance(created, datetime):
            dynamodb["ApproximateCreationDateTime"] = int(created.timestamp())
        return {**record, "eventVersion": "1.1", "dynamodb": dynamodb, "eventSourceARN": self.stream_arn}

    def _deliver(self, mapping: Mapping, batch: list[dict[str, Any]]) -> None:
        source = mapping.source
        pending: list[tuple[list[dict[str, Any]], int]] = [(batch, 0)]
        while pending:
            records, attempt = pending.pop(0)
            self.stats.invocations += 1
            self.stats.records += len(records)
            try:
                response = self.invoke(source.function, {"Records": records})
            except Exception:
                retry = [records[: len(records) // 2], records[len(records) // 2 :]]
                if not (source.bisect and len(records) > 1):
                    retry = [records]
            else:
                failed = (
                    {f["itemIdentifier"] for f in (response or {}).get("batchItemFailures", [])}
                    if source.report_item_failures
                    else set()
                )
                if not failed:
                    continue
                # Lambda checkpoints before the first failed record and retries from there.
                first = next(i for i, r in enumerate(records) if r["dynamodb"]["SequenceNumber"] in failed)
                retry = [records[first:]]
            if source.max_retries >= 0 and attempt >= source.max_retries:
                self._dead_letter(source, [record for part in retry for record in part])
            else:
                pending[:0] = [(part, attempt + 1) for part in retry]
                self.stats.retries += 1

    def _dead_letter(self, source: StreamSource, records: list[dict[str, Any]]) -> None:
        """What Lambda's OnFailure destination receives for a stream batch: its coordinates."""
        self.stats.dead_lettered += len(records)
        sequence = [r["dynamodb"]["SequenceNumber"] for r in records]
        body = {
            "requestContext": {
                "functionArn": source.function,
                "condition": "RetryAttemptsExhausted",
                "approximateInvokeCount": source.max_retries + 1,
            },
            "responseContext": {"statusCode": 200},
            "version": "1.0",
            "DDBStreamBatchInfo": {
                "shardId": "local",
                "startSequenceNumber": sequence[0],
                "endSequenceNumber": sequence[-1],
                "batchSize": len(records),
                "streamArn": self.stream_arn,
            },
        }
        self.sqs.send_message(QueueUrl=self.dlq_url, MessageBody=json.dumps(body))


@dataclass
class QueueStats:
    invocations: int = 0
    messages: int = 0
    failed: int = 0  # messages whose handling failed (reported, or the invocation died)
    dropped: int = 0  # failed messages the queue would expire before redelivering


class QueuePump:
    def __init__(
        self, sqs_client: Any, sources: list[QueueSource], urls: dict[str, str], invoke: Invoke
    ) -> None:
        self.sqs = sqs_client
        self.sources = sources
        self.urls = urls  # queue logical id -> queue URL
        self.invoke = invoke
        self.stats = QueueStats()

    def drain(self) -> list[Any]:
        """Deliver every message the mapped queues hold now; the invocations' results."""
        results: list[Any] = []
        for source in self.sources:
            url = self.urls[source.queue]
            retry: list[str] = []
            while batch := self.sqs.receive_message(
                QueueUrl=url,
                MaxNumberOfMessages=source.batch_size,
                AttributeNames=["All"],
                VisibilityTimeout=source.visibility_timeout_s,
            ).get("Messages", []):
                failed = self._deliver(source, url, batch, results)
                for message in batch:
                    if message["MessageId"] not in failed:
                        self.sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
                    elif source.retention_s <= source.visibility_timeout_s:
                        self.stats.dropped += 1
                        self.sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
                    else:
                        retry.append(message["ReceiptHandle"])
            for handle in retry:
                self.sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=handle, VisibilityTimeout=0)
        return results

    def _deliver(
        self, source: QueueSource, url: str, batch: list[dict[str, Any]], results: list[Any]
    ) -> set[str]:
        """Invoke the mapping's function with `batch`; the ids of the messages that failed."""
        account, name = url.rstrip("/").split("/")[-2:]
        arn = f"arn:aws:sqs:{REGION}:{account}:{name}"
        event = {
            "Records": [
                {
                    "messageId": message["MessageId"],
                    "receiptHandle": message["ReceiptHandle"],
                    "body": message["Body"],
                    "attributes": message.get("Attributes", {}),
                    "messageAttributes": message.get("MessageAttributes", {}),
                    "md5OfBody": message.get("MD5OfBody")
                    or hashlib.md5(message["Body"].encode()).hexdigest(),  # noqa: S324
                    "eventSource": "aws:sqs",
                    "eventSourceARN": arn,
                    "awsRegion": REGION,
                }
                for message in batch
            ]
        }
        self.stats.invocations += 1
        self.stats.messages += len(batch)
        everything = {message["MessageId"] for message in batch}
        try:
            result = self.invoke(source.function, event)
        except Exception:  # the invocation died: Lambda retries the whole batch
            self.stats.failed += len(batch)
            return everything
        results.append(result)
        reported = (result or {}).get("batchItemFailures") if source.report_item_failures else None
        failed = {str(item["itemIdentifier"]) for item in reported or []}
        self.stats.failed += len(failed & everything)
        return failed & everything


def merged(results: list[Any]) -> dict[str, list[Any]]:
    """The invocations' results in one: each list they hold, concatenated under its key
    (ingest's `polled` and `errors` of every trunk a tick polled)."""
    out: dict[str, list[Any]] = {}
    for result in results:
        for key, value in (result or {}).items():
            if isinstance(value, list):
                out[key] = out.get(key, []) + value
    return out
