"""Shared fixtures: a moto-backed table created from template.yaml's own definition."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from aws_lambda_powertools.utilities import parameters
from moto import mock_aws

from tests.support.aws import CONFIG, CONFIG_PARAMETER, PLAIN_TABLE, TABLE, template_environment
from tests.support.hud import grid
from trunkwatch.storage.dynamodb import open_table
from trunkwatch_local.hud_server import HudServer
from trunkwatch_local.template import find_template
from trunkwatch_local.wiring import read_wiring


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


@pytest.fixture
def healthy() -> Iterator[HudServer]:
    """A HUD stand-in on 127.0.0.1 serving support.hud's grid."""
    server = HudServer()
    server.serve(grid())
    yield server
    server.stop()
