"""moto-backed AWS for the tests: the names the `aws` and `plain_table` fixtures (conftest)
create, and reading back what the code under test wrote."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import boto3

from trunkwatch_local.stack import LocalStack
from trunkwatch_local.template import find_template
from trunkwatch_local.wiring import read_wiring

TABLE = "trunkwatch-test"
CONFIG = {"trunks": [{"repo": "pytorch/pytorch", "branch": "main"}]}


def template_environment() -> dict[str, str]:
    """The functions' literal environment from template.yaml (service name, namespace...)."""
    variables = read_wiring(find_template()).environment
    return {name: value for name, value in variables.items() if isinstance(value, str)}


def table_items(kind: str | None = None) -> list[dict[str, Any]]:
    items = boto3.client("dynamodb").scan(TableName=os.environ["TABLE_NAME"])["Items"]
    return [i for i in items if kind is None or i.get("kind", {}).get("S") == kind]


PLAIN_TABLE = "plain"

# The stack the `aws` fixture runs for the current test (moto's account is per process too).
_running: list[LocalStack] = []


@contextlib.contextmanager
def running(stack: LocalStack) -> Iterator[LocalStack]:
    _running.append(stack)
    try:
        yield stack
    finally:
        _running.remove(stack)


def running_stack() -> LocalStack | None:
    """The stack of the `aws` fixture, while a test uses it."""
    return _running[-1] if _running else None


def set_clock(at: datetime) -> None:
    """Set the simulated clock the `aws` fixture's handlers run on."""
    stack = running_stack()
    assert stack is not None, "no stack: the test does not use the aws fixture"
    stack.clock.set(at)


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
