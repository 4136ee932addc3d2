"""moto answers the local stack's requests one at a time (`trunkwatch_local.aws_calls`): its
backends are not thread-safe, and the storage writes a poll's pending cells from several
threads at once."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest

from trunkwatch.domain.cells import Cell, CellState, CellWrite, Commit

TRUNK = "pytorch/pytorch#main"
COMMIT = Commit(sha="a" * 40, time=datetime(2026, 11, 18, 12, 0, tzinfo=UTC), title="c", author="a", pr=1)


@pytest.fixture
def switching_often() -> Iterator[None]:
    """Threads switch every microsecond, as they do often on a loaded machine: a race in the
    emulation shows in nearly every run instead of now and then."""
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(interval)


def stream_sequence_numbers(table: str) -> list[str]:
    streams = boto3.client("dynamodbstreams")
    arn = boto3.client("dynamodb").describe_table(TableName=table)["Table"]["LatestStreamArn"]
    numbers = []
    for shard in streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]:
        iterator = streams.get_shard_iterator(
            StreamArn=arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
        )["ShardIterator"]
        while records := (page := streams.get_records(ShardIterator=iterator))["Records"]:
            numbers += [record["dynamodb"]["SequenceNumber"] for record in records]
            iterator = page["NextShardIterator"]
    return numbers


def test_pending_cells_written_from_threads_get_a_stream_record_each(
    aws: dict[str, Any], switching_often: None
) -> None:
    # A tick counts its cells by their records' sequence numbers: two records with one
    # number leave it open until the sweep settles it, and its page comes a tick late.
    jobs = [f"pull / job {n}" for n in range(40)]
    for _ in range(3):
        aws["storage"].cells.save_all(
            TRUNK,
            [CellWrite(Cell(job, COMMIT.sha, CellState.PENDING), COMMIT, 1, "p") for job in jobs],
            timedelta(days=30),
        )
    numbers = stream_sequence_numbers(aws["table"])
    assert len(numbers) >= len(jobs)
    assert len(set(numbers)) == len(numbers)


def test_a_request_whose_sending_raised_lets_the_next_ones_through(aws: dict[str, Any]) -> None:
    client = boto3.client("dynamodb")

    def refuse(**_: Any) -> None:
        raise RuntimeError("refused before moto answered")

    client.meta.events.register("before-send", refuse)  # between the lock's two handlers
    with pytest.raises(RuntimeError, match="refused before moto answered"):
        client.describe_table(TableName=aws["table"])
    # From another thread (a daemon: a lock the failed request kept would hold it forever).
    other = boto3.client("dynamodb")
    answers: list[str] = []
    thread = threading.Thread(
        target=lambda: answers.append(other.describe_table(TableName=aws["table"])["Table"]["TableName"]),
        daemon=True,
    )
    thread.start()
    thread.join(120)
    assert answers == [aws["table"]]
