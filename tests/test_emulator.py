"""The local AWS emulation's fast paths answer exactly what moto answers without them."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from trunkwatch_local.emulator import fast_dynamodb

TABLE = "emulated"


@pytest.fixture
def table(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    with mock_aws():
        client = boto3.client("dynamodb")
        client.create_table(
            TableName=TABLE,
            KeySchema=[
                {"AttributeName": "pk", "KeyType": "HASH"},
                {"AttributeName": "sk", "KeyType": "RANGE"},
            ],
            AttributeDefinitions=[
                {"AttributeName": "pk", "AttributeType": "S"},
                {"AttributeName": "sk", "AttributeType": "S"},
            ],
            BillingMode="PAY_PER_REQUEST",
            StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
        )
        yield client


def _item(pk: str, sk: str, padding: int, **extra: Any) -> dict[str, Any]:
    return {"pk": {"S": pk}, "sk": {"S": sk}, "pad": {"S": "x" * padding}, **extra}


def test_fast_dynamodb_answers_every_query_as_moto_does(table: Any) -> None:
    for pk in ("A", "B"):
        for job in ("a", "ab", "b"):
            for seq in range(12):
                table.put_item(
                    TableName=TABLE, Item=_item(pk, f"CELL#{job}#{seq:08d}", 10, n={"N": str(seq % 3)})
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
                    "TableName": TABLE,
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
                    page = table.query(**request)
                    pages.append({k: v for k, v in page.items() if k != "ResponseMetadata"})
                    if "LastEvaluatedKey" not in page:
                        break
                    request["ExclusiveStartKey"] = page["LastEvaluatedKey"]
                answers.append(pages)
        key = {"pk": {"S": "A"}, "sk": {"S": "CELL#ab#00000004"}}
        answers.append(table.get_item(TableName=TABLE, Key=key)["Item"])
        return answers

    plain = run_all()
    with fast_dynamodb():
        fast = run_all()
        # A put between queries is seen (the key index is rebuilt).
        table.put_item(TableName=TABLE, Item=_item("A", "CELL#a#00000099", 10))
        later = table.query(
            TableName=TABLE,
            KeyConditionExpression="pk = :p AND begins_with(sk, :s)",
            ExpressionAttributeValues={":p": {"S": "A"}, ":s": {"S": "CELL#a#"}},
        )
    assert fast == plain
    assert later["Count"] == 13


def test_fast_dynamodb_reads_the_stream_as_moto_does(table: Any) -> None:
    for seq in range(5):
        table.put_item(TableName=TABLE, Item=_item("A", f"CELL#a#{seq:08d}", 10, n={"N": str(seq)}))
    table.put_item(TableName=TABLE, Item=_item("A", "CELL#a#00000001", 20, l={"L": [{"S": "x"}]}))
    table.delete_item(TableName=TABLE, Key={"pk": {"S": "A"}, "sk": {"S": "CELL#a#00000002"}})
    arn = table.describe_table(TableName=TABLE)["Table"]["LatestStreamArn"]
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


def test_fast_dynamodb_still_refuses_an_item_over_400_kb(table: Any) -> None:
    with fast_dynamodb():
        table.put_item(TableName=TABLE, Item=_item("A", "near", 404_000))
        with pytest.raises(ClientError, match="Item size has exceeded the maximum allowed size"):
            table.put_item(TableName=TABLE, Item=_item("A", "over", 406_000))
        # An update past the limit is moto's own check, as before.
        with pytest.raises(ClientError, match="Item size"):
            table.update_item(
                TableName=TABLE,
                Key={"pk": {"S": "A"}, "sk": {"S": "near"}},
                UpdateExpression="SET more = :m",
                ExpressionAttributeValues={":m": {"S": "y" * 5_000}},
            )
