"""Shared fixtures: the local stack from template.yaml, a bare moto table, a HUD stand-in."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from tests.support.aws import CONFIG, PLAIN_TABLE, TABLE, running
from tests.support.hud import grid
from trunkwatch_local.hud_server import HudServer
from trunkwatch_local.stack import LocalStack


@pytest.fixture
def aws() -> Iterator[dict[str, Any]]:
    """The local stack (`trunkwatch_local.stack`, as the runtime builds it) on moto's table,
    named for the tests: the template's table, its topic captured by SQS (`queue`), the
    configuration CONFIG; `clock` is the simulated clock its handlers run on (tests set it)."""
    stack = LocalStack(name=TABLE, credentials="testing", store="dynamodb")
    # The tests set these themselves where they need them.
    unset: dict[str, str | None] = dict.fromkeys(
        (
            "RULE_DEFAULTS",
            "DASHBOARD_URL",
            "API_TOKENS_PARAMETER",
            "WEBHOOK_SECRET_PARAMETER",
            "BUILDKITE_WEBHOOK_TOKEN_PARAMETER",
            "POWERTOOLS_LOG_LEVEL",
        )
    )
    with stack.start(json.dumps(CONFIG), {"POWERTOOLS_TRACE_DISABLED": "true", **unset}), running(stack):
        yield {
            "table": TABLE,
            "topic": stack.topic_arn,
            "queue": stack.capture_url,
            "storage": stack.storage(),
            "stack": stack,
            "clock": stack.clock,
        }


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


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests marked `long` first, the longest (`minutes=`) first: handed out last they would
    leave one worker running alone at the end."""

    def minutes(item: pytest.Item) -> float:
        marker = item.get_closest_marker("long")
        return 0 if marker is None else float(marker.kwargs.get("minutes", 1))

    items.sort(key=minutes, reverse=True)
