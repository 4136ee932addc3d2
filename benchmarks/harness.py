"""The deployed functions on moto's in-process mock (`mock_aws`), metered.

What the local runtime builds, built here with the benchmark's own metering: the
template's table with its stream and TTL, the alert topic, a dead-letter queue and the
configuration parameter; the environment of template.yaml's Globals; the handlers loaded
from their files the way the local runtime loads them; stream batches delivered by the
local runtime's `StreamPump` with the template's FilterCriteria and batch sizes. Every
invocation runs under its function's label of the `Meter`.

Differences from Lambda: X-Ray tracing is off (no daemon); logs and metrics are produced
but discarded.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import logging
import os
import uuid
from pathlib import Path
from types import ModuleType
from typing import Any
from unittest import mock

import boto3
from aws_lambda_powertools.utilities import parameters
from moto import mock_aws
from moto.core import DEFAULT_ACCOUNT_ID

from benchmarks.usage import Meter, stored_by_kind
from trunkwatch.domain.config import Deployment, to_json
from trunkwatch.storage.dynamodb import open_table
from trunkwatch_local.emulator import fast_dynamodb
from trunkwatch_local.pump import StreamPump
from trunkwatch_local.runtime import LambdaContext, scheduled_event
from trunkwatch_local.template import find_template
from trunkwatch_local.wiring import read_wiring

REGION = "us-east-1"


class _Discard(io.StringIO):
    def write(self, text: str) -> int:
        return len(text)


DISCARD = _Discard()  # where the handlers' logs and metrics go


class InProcessAws:
    """Use as a context manager; `invoke` runs a handler, `drain` the stream's functions."""

    def __init__(self, deployment: Deployment, meter: Meter) -> None:
        self.deployment = deployment
        self.meter = meter
        self.wiring = read_wiring(find_template())
        # Unique names: a warm container's cached clients are keyed on them.
        self.name = f"trunkwatch-bench-{uuid.uuid4().hex[:8]}"
        self.modules: dict[str, ModuleType] = {}
        self.logical_ids: dict[str, str] = {}  # functions/<folder> -> logical id
        self._stack = contextlib.ExitStack()

    def __enter__(self) -> InProcessAws:
        try:
            self._start()
        except BaseException:
            self._stack.close()
            raise
        return self

    def _start(self) -> None:
        self._stack.enter_context(
            mock.patch.dict(
                os.environ,
                {
                    "AWS_ACCESS_KEY_ID": "bench",
                    "AWS_SECRET_ACCESS_KEY": "bench",
                    "AWS_DEFAULT_REGION": REGION,
                    "AWS_REGION": REGION,
                },
            )
        )
        os.environ.pop("AWS_ENDPOINT_URL", None)
        self._stack.enter_context(mock_aws())
        self._stack.enter_context(fast_dynamodb())
        parameters.clear_caches()
        refs = self._create_resources()
        for name, value in self.wiring.environment.items():
            resolved = self.wiring.resolve(value, refs)
            if resolved is not None:
                os.environ[name] = str(resolved)
        os.environ["POWERTOOLS_TRACE_DISABLED"] = "true"
        # The benchmarks' own reads and direct use-case calls go to the functions' table.
        self.storage = open_table(refs["Table"], REGION)
        self._load_handlers()
        self.pump = StreamPump(
            boto3.client("dynamodbstreams"),
            boto3.client("sqs"),
            self.stream_arn,
            self.dlq_url,
            REGION,
            self.wiring.streams,
            self.invoke,
        )

    def __exit__(self, *exc: object) -> None:
        self._stack.close()
        parameters.clear_caches()

    def _create_resources(self) -> dict[str, str]:
        table = self.wiring.table
        dynamodb = boto3.client("dynamodb")
        self.stream_arn = dynamodb.create_table(
            TableName=self.name,
            KeySchema=table["KeySchema"],
            AttributeDefinitions=table["AttributeDefinitions"],
            BillingMode=table.get("BillingMode", "PAY_PER_REQUEST"),
            StreamSpecification={"StreamEnabled": True, **table["StreamSpecification"]},
        )["TableDescription"]["LatestStreamArn"]
        if ttl := table.get("TimeToLiveSpecification"):
            dynamodb.update_time_to_live(TableName=self.name, TimeToLiveSpecification=ttl)
        self.topic_arn = boto3.client("sns").create_topic(Name=f"{self.name}-alerts")["TopicArn"]
        self.dlq_url = boto3.client("sqs").create_queue(QueueName=f"{self.name}-dlq")["QueueUrl"]
        parameter = f"/{self.name}/config"
        boto3.client("ssm").put_parameter(Name=parameter, Type="String", Value=to_json(self.deployment))
        return {
            "Table": self.name,
            "Table.Arn": f"arn:aws:dynamodb:{REGION}:{DEFAULT_ACCOUNT_ID}:table/{self.name}",
            "AlertTopic": self.topic_arn,
            "ConfigParameter": parameter,
            "Dashboard": self.name,
            "Api": "bench",
            "AWS::Region": REGION,
            "AWS::AccountId": DEFAULT_ACCOUNT_ID,
            "AWS::StackName": self.name,
            "AWS::URLSuffix": "amazonaws.com",
            "AWS::Partition": "aws",
        }

    def _load_handlers(self) -> None:
        for logical_id, path in self.wiring.functions.items():
            self.modules[path.parent.name] = load_handler(path)
            self.logical_ids[path.parent.name] = logical_id
        # Powertools logs to stdout; the benchmark's stdout is its report.
        for handler in logging.getLogger(os.environ.get("POWERTOOLS_SERVICE_NAME", "trunkwatch")).handlers:
            if isinstance(handler, logging.StreamHandler):
                previous = handler.setStream(DISCARD)
                if previous is not None:  # None: it wrote to DISCARD already
                    self._stack.callback(handler.setStream, previous)

    def invoke(self, function: str, event: dict[str, Any]) -> Any:
        """Invoke the handler of functions/<function> (or of a logical id) under its label."""
        folder = next((f for f, lid in self.logical_ids.items() if function in (f, lid)), function)
        context = LambdaContext(
            function_name=self.logical_ids[folder],
            aws_request_id=str(uuid.uuid4()),
            invoked_function_arn=f"arn:aws:lambda:{REGION}:{DEFAULT_ACCOUNT_ID}:function:{folder}",
        )
        handler = self.modules[folder].lambda_handler
        with contextlib.redirect_stdout(DISCARD):
            return self.meter.invoke(folder, lambda: handler(event, context))

    def scheduled_event(self) -> dict[str, Any]:
        return scheduled_event(self.name)

    def drain(self) -> None:
        """Deliver the stream's new records to their functions until it is quiet."""
        self.pump.drain()

    def skip_stream(self) -> None:
        """Move every stream mapping past the records written so far, unread (a table
        seeded before the measured part)."""
        streams = boto3.client("dynamodbstreams")
        for mapping in self.pump.mappings:
            for shard in mapping.iterators:
                mapping.iterators[shard] = streams.get_shard_iterator(
                    StreamArn=self.stream_arn, ShardId=shard, ShardIteratorType="LATEST"
                )["ShardIterator"]

    def stored(self) -> dict[str, tuple[int, int]]:
        """(items, bytes) the table holds now, per kind (see `usage.stored_by_kind`)."""
        return stored_by_kind(REGION, self.name)


def load_handler(path: Path) -> ModuleType:
    """A handler module loaded from its file, as the local runtime (and Lambda) loads it."""
    spec = importlib.util.spec_from_file_location(f"trunkwatch_function_{path.parent.name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
