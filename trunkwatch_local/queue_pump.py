"""Lambda's SQS event source mappings, locally: batches of each mapping's size in Lambda's
SQS event shape, and `batchItemFailures`. A failed message is made visible again for the
next drain, unless its queue would expire it first (retention no longer than the
visibility timeout): then it is dropped."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from trunkwatch_local.pump import Invoke
from trunkwatch_local.wiring import QueueSource

REGION = "us-east-1"


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
