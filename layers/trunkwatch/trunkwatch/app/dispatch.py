"""One schedule tick: one poll message per due trunk, to the queue ingest consumes.

The queue is FIFO with one message group per trunk: ingest polls different trunks in
parallel, and one trunk's next poll waits for its previous one to end (two polls of one
trunk never overlap). The deduplication id is the trunk and the tick's time, so a tick
delivered twice sends each trunk's message once.
"""

from __future__ import annotations

import hashlib
from datetime import datetime
from typing import Any, Protocol

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit

from trunkwatch.app.poll import due_trunks, poll_message
from trunkwatch.domain.config import Deployment
from trunkwatch.storage.port import Trunks

# SQS's SendMessageBatch limit.
BATCH = 10

logger = Logger(child=True)
metrics = Metrics()


class Queue(Protocol):
    """The part of an SQS client the dispatcher uses."""

    def send_message_batch(self, *, QueueUrl: str, Entries: list[dict[str, Any]]) -> dict[str, Any]: ...


def dispatch(
    trunks: Trunks, deployment: Deployment, now: datetime, queue: Queue, queue_url: str
) -> dict[str, Any]:
    """Send one poll message per due trunk; a batch SQS refuses (in part or whole) is logged
    and counted, and the other batches are still sent. Returns the trunks sent and failed."""
    due = due_trunks(trunks, deployment, now)
    sent: list[str] = []
    failed: list[str] = []
    for start in range(0, len(due), BATCH):
        batch = due[start : start + BATCH]
        entries = [
            {
                "Id": str(index),
                "MessageBody": poll_message(trunk),
                "MessageGroupId": _token(trunk.trunk_id),
                "MessageDeduplicationId": _token(f"{trunk.trunk_id}@{now.isoformat()}"),
            }
            for index, trunk in enumerate(batch)
        ]
        try:
            answer = queue.send_message_batch(QueueUrl=queue_url, Entries=entries)
            refused = {int(entry["Id"]): entry.get("Code", "") for entry in answer.get("Failed", [])}
        except Exception as err:  # one batch's failure must not stop the others
            refused = dict.fromkeys(range(len(batch)), type(err).__name__)
        for index, trunk in enumerate(batch):
            if index in refused:
                logger.error(
                    "poll message not sent; the next tick polls the trunk",
                    extra={"trunk": trunk.trunk_id, "error": refused[index]},
                )
                failed.append(trunk.trunk_id)
            else:
                sent.append(trunk.trunk_id)
    if failed:
        metrics.add_metric(name="PollErrors", unit=MetricUnit.Count, value=len(failed))
    return {"sent": sent, "failed": failed}


def _token(text: str) -> str:
    """A message group or deduplication id for `text`: at most 128 characters of SQS's set."""
    return hashlib.sha256(text.encode()).hexdigest()
