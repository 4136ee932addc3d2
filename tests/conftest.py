"""Shared fixtures: a moto-backed table created from template.yaml's own definition."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from trunkwatch import storage
from trunkwatch_local.template import find_template
from trunkwatch_local.wiring import read_wiring

TABLE = "trunkwatch-test"


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
        storage.bind(TABLE, "us-east-1", None)
        sns, sqs = boto3.client("sns"), boto3.client("sqs")
        topic = sns.create_topic(Name="alerts")["TopicArn"]
        queue = sqs.create_queue(QueueName="capture")["QueueUrl"]
        arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=arn)
        monkeypatch.setenv("TOPIC_ARN", topic)
        yield {"table": TABLE, "topic": topic, "queue": queue}


def table_items(kind: str | None = None) -> list[dict[str, Any]]:
    items = boto3.client("dynamodb").scan(TableName=os.environ["TABLE_NAME"])["Items"]
    return [i for i in items if kind is None or i.get("kind", {}).get("S") == kind]
