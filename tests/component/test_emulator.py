"""The local AWS emulation's fast paths answer exactly what moto answers without them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto.dynamodbstreams.models import dynamodbstreams_backends

from tests.support.aws import PLAIN_TABLE, padded_item
from trunkwatch.domain.clock import SimulatedClock
from trunkwatch_local.emulator import emulation, fast_dynamodb, release_stream


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


def _fresh_table(client: Any) -> None:
    """The plain table again, empty (its stream starts again at moto's first sequence number)."""
    table = client.describe_table(TableName=PLAIN_TABLE)["Table"]
    client.delete_table(TableName=PLAIN_TABLE)
    client.create_table(
        TableName=PLAIN_TABLE,
        KeySchema=table["KeySchema"],
        AttributeDefinitions=table["AttributeDefinitions"],
        BillingMode="PAY_PER_REQUEST",
        StreamSpecification=table["StreamSpecification"],
    )


def _stream(client: Any) -> list[dict[str, Any]]:
    """The stream from its trim horizon, without what differs between runs: ids, times, and
    moto's size estimate (the length of the record with its wall-clock time)."""
    arn = client.describe_table(TableName=PLAIN_TABLE)["Table"]["LatestStreamArn"]
    streams = boto3.client("dynamodbstreams")
    shard = streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"][0]["ShardId"]
    iterator = streams.get_shard_iterator(StreamArn=arn, ShardId=shard, ShardIteratorType="TRIM_HORIZON")
    records = streams.get_records(ShardIterator=iterator["ShardIterator"], Limit=1000)["Records"]
    return [
        {
            **r,
            "eventID": None,
            "dynamodb": {**r["dynamodb"], "ApproximateCreationDateTime": None, "SizeBytes": None},
        }
        for r in records
    ]


def _transactions(client: Any) -> list[Any]:
    """A committed transaction and two cancelled ones; what each answered, then the table and
    its stream."""
    for sk in ("a", "b", "c"):
        client.put_item(TableName=PLAIN_TABLE, Item=padded_item("T", sk, 10, n={"N": "1"}))
    key = {"pk": {"S": "T"}, "sk": {"S": "a"}}
    put_new = {"Put": {"TableName": PLAIN_TABLE, "Item": padded_item("T", "new", 5)}}
    update_a = {
        "Update": {
            "TableName": PLAIN_TABLE,
            "Key": key,
            "UpdateExpression": "ADD s :s SET n = :n",
            "ExpressionAttributeValues": {":s": {"SS": ["x"]}, ":n": {"N": "2"}},
        }
    }
    delete_b = {"Delete": {"TableName": PLAIN_TABLE, "Key": {"pk": {"S": "T"}, "sk": {"S": "b"}}}}
    failing_check = {
        "ConditionCheck": {
            "TableName": PLAIN_TABLE,
            "Key": {"pk": {"S": "T"}, "sk": {"S": "c"}},
            "ConditionExpression": "n = :two",
            "ExpressionAttributeValues": {":two": {"N": "2"}},
        }
    }
    answers: list[Any] = []
    for items in (
        [put_new, update_a, delete_b],  # commits
        [{"Put": {"TableName": PLAIN_TABLE, "Item": padded_item("U", "other", 5)}}, failing_check],
        [
            {"Delete": {"TableName": PLAIN_TABLE, "Key": {"pk": {"S": "T"}, "sk": {"S": "new"}}}},
            {**update_a, "Update": {**update_a["Update"], "ConditionExpression": "attribute_not_exists(n)"}},
        ],
    ):
        try:
            client.transact_write_items(TransactItems=items)
            answers.append("committed")
        except ClientError as err:
            answers.append((err.response["Error"]["Code"], err.response.get("CancellationReasons")))
    scan = client.scan(TableName=PLAIN_TABLE)["Items"]
    return [answers, sorted(scan, key=lambda item: (item["pk"]["S"], item["sk"]["S"])), _stream(client)]


def test_fast_dynamodb_transactions_answer_and_roll_back_as_moto_does(plain_table: Any) -> None:
    plain = _transactions(plain_table)
    _fresh_table(plain_table)
    with fast_dynamodb():
        fast = _transactions(plain_table)
    assert plain[0][0] == "committed" and plain[0][1][0] == "TransactionCanceledException"
    assert fast[:2] == plain[:2]
    assert fast[2] == plain[2]


def test_a_cancelled_transaction_leaves_nothing_on_an_open_stream_iterator(plain_table: Any) -> None:
    """DynamoDB writes no stream record for a cancelled transaction; readers already at the
    stream's end see nothing new (moto's own rollback swaps the table and its stream)."""
    with fast_dynamodb():
        arn = plain_table.describe_table(TableName=PLAIN_TABLE)["Table"]["LatestStreamArn"]
        streams = boto3.client("dynamodbstreams")
        shard = streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"][0]["ShardId"]
        iterator = streams.get_shard_iterator(StreamArn=arn, ShardId=shard, ShardIteratorType="LATEST")
        with pytest.raises(ClientError, match="TransactionCanceled"):
            plain_table.transact_write_items(
                TransactItems=[
                    {"Put": {"TableName": PLAIN_TABLE, "Item": padded_item("A", "x", 5)}},
                    {
                        "Put": {
                            "TableName": PLAIN_TABLE,
                            "Item": padded_item("A", "y", 5),
                            "ConditionExpression": "attribute_exists(pk)",
                        }
                    },
                ]
            )
        plain_table.put_item(TableName=PLAIN_TABLE, Item=padded_item("A", "z", 5))
        records = streams.get_records(ShardIterator=iterator["ShardIterator"])["Records"]
    assert [r["dynamodb"]["Keys"]["sk"]["S"] for r in records] == ["z"]


def test_stream_records_leave_after_24_hours_of_the_runtime_clock(plain_table: Any) -> None:
    start = datetime(2026, 11, 18, 12, 0, tzinfo=UTC)
    clock = SimulatedClock(start)
    with fast_dynamodb(clock):
        clock.set(start)
        for sk in ("a", "b"):
            plain_table.put_item(TableName=PLAIN_TABLE, Item=padded_item("A", sk, 5))
        arn = plain_table.describe_table(TableName=PLAIN_TABLE)["Table"]["LatestStreamArn"]
        streams = boto3.client("dynamodbstreams")
        shard = streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"][0]["ShardId"]
        clock.set(start + timedelta(hours=23))
        plain_table.put_item(TableName=PLAIN_TABLE, Item=padded_item("A", "c", 5))
        before = _stream(plain_table)
        clock.set(start + timedelta(hours=24, seconds=1))
        plain_table.put_item(TableName=PLAIN_TABLE, Item=padded_item("A", "d", 5))
        kept = _stream(plain_table)
        behind = streams.get_shard_iterator(
            StreamArn=arn,
            ShardId=shard,
            ShardIteratorType="AT_SEQUENCE_NUMBER",
            SequenceNumber=before[0]["dynamodb"]["SequenceNumber"],
        )
        with pytest.raises(ClientError, match="TrimmedDataAccessException"):
            streams.get_records(ShardIterator=behind["ShardIterator"])
    assert [r["dynamodb"]["Keys"]["sk"]["S"] for r in before] == ["a", "b", "c"]
    assert [r["dynamodb"]["Keys"]["sk"]["S"] for r in kept] == ["c", "d"]
    assert kept[0] == before[2]  # the same record, its sequence number unchanged


def test_records_every_consumer_has_read_are_released(plain_table: Any) -> None:
    with fast_dynamodb():
        for sk in "abcde":
            plain_table.put_item(TableName=PLAIN_TABLE, Item=padded_item("A", sk, 5))
        records = _stream(plain_table)
        arn = plain_table.describe_table(TableName=PLAIN_TABLE)["Table"]["LatestStreamArn"]
        release_stream(arn, int(records[2]["dynamodb"]["SequenceNumber"]))
        kept = _stream(plain_table)
        shards = boto3.client("dynamodbstreams").describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]
    assert kept == records[3:]
    assert (
        shards[0]["SequenceNumberRange"]["StartingSequenceNumber"] == records[3]["dynamodb"]["SequenceNumber"]
    )


def test_shard_iterators_expire_after_15_minutes(plain_table: Any) -> None:
    start = datetime(2026, 11, 18, 12, 0, tzinfo=UTC)
    clock = SimulatedClock(start)
    with fast_dynamodb(clock):
        arn = plain_table.describe_table(TableName=PLAIN_TABLE)["Table"]["LatestStreamArn"]
        streams = boto3.client("dynamodbstreams")
        shard = streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"][0]["ShardId"]
        clock.set(start)
        iterator = streams.get_shard_iterator(StreamArn=arn, ShardId=shard, ShardIteratorType="TRIM_HORIZON")
        clock.set(start + timedelta(minutes=14))
        assert streams.get_records(ShardIterator=iterator["ShardIterator"])["Records"] == []
        clock.set(start + timedelta(minutes=15, seconds=1))
        with pytest.raises(ClientError, match="ExpiredIteratorException"):
            streams.get_records(ShardIterator=iterator["ShardIterator"])
        # moto's backend no longer holds the iterator issued at the start.
        assert len(dynamodbstreams_backends["123456789012"]["us-east-1"].shard_iterators) == 1


def test_the_emulation_keeps_no_model_objects_beyond_what_its_backends_hold() -> None:
    from moto.dynamodb.models.dynamo_type import Item
    from moto.dynamodb.models.table import StreamRecord

    with emulation():
        client = boto3.client("dynamodb", region_name="us-east-1")
        client.create_table(
            TableName="t",
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
            StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
        )
        for n in range(20):
            client.put_item(TableName="t", Item={"pk": {"S": f"k{n % 5}"}, "n": {"N": str(n)}})
        assert client.scan(TableName="t")["Count"] == 5  # the backend holds the items, as before
        assert list(Item.instances_tracked) == [] and list(StreamRecord.instances_tracked) == []  # type: ignore[attr-defined]


def test_items_a_query_returned_stay_the_table_s_own_and_updates_keep_their_old_image(
    plain_table: Any,
) -> None:
    """Inside a Query the results are the stored items themselves; an update afterwards
    still records the item as it was (its stream record's OldImage), as with moto's copy."""
    with fast_dynamodb():
        plain_table.put_item(TableName=PLAIN_TABLE, Item=padded_item("A", "a", 5, n={"N": "1"}))
        first = plain_table.query(
            TableName=PLAIN_TABLE,
            KeyConditionExpression="pk = :p",
            ExpressionAttributeValues={":p": {"S": "A"}},
        )["Items"]
        plain_table.update_item(
            TableName=PLAIN_TABLE,
            Key={"pk": {"S": "A"}, "sk": {"S": "a"}},
            UpdateExpression="SET n = :n",
            ExpressionAttributeValues={":n": {"N": "2"}},
        )
        again = plain_table.query(
            TableName=PLAIN_TABLE,
            KeyConditionExpression="pk = :p",
            ExpressionAttributeValues={":p": {"S": "A"}},
        )["Items"]
        modify = _stream(plain_table)[-1]["dynamodb"]
    assert first[0]["n"] == {"N": "1"} and again[0]["n"] == {"N": "2"}
    assert modify["OldImage"]["n"] == {"N": "1"} and modify["NewImage"]["n"] == {"N": "2"}
