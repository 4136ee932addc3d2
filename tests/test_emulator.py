"""The local AWS emulation's fast paths answer exactly what moto answers without them."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from tests.conftest import PLAIN_TABLE, padded_item
from trunkwatch_local.emulator import fast_dynamodb


def test_fast_dynamodb_answers_every_query_as_moto_does(plain_table: Any) -> None:
    for pk in ("A", "B"):
        for job in ("a", "ab", "b"):
            for seq in range(12):
                plain_table.put_item(
                    TableName=PLAIN_TABLE,
                    Item=padded_item(pk, f"CELL#{job}#{seq:08d}", 10, n={"N": str(seq % 3)}),
                )
    queries: list[dict[str, Any]] = [
        {"KeyConditionExpression": "pk = :p AND begins_with(sk, :s)", "Values": {":s": {"S": "CELL#a#"}}},
        {"KeyConditionExpression": "pk = :p AND begins_with(sk, :s)", "Values": {":s": {"S": "CELL#a"}}},
        {"KeyConditionExpression": "pk = :p AND sk BETWEEN :s AND :t",
         "Values": {":s": {"S": "CELL#a#00000003"}, ":t": {"S": "CELL#b#00000002"}}},
        {"KeyConditionExpression": "pk = :p", "Values": {}},
        {"KeyConditionExpression": "pk = :p AND begins_with(sk, :s)", "Values": {":s": {"S": "CELL#b#"}},
         "FilterExpression": "n = :n", "Extra": {":n": {"N": "1"}}},
    ]  # fmt: skip

    def run_all() -> list[Any]:
        answers = []
        for query in queries:
            for forward in (True, False):
                request = {
                    "TableName": PLAIN_TABLE,
                    "KeyConditionExpression": query["KeyConditionExpression"],
                    "ExpressionAttributeValues": {
                        ":p": {"S": "A"},
                        **query["Values"],
                        **query.get("Extra", {}),
                    },
                    "ScanIndexForward": forward,
                    "Limit": 5,
                }
                if "FilterExpression" in query:
                    request["FilterExpression"] = query["FilterExpression"]
                pages = []
                while True:
                    page = plain_table.query(**request)
                    pages.append({k: v for k, v in page.items() if k != "ResponseMetadata"})
                    if "LastEvaluatedKey" not in page:
                        break
                    request["ExclusiveStartKey"] = page["LastEvaluatedKey"]
                answers.append(pages)
        key = {"pk": {"S": "A"}, "sk": {"S": "CELL#ab#00000004"}}
        answers.append(plain_table.get_item(TableName=PLAIN_TABLE, Key=key)["Item"])
        return answers

    plain = run_all()
    with fast_dynamodb():
        fast = run_all()
        # A put between queries is seen (the key index is rebuilt).
        plain_table.put_item(TableName=PLAIN_TABLE, Item=padded_item("A", "CELL#a#00000099", 10))
        later = plain_table.query(
            TableName=PLAIN_TABLE,
            KeyConditionExpression="pk = :p AND begins_with(sk, :s)",
            ExpressionAttributeValues={":p": {"S": "A"}, ":s": {"S": "CELL#a#"}},
        )
    assert fast == plain
    assert later["Count"] == 13


def test_fast_dynamodb_reads_the_stream_as_moto_does(plain_table: Any) -> None:
    for seq in range(5):
        plain_table.put_item(
            TableName=PLAIN_TABLE, Item=padded_item("A", f"CELL#a#{seq:08d}", 10, n={"N": str(seq)})
        )
    plain_table.put_item(
        TableName=PLAIN_TABLE, Item=padded_item("A", "CELL#a#00000001", 20, l={"L": [{"S": "x"}]})
    )
    plain_table.delete_item(TableName=PLAIN_TABLE, Key={"pk": {"S": "A"}, "sk": {"S": "CELL#a#00000002"}})
    arn = plain_table.describe_table(TableName=PLAIN_TABLE)["Table"]["LatestStreamArn"]
    streams = boto3.client("dynamodbstreams")
    shard = streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"][0]["ShardId"]

    def read() -> list[dict[str, Any]]:
        iterator = streams.get_shard_iterator(StreamArn=arn, ShardId=shard, ShardIteratorType="TRIM_HORIZON")
        page = streams.get_records(ShardIterator=iterator["ShardIterator"], Limit=100)
        return page["Records"]

    plain = read()
    with fast_dynamodb():
        fast = read()
    assert [r["eventName"] for r in fast] == ["INSERT"] * 5 + ["MODIFY", "REMOVE"]
    assert fast == plain  # creation times included: epoch seconds parse to the same datetime


def test_fast_dynamodb_still_refuses_an_item_over_400_kb(plain_table: Any) -> None:
    with fast_dynamodb():
        plain_table.put_item(TableName=PLAIN_TABLE, Item=padded_item("A", "near", 404_000))
        with pytest.raises(ClientError, match="Item size has exceeded the maximum allowed size"):
            plain_table.put_item(TableName=PLAIN_TABLE, Item=padded_item("A", "over", 406_000))
        # An update past the limit is moto's own check, as before.
        with pytest.raises(ClientError, match="Item size"):
            plain_table.update_item(
                TableName=PLAIN_TABLE,
                Key={"pk": {"S": "A"}, "sk": {"S": "near"}},
                UpdateExpression="SET more = :m",
                ExpressionAttributeValues={":m": {"S": "y" * 5_000}},
            )
