"""The template's stack on moto in this process: the one builder the local runtime, the
benchmarks and the tests share.

The functions' items live in the in-memory store (`store="memory"`, its stream in
`memory_stream`) or, with `store="dynamodb"`, in moto's table and its stream. Every handler
of a stack runs on one `SimulatedClock`, which whoever drives the stack moves.
"""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import os
import shutil
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from types import ModuleType
from typing import IO, TYPE_CHECKING, Any

import boto3
from aws_lambda_powertools.utilities import parameters
from moto import mock_aws

from trunkwatch.domain.clock import SimulatedClock
from trunkwatch.domain.config import ConfigError

# Imported before the stack makes any client: every botocore session joins its hooks.
from trunkwatch_local import aws_calls  # noqa: F401
from trunkwatch_local.memory_stream import MemoryStream, streamed_storage
from trunkwatch_local.pump import Invoke, QueuePump, StreamPump
from trunkwatch_local.template import find_template
from trunkwatch_local.wiring import Wiring, read_wiring

if TYPE_CHECKING:
    from trunkwatch.storage.port import Storage

REGION = "us-east-1"
ACCOUNT = "123456789012"  # moto's fixed example account
NAME = "trunkwatch-local"
STORES = ("memory", "dynamodb")


class LocalStack:
    """The template's resources on moto in this process, and the functions' handlers."""

    def __init__(
        self,
        template: Path | None = None,
        *,
        name: str = NAME,
        clock: SimulatedClock | None = None,
        credentials: str = "local",
        store: str = "memory",
        wrap_storage: Callable[[Storage], Storage] | None = None,
    ) -> None:
        if store not in STORES:
            raise ConfigError(f"unknown store {store!r} (one of {', '.join(STORES)})")
        self.store = store
        # What the handlers' storage passes through (crash injection, counting), if anything.
        self.wrap_storage = wrap_storage
        self._handlers_storage: Storage | None = None
        self.template = template or find_template()
        self.wiring: Wiring = read_wiring(self.template)
        self.name = name
        self.clock = clock or SimulatedClock()
        self.credentials = credentials
        self.modules: dict[str, ModuleType] = {}  # logical id -> loaded handler module
        self.names = {path.parent.name: logical_id for logical_id, path in self.wiring.functions.items()}
        self.refs: dict[str, str] = {}
        self.exits = contextlib.ExitStack()

    # --- lifecycle -------------------------------------------------------------------
    def start(
        self,
        config: str,
        environ: Mapping[str, str | None] | None = None,
        webhook_secret: str | None = None,
        buildkite_token: str | None = None,
    ) -> LocalStack:
        """Create the resources, write `config` where the functions' CONFIG_FILE names it, set
        the functions' environment, then `environ` over it (None removes a variable), and
        put the webhook secret and token, when given, into their SSM parameters."""
        try:
            self.exits.callback(_restore_environ, dict(os.environ))
            os.environ.update(
                AWS_ACCESS_KEY_ID=self.credentials,
                AWS_SECRET_ACCESS_KEY=self.credentials,  # moto accepts any credentials
                AWS_DEFAULT_REGION=REGION,
                AWS_REGION=REGION,
            )
            for name in ("AWS_ENDPOINT_URL", "AWS_PROFILE"):
                os.environ.pop(name, None)  # clients go to moto's in-process backends
            self.exits.enter_context(mock_aws())  # from an empty account
            # Powertools keeps its parameter providers (values and clients) per process.
            self.exits.callback(parameters.clear_caches)
            parameters.clear_caches()
            self.refs = self._create_resources()
            for name, value in self.wiring.environment.items():
                resolved = self.wiring.resolve(value, self.refs)
                if resolved is not None:
                    os.environ[name] = str(resolved)
            # The layers' /opt: the configuration file where CONFIG_FILE places it under /opt.
            opt = Path(tempfile.mkdtemp(prefix=f"{self.name}-opt-"))
            self.exits.callback(shutil.rmtree, opt, ignore_errors=True)
            deployed = Path(os.environ.get("CONFIG_FILE", ""))
            if not deployed.is_relative_to("/opt"):
                raise ConfigError(f"{self.template}: CONFIG_FILE {deployed} is not in a layer (under /opt)")
            self.config_file = opt / deployed.relative_to("/opt")
            self.config_file.parent.mkdir(parents=True, exist_ok=True)
            os.environ["CONFIG_FILE"] = str(self.config_file)
            self.configure(config)
            for name, given in (environ or {}).items():
                if given is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = given
            secrets = {
                "WEBHOOK_SECRET_PARAMETER": webhook_secret,
                "BUILDKITE_WEBHOOK_TOKEN_PARAMETER": buildkite_token,
            }
            for variable, value in secrets.items():  # the parameter each variable names
                parameter = os.environ.get(variable)
                if parameter and value is not None:
                    boto3.client("ssm").put_parameter(Name=parameter, Type="SecureString", Value=value)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        self.exits.close()
        self.modules.clear()
        self._handlers_storage = None

    def __enter__(self) -> LocalStack:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _create_resources(self) -> dict[str, str]:
        table = self.wiring.table
        dynamodb, sqs, sns = boto3.client("dynamodb"), boto3.client("sqs"), boto3.client("sns")
        self.table_name = self.name  # the template leaves the name to CloudFormation
        streamed = (
            {}
            if self.store == "memory"
            else {"StreamSpecification": {"StreamEnabled": True, **table["StreamSpecification"]}}
        )
        # With the items in memory, the table the functions' environment names stays empty.
        description = dynamodb.create_table(
            TableName=self.table_name,
            KeySchema=table["KeySchema"],
            AttributeDefinitions=table["AttributeDefinitions"],
            BillingMode=table.get("BillingMode", "PAY_PER_REQUEST"),
            **streamed,
        )["TableDescription"]
        if self.store == "memory":
            self.stream_arn = f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/{self.table_name}/stream/memory"
            self.memory_stream = MemoryStream(self.stream_arn, self.clock)
            self.memory = streamed_storage(self.memory_stream)
        else:
            self.stream_arn = description["LatestStreamArn"]
        if ttl := table.get("TimeToLiveSpecification"):
            dynamodb.update_time_to_live(TableName=self.table_name, TimeToLiveSpecification=ttl)
        self.topic_arn: str = sns.create_topic(Name=f"{self.name}-alerts")["TopicArn"]
        self.dlq_url: str = sqs.create_queue(QueueName=f"{self.name}-dlq")["QueueUrl"]
        # SNS is captured through an SQS subscription, like any subscriber would see it.
        self.capture_url: str = sqs.create_queue(QueueName=f"{self.name}-capture")["QueueUrl"]
        capture_arn = sqs.get_queue_attributes(QueueUrl=self.capture_url, AttributeNames=["QueueArn"])[
            "Attributes"
        ]["QueueArn"]
        sns.subscribe(TopicArn=self.topic_arn, Protocol="sqs", Endpoint=capture_arn)
        # An email subscriber too (moto sends nothing; LocalRuntime.published tells what it would get).
        sns.subscribe(TopicArn=self.topic_arn, Protocol="email", Endpoint="oncall@example.invalid")
        refs: dict[str, str] = {}
        self.queue_urls: dict[str, str] = {}  # the queues the template maps to functions
        for source in self.wiring.queues:
            name = f"{self.name}-{source.queue}" + (".fifo" if source.fifo else "")
            attributes = {
                "MessageRetentionPeriod": str(source.retention_s),
                "VisibilityTimeout": str(source.visibility_timeout_s),
            }
            if source.fifo:
                attributes["FifoQueue"] = "true"
            url = refs[source.queue] = sqs.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"]
            self.queue_urls[source.queue] = url
            refs[f"{source.queue}.Arn"] = f"arn:aws:sqs:{REGION}:{ACCOUNT}:{name}"
            refs[f"{source.queue}.QueueName"] = name
        return {
            **refs,
            "Table": self.table_name,
            "Table.Arn": f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/{self.table_name}",
            "AlertTopic": self.topic_arn,
            "Dashboard": self.name,
            "Api": "local",
            "AWS::Region": REGION,
            "AWS::AccountId": ACCOUNT,
            "AWS::StackName": self.name,
            "AWS::URLSuffix": "amazonaws.com",
            "AWS::Partition": "aws",
        }

    def configure(self, config: str) -> None:
        """Write the configuration document where the functions read it (their CONFIG_FILE)."""
        self.config_file.write_text(config, encoding="utf-8")

    # --- the functions ------------------------------------------------------------------
    def logical_id(self, function: str) -> str:
        """A function's logical id, from itself or its functions/<folder> name."""
        return self.names.get(function, function)

    def handler(self, function: str, cold: bool = False) -> ModuleType:
        """The handler module of `function` (a logical id or its folder), loaded at the first
        call (or, `cold`, again) as a new Lambda container loads it."""
        logical_id = self.logical_id(function)
        module = self.modules.get(logical_id)
        if module is None or cold:
            path = self.wiring.functions.get(logical_id)
            if path is None:
                raise ConfigError(f"{self.template}: no function {function!r}")
            if not path.exists():
                raise ConfigError(f"{self.template}: {logical_id}'s handler {path} does not exist")
            module = load_handler(path)
            # The in-memory store, or the stack's storage through `wrap_storage`; None: the
            # handler opens the table its environment names, as deployed.
            if self._handlers_storage is None and (self.store == "memory" or self.wrap_storage):
                self._handlers_storage = (self.wrap_storage or (lambda storage: storage))(self.storage())
            module.edge.use(clock=self.clock, storage=self._handlers_storage)
            self.modules[logical_id] = module
        return module

    def load_handlers(self, log_stream: IO[str] | None = None) -> None:
        """Load every function's handler now; Powertools' logs (stdout in Lambda) go to
        `log_stream` while the stack runs (locally stdout carries results)."""
        for logical_id in self.wiring.functions:
            self.handler(logical_id)
        if log_stream is None:
            return
        for handler in logging.getLogger(os.environ.get("POWERTOOLS_SERVICE_NAME", "trunkwatch")).handlers:
            if isinstance(handler, logging.StreamHandler):
                previous = _set_stream(handler, log_stream)
                if previous is not None and previous is not log_stream:
                    self.exits.callback(_set_stream, handler, previous)

    def pump(self, invoke: Invoke) -> StreamPump:
        """Lambda's stream event source mappings of the template, invoking through `invoke`;
        the in-memory store's stream stands in for DynamoDB Streams."""
        if self.store == "memory":
            streams: Any = self.memory_stream
            release = self.memory_stream.release
        else:
            streams, release = boto3.client("dynamodbstreams"), None
        return StreamPump(
            streams,
            boto3.client("sqs"),
            self.stream_arn,
            self.dlq_url,
            REGION,
            self.wiring.streams,
            invoke,
            release,
        )

    def queue_pump(self, invoke: Invoke) -> QueuePump:
        """Lambda's SQS event source mappings of the template, invoking through `invoke`."""
        return QueuePump(boto3.client("sqs"), self.wiring.queues, self.queue_urls, invoke)

    def storage(self) -> Storage:
        """The storage the handlers use (for reads and use-case calls beside them)."""
        from trunkwatch.storage.dynamodb import open_table

        if self.store == "memory":
            return self.memory
        return open_table(self.table_name, REGION)


def load_handler(path: Path) -> ModuleType:
    """A handler module loaded from its file (every handler file is named app.py: the module
    is named after its folder)."""
    spec = importlib.util.spec_from_file_location(f"trunkwatch_function_{path.parent.name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _restore_environ(before: dict[str, str]) -> None:
    os.environ.clear()
    os.environ.update(before)


def _set_stream(handler: logging.StreamHandler[IO[str]], stream: IO[str]) -> IO[str] | None:
    """`handler.setStream`, which flushes the stream it replaces: one closed meanwhile (a test's
    captured output, say) is replaced without a flush."""
    previous = handler.stream
    if getattr(previous, "closed", False):
        handler.stream = stream
        return previous
    return handler.setStream(stream)
