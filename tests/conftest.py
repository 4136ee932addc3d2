"""Shared fixtures: a moto-backed table created from template.yaml's own definition."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
import pytest
from aws_lambda_powertools.utilities import parameters
from moto import mock_aws

from trunkwatch.domain.clock import format_time, parse_time
from trunkwatch.storage.dynamodb import open_table
from trunkwatch_local.template import find_template
from trunkwatch_local.wiring import read_wiring

TABLE = "trunkwatch-test"
CONFIG_PARAMETER = "/trunkwatch-test/config"
CONFIG = {"trunks": [{"repo": "pytorch/pytorch", "branch": "main"}]}


def template_environment() -> dict[str, str]:
    """The functions' literal environment from template.yaml (service name, namespace...)."""
    variables = read_wiring(find_template()).environment
    return {name: value for name, value in variables.items() if isinstance(value, str)}


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """moto in-process AWS with the template's table and an SNS topic captured by SQS."""
    for name in ("AWS_ENDPOINT_URL", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    monkeypatch.setenv("TABLE_NAME", TABLE)
    monkeypatch.setenv("POWERTOOLS_TRACE_DISABLED", "true")
    for name, value in template_environment().items():
        monkeypatch.setenv(name, value)
    with mock_aws():
        definition = read_wiring(find_template()).table
        boto3.client("dynamodb").create_table(
            TableName=TABLE,
            KeySchema=definition["KeySchema"],
            AttributeDefinitions=definition["AttributeDefinitions"],
            BillingMode="PAY_PER_REQUEST",
        )
        # The configuration parameter every deployed function is given (CONFIG_PARAMETER).
        boto3.client("ssm").put_parameter(Name=CONFIG_PARAMETER, Type="String", Value=json.dumps(CONFIG))
        monkeypatch.setenv("CONFIG_PARAMETER", CONFIG_PARAMETER)
        parameters.clear_caches()
        sns, sqs = boto3.client("sns"), boto3.client("sqs")
        topic = sns.create_topic(Name="alerts")["TopicArn"]
        queue = sqs.create_queue(QueueName="capture")["QueueUrl"]
        arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=arn)
        monkeypatch.setenv("TOPIC_ARN", topic)
        yield {"table": TABLE, "topic": topic, "queue": queue, "storage": open_table(TABLE, "us-east-1")}


def table_items(kind: str | None = None) -> list[dict[str, Any]]:
    items = boto3.client("dynamodb").scan(TableName=os.environ["TABLE_NAME"])["Items"]
    return [i for i in items if kind is None or i.get("kind", {}).get("S") == kind]


PLAIN_TABLE = "plain"


@pytest.fixture
def plain_table(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """moto in-process with one bare pk/sk table (stream on, new and old images): a client."""
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
            TableName=PLAIN_TABLE,
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


def padded_item(pk: str, sk: str, padding: int, **extra: Any) -> dict[str, Any]:
    """A DynamoDB-JSON item of about `padding` bytes."""
    return {"pk": {"S": pk}, "sk": {"S": sk}, "pad": {"S": "x" * padding}, **extra}


def record_stream_batches(runtime: Any) -> list[tuple[str, dict[str, Any]]]:
    """From now on, every stream batch the runtime's pump delivers: (function, event), so a
    test can deliver them all again as a retrying Lambda would."""
    delivered: list[tuple[str, dict[str, Any]]] = []
    invoke = runtime.invoke

    def recording(function: str, event: dict[str, Any]) -> Any:
        if "Records" in event:
            delivered.append((function, event))
        return invoke(function, event)

    runtime.pump.invoke = recording
    return delivered


_TIMESTAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$")


def scenario_ending_now(scenario: Path, directory: Path, before: timedelta = timedelta(hours=1)) -> Path:
    """A copy of `scenario` with every timestamp moved by one offset, so that its last event is
    `before` the real clock: for tests that replay a scenario and then use what it left on the
    real clock (`serve --scenario`), whatever today's date is."""
    lines = [json.loads(line) for line in scenario.read_text().splitlines() if line.strip()]
    offset = datetime.now(UTC) - before - parse_time(lines[-1]["at"])

    def shifted(value: Any) -> Any:
        if isinstance(value, str) and _TIMESTAMP.match(value):
            return format_time(parse_time(value) + offset)
        if isinstance(value, dict):
            return {key: shifted(item) for key, item in value.items()}
        if isinstance(value, list):
            return [shifted(item) for item in value]
        return value

    directory.mkdir(parents=True, exist_ok=True)
    copy = directory / scenario.name
    copy.write_text("".join(json.dumps(shifted(line)) + "\n" for line in lines))
    return copy
