"""Ingest through the HUD source into the table: only changed cells are written."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest
from pytest_httpserver import HTTPServer

from tests.support.aws import table_items
from tests.support.hud import PATH, grid
from trunkwatch.app.ingest import poll_trunk
from trunkwatch.domain.config import load_deployment
from trunkwatch.sources.base import SourceError
from trunkwatch.sources.hud import HudSource
from trunkwatch.storage.port import Storage

NOW = datetime(2026, 11, 18, 20, 0, tzinfo=UTC)


def poll(
    storage: Storage, server: HTTPServer, body: dict[str, Any], config: dict[str, Any] | None = None
) -> Any:
    server.clear()
    server.expect_request(PATH).respond_with_json(body)
    deployment = load_deployment(
        {
            "trunks": [
                {"repo": "pytorch/pytorch", "url": server.url_for("/").rstrip("/"), "config": config or {}}
            ]
        }
    )
    trunk = deployment.trunks[0]
    return poll_trunk(storage, trunk, deployment.rule_for(trunk), HudSource(trunk, None), NOW)


def cells() -> dict[tuple[str, str], str]:
    return {(i["job"]["S"], i["sha"]["S"]): i["state"]["S"] for i in table_items("cell")}


def test_first_poll_writes_merged_cells(aws: Any, httpserver: HTTPServer) -> None:
    result = poll(aws["storage"], httpserver, grid())
    assert cells() == {
        ("pull / b / test (default, r)", "bbb"): "fail",
        ("pull / b / test (default, r)", "aaa"): "pending",
        ("lint / l", "aaa"): "pass",
    }
    assert result.cells_written == 3 and result.poll is not None
    seqs = {i["sha"]["S"]: int(i["seq"]["N"]) for i in table_items("commit")}
    assert seqs["bbb"] == seqs["aaa"] + 1
    assert len(table_items("tick")) == 1


def test_unchanged_poll_writes_nothing(aws: Any, httpserver: HTTPServer) -> None:
    poll(aws["storage"], httpserver, grid())
    before = table_items()
    result = poll(aws["storage"], httpserver, grid())
    assert (result.items_written, result.cells_written, result.poll) == (0, 0, None)
    assert table_items() == before


def test_only_changed_cells_are_written(aws: Any, httpserver: HTTPServer) -> None:
    poll(aws["storage"], httpserver, grid())
    body = grid()
    body["shaGrid"][1]["jobs"][0] = {"conclusion": "failure", "status": "completed"}
    # Details that do not change a merged state are not a change.
    body["shaGrid"][0]["jobs"][0]["failureLines"] = ["FAILED other"]
    result = poll(aws["storage"], httpserver, body)
    assert result.cells_written == 1 and result.changed_jobs == ["pull / b / test (default, r)"]
    assert cells()[("pull / b / test (default, r)", "aaa")] == "fail"


def test_a_retry_running_keeps_the_result_it_retries(aws: Any, httpserver: HTTPServer) -> None:
    # The HUD shows a job's latest attempt: a retry queued shows pending. As for a webhook
    # delivery, a result never goes back to pending; the retry's own result replaces it.
    poll(aws["storage"], httpserver, grid())
    body = grid()
    body["shaGrid"][0]["jobs"][0] = {"status": "queued", "htmlUrl": "retry"}
    assert poll(aws["storage"], httpserver, body).cells_written == 0
    assert cells()[("pull / b / test (default, r)", "bbb")] == "fail"
    body["shaGrid"][0]["jobs"][0] = {
        "conclusion": "success",
        "status": "completed",
        "failedPreviousRun": True,
    }
    assert poll(aws["storage"], httpserver, body).cells_written == 1
    assert cells()[("pull / b / test (default, r)", "bbb")] == "flaky"


def test_new_commit_gets_next_seq_and_old_seqs_stay(aws: Any, httpserver: HTTPServer) -> None:
    poll(aws["storage"], httpserver, grid())
    first = {i["sha"]["S"]: int(i["seq"]["N"]) for i in table_items("commit")}
    body = grid()
    newer = copy.deepcopy(body["shaGrid"][0])
    newer.update(sha="ccc", time="2026-11-18T19:45:00Z")
    body["shaGrid"].insert(0, newer)
    poll(aws["storage"], httpserver, body)
    seqs = {i["sha"]["S"]: int(i["seq"]["N"]) for i in table_items("commit")}
    assert {sha: seqs[sha] for sha in first} == first
    assert seqs["ccc"] == seqs["bbb"] + 1


def test_cell_that_disappears_becomes_nodata(aws: Any, httpserver: HTTPServer) -> None:
    poll(aws["storage"], httpserver, grid())
    body = grid()
    body["shaGrid"][0]["jobs"][0] = {}
    body["shaGrid"][0]["jobs"][1] = {}
    poll(aws["storage"], httpserver, body)
    assert cells()[("pull / b / test (default, r)", "bbb")] == "nodata"


def test_out_of_scope_jobs_get_no_cell_items(aws: Any, httpserver: HTTPServer) -> None:
    poll(aws["storage"], httpserver, grid(), config={"exclude": "^lint"})
    assert ("lint / l", "aaa") not in cells()


def test_source_error_writes_nothing_and_next_poll_catches_up(aws: Any, httpserver: HTTPServer) -> None:
    broken = grid()
    broken["shaGrid"][0]["jobs"].pop()
    with pytest.raises(SourceError):
        poll(aws["storage"], httpserver, broken)
    assert table_items() == []
    assert poll(aws["storage"], httpserver, grid()).cells_written == 3


def test_cells_are_written_job_by_job_with_each_jobs_newest_cell_before_the_poll(
    aws: Any, httpserver: HTTPServer
) -> None:
    poll(aws["storage"], httpserver, grid())
    assert all("prior_seq" not in i for i in table_items("cell"))  # nothing stored before
    seqs = {i["sha"]["S"]: int(i["seq"]["N"]) for i in table_items("commit")}
    body = grid()
    newer = copy.deepcopy(body["shaGrid"][0])
    newer.update(sha="ccc", time="2026-11-18T19:45:00Z")
    body["shaGrid"].insert(0, newer)
    body["shaGrid"][2]["jobs"][2] = {"conclusion": "failure", "status": "completed"}  # aaa's lint
    # The table's stream (the template's), read from here on.
    arn = aws["stack"].stream_arn
    streams = boto3.client("dynamodbstreams")
    shard = streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"][0]["ShardId"]
    iterator = streams.get_shard_iterator(StreamArn=arn, ShardId=shard, ShardIteratorType="LATEST")
    poll(aws["storage"], httpserver, body)
    images = [
        r["dynamodb"]["NewImage"]
        for r in streams.get_records(ShardIterator=iterator["ShardIterator"])["Records"]
    ]
    written = [
        (i["job"]["S"], i["sha"]["S"], i.get("prior_seq", {}).get("N"))
        for i in images
        if i["kind"]["S"] == "cell"
    ]
    pull = "pull / b / test (default, r)"
    # Job by job; each cell knows its job's newest cell before this poll.
    assert written == [
        ("lint / l", "aaa", str(seqs["aaa"])),
        (pull, "ccc", str(seqs["bbb"])),
    ]


def test_a_page_like_the_last_one_is_not_parsed_again(aws: Any, httpserver: HTTPServer) -> None:
    poll(aws["storage"], httpserver, grid())
    before = table_items()
    again = poll(aws["storage"], httpserver, grid())
    assert again.http_requests == 1 and again.commits == 0  # fetched, not parsed
    assert (again.items_written, again.cells_written) == (0, 0)
    assert table_items() == before
    changed = grid()
    changed["shaGrid"][1]["jobs"][0] = {"conclusion": "failure", "status": "completed"}
    assert poll(aws["storage"], httpserver, changed).cells_written == 1  # one byte more: read as always


def test_a_new_job_scope_reads_the_same_page_again(aws: Any, httpserver: HTTPServer) -> None:
    poll(aws["storage"], httpserver, grid(), config={"exclude": "^lint"})
    assert poll(aws["storage"], httpserver, grid(), config={"exclude": "^lint"}).commits == 0  # skipped
    assert poll(aws["storage"], httpserver, grid()).commits == 2  # same page, another scope: parsed


def test_a_commit_past_the_retention_is_not_stored_again(aws: Any, httpserver: HTTPServer) -> None:
    body = grid()
    body["shaGrid"][1]["time"] = "2026-10-19T19:59:59Z"  # NOW - 720h - 1s: its items would be expired
    result = poll(aws["storage"], httpserver, body)
    assert {i["sha"]["S"] for i in table_items("commit")} == {"bbb"}
    assert {sha for _, sha in cells()} == {"bbb"} and result.cells_written == 1
    (commit,) = table_items("commit")
    assert int(commit["expires_at"]["N"]) == int(datetime(2026, 12, 18, 19, 30, tzinfo=UTC).timestamp())
    # With a longer retention the same commit is within reach: the next page stores it,
    # below the commit it came before.
    newer = copy.deepcopy(body["shaGrid"][0])
    newer.update(sha="ccc", time="2026-11-18T19:45:00Z")
    body["shaGrid"].insert(0, newer)
    poll(aws["storage"], httpserver, body, config={"retention": "721h"})
    assert ("lint / l", "aaa") in cells()
    seqs = {i["sha"]["S"]: int(i["seq"]["N"]) for i in table_items("commit")}
    assert seqs["aaa"] + 1 == seqs["bbb"] == seqs["ccc"] - 1


def test_new_commits_never_take_the_seqs_of_expired_cells(aws: Any, httpserver: HTTPServer) -> None:
    poll(aws["storage"], httpserver, grid())
    old_seqs = {int(i["seq"]["N"]) for i in table_items("cell")}
    dynamodb = boto3.client("dynamodb")
    for item in table_items("commit"):  # TTL deleted every commit item, not yet their cells
        dynamodb.delete_item(TableName=aws["table"], Key={"pk": item["pk"], "sk": item["sk"]})
    body = grid()
    newer = copy.deepcopy(body["shaGrid"][0])
    newer.update(sha="ccc", time="2026-11-18T19:45:00Z")
    body["shaGrid"] = [newer]
    poll(aws["storage"], httpserver, body)
    (ccc,) = table_items("commit")
    assert int(ccc["seq"]["N"]) == max(old_seqs) + 1
