"""The local runtime: moto's AWS emulation in this process with the template's table, topic
and queue, and the real handlers invoked in-process the way Lambda invokes them.

moto runs in-process (`mock_aws`): every boto3/botocore client the handlers make is answered
by moto's backends without HTTP, which at PyTorch scale is half of the time a moto server on
127.0.0.1 costs. `trunkwatch_local.emulator` takes the rest of moto's overhead off the reads
the pipeline repeats most (see there)."""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import importlib.util
import json
import logging
import os
import secrets
import sys
import threading
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from types import ModuleType
from typing import Any

import boto3
from aws_lambda_powertools import Metrics
from aws_lambda_powertools.utilities import parameters

from trunkwatch.domain import clock
from trunkwatch.domain.clock import format_time
from trunkwatch.domain.config import ConfigError, Deployment, to_json
from trunkwatch.storage.records import GROUP_WINDOW
from trunkwatch_local import idempotency_clock, verified
from trunkwatch_local.chaos import Chaos, InvocationDied
from trunkwatch_local.emulator import emulation, release_stream
from trunkwatch_local.function_url import function_url_event
from trunkwatch_local.pump import StreamPump
from trunkwatch_local.schedule import period_seconds
from trunkwatch_local.template import find_template
from trunkwatch_local.wiring import Wiring, read_wiring

REGION = "us-east-1"
ACCOUNT = "123456789012"  # moto's fixed example account
NAME = "trunkwatch-local"


# What a function URL answers for a function that failed.
DIED_ANSWER = {"statusCode": 502, "body": "Internal Server Error"}


# Schedule ticks a crash-injected replay runs after the last crash: enough for a tick left
# open to be settled by the sweep (app/sweep.SETTLE_BOUND) and the notification after it.
RECOVERY_TICKS = 4


class InvocationFailed(RuntimeError):
    """A handler's invocation ended without an answer (its container died)."""


@dataclass
class LambdaContext:
    """The attributes Powertools reads from Lambda's context object."""

    function_name: str
    aws_request_id: str
    memory_limit_in_mb: int = 256
    invoked_function_arn: str = ""

    def get_remaining_time_in_millis(self) -> int:
        return 60_000


@dataclass
class Published:
    at: datetime
    subject: str
    attributes: dict[str, str]
    message: dict[str, Any]
    email: str = ""  # the body an email subscriber receives

    def as_json(self) -> dict[str, Any]:
        return {
            "at": format_time(self.at).replace(".000Z", "Z"),
            "subject": self.subject,
            "attributes": self.attributes,
            "message": self.message,
            "email": self.email,
        }


class LocalRuntime:
    def __init__(
        self,
        template: Path | None = None,
        webhook_secret: str | None = None,
        chaos: Chaos | None = None,
        extra_ticks: Iterable[datetime] = (),
    ) -> None:
        self.template = template or find_template()
        self.extra_ticks = sorted(extra_ticks)  # schedule ticks between a replay's events
        self.chaos = chaos  # kills invocations at AWS calls (`trunkwatch replay --chaos`)
        self._chaos_installed: Any = None
        self.dropped_schedule_events = 0  # scheduled invocations that died (no retries)
        self.failed_deliveries = 0  # webhook invocations that died (GitHub does not redeliver)
        self._crashable: set[str] = set()  # logical ids; set as the handlers load
        self._crashes_recovered = 0  # crashes the schedule's recovery ticks have run after
        self.schedule_period = timedelta(minutes=1)  # the deployment's, once started
        self.wiring: Wiring = read_wiring(self.template)
        self._emulation: Any = None  # moto's mock while started; its patches otherwise off
        self._idempotency_clock: Any = None  # Powertools' idempotency on `clock` while started
        self._environ_before: dict[str, str] | None = None
        self.modules: dict[str, ModuleType] = {}
        self.names: dict[str, str] = {}  # functions/<name> folder -> logical id
        # What GitHub signs deliveries with here: the caller's, else random per run; held
        # only in memory, never printed.
        self.webhook_secret = webhook_secret or secrets.token_hex(20)
        # Schedule ticks and webhook deliveries (serve takes them from two threads) run one
        # at a time, each with the stream records it causes.
        self.lock = threading.RLock()

    # --- lifecycle -------------------------------------------------------------------
    def start(self, deployment: Deployment, api_url: str | None = None) -> LocalRuntime:
        """Create the template's resources, set the functions' environment and load their
        handlers (each resolves its environment as it loads, as in a new Lambda container).
        `api_url` is where the local API is served (the deployed notifier's API_URL).
        The process's environment is the functions' while the runtime runs; `stop` puts back
        what it was."""
        verified.check()
        self.schedule_period = timedelta(seconds=period_seconds(deployment.schedule))
        self._environ_before = dict(os.environ)
        os.environ.update(
            AWS_ACCESS_KEY_ID="local",
            AWS_SECRET_ACCESS_KEY="local",  # noqa: S106 - moto accepts any credentials
            AWS_DEFAULT_REGION=REGION,
            AWS_REGION=REGION,
        )
        os.environ.pop("AWS_ENDPOINT_URL", None)  # clients go to moto's in-process backends
        self._emulation = emulation()
        self._emulation.__enter__()  # starts with an empty account (moto keeps state per process)
        if self.chaos is not None:
            self._chaos_installed = self.chaos.installed()
            self._chaos_installed.__enter__()
        self._idempotency_clock = idempotency_clock.simulated(clock.now)
        self._idempotency_clock.__enter__()
        _forget_aws_clients()
        self.dynamodb = boto3.client("dynamodb")
        self.sqs = boto3.client("sqs")
        self.sns = boto3.client("sns")
        refs = self._create_resources(deployment)
        for name, value in self.wiring.environment.items():
            resolved = self.wiring.resolve(value, refs)
            if resolved is not None:
                os.environ[name] = str(resolved)
        if api_url is None:
            os.environ.pop("API_URL", None)
        else:
            os.environ["API_URL"] = api_url
        # Locally stdout carries results: logs (and EMF metrics) only when asked for.
        level = os.environ.get("TRUNKWATCH_LOG_LEVEL", "WARNING").upper()
        os.environ.update(
            POWERTOOLS_TRACE_DISABLED="true",
            POWERTOOLS_LOG_LEVEL=level,
            POWERTOOLS_METRICS_DISABLED="false" if level in ("DEBUG", "INFO") else "true",
        )
        secret_name = os.environ.get("WEBHOOK_SECRET_NAME")
        if secret_name:
            boto3.client("secretsmanager").create_secret(Name=secret_name, SecretString=self.webhook_secret)
        self._load_handlers()
        stream_arn = self.dynamodb.describe_table(TableName=refs["Table"])["Table"]["LatestStreamArn"]
        self.pump = StreamPump(
            boto3.client("dynamodbstreams"),
            self.sqs,
            stream_arn,
            self.dlq_url,
            REGION,
            self.wiring.streams,
            self.invoke,
            release_stream,
        )
        return self

    def stop(self) -> None:
        if self._environ_before is not None:
            os.environ.clear()
            os.environ.update(self._environ_before)
            self._environ_before = None
        if self._chaos_installed is not None:
            assert self.chaos is not None
            self.chaos.stats.stream_retries = self.pump.stats.retries
            self.chaos.stats.dead_lettered = self.pump.stats.dead_lettered
            self.chaos.stats.dropped_schedule_events = self.dropped_schedule_events
            self.chaos.stats.failed_deliveries = self.failed_deliveries
            self._chaos_installed.__exit__(None, None, None)
            self._chaos_installed = None
        if self._idempotency_clock is not None:
            self._idempotency_clock.__exit__(None, None, None)
            self._idempotency_clock = None
        if self._emulation is not None:
            self._emulation.__exit__(None, None, None)  # and leaves the account empty
            self._emulation = None
            _forget_aws_clients()

    def __enter__(self) -> LocalRuntime:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _create_resources(self, deployment: Deployment) -> dict[str, str]:
        table = self.wiring.table
        self.dynamodb.create_table(
            TableName=NAME,  # the template leaves the name to CloudFormation
            KeySchema=table["KeySchema"],
            AttributeDefinitions=table["AttributeDefinitions"],
            BillingMode=table.get("BillingMode", "PAY_PER_REQUEST"),
            StreamSpecification={"StreamEnabled": True, **table["StreamSpecification"]},
        )
        ttl = table.get("TimeToLiveSpecification")
        if ttl:
            self.dynamodb.update_time_to_live(TableName=NAME, TimeToLiveSpecification=ttl)
        topic_arn = self.sns.create_topic(Name=f"{NAME}-alerts")["TopicArn"]
        self.dlq_url = self.sqs.create_queue(QueueName=f"{NAME}-dlq")["QueueUrl"]
        # SNS is captured through an SQS subscription, like any subscriber would see it.
        self.capture_url = self.sqs.create_queue(QueueName=f"{NAME}-capture")["QueueUrl"]
        capture_arn = self.sqs.get_queue_attributes(QueueUrl=self.capture_url, AttributeNames=["QueueArn"])[
            "Attributes"
        ]["QueueArn"]
        self.sns.subscribe(TopicArn=topic_arn, Protocol="sqs", Endpoint=capture_arn)
        # An email subscriber too. moto records email subscriptions but sends no mail and keeps
        # no per-protocol copy, so `published` reads the message exactly as Publish received it
        # (moto's record of the topic's notifications) and resolves it for this subscription
        # with moto's own per-protocol rule (the `email` key, else `default`), the rule SNS
        # applies. The email text is never re-rendered here from the alert.
        self.email_subscription = self.sns.subscribe(
            TopicArn=topic_arn,
            Protocol="email",
            Endpoint="oncall@example.invalid",
            ReturnSubscriptionArn=True,
        )["SubscriptionArn"]
        self.topic_arn = topic_arn
        config_name = f"/{NAME}/config"
        self.config_parameter = config_name
        self.configure(deployment)
        return {
            "Table": NAME,
            "Table.Arn": f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/{NAME}",
            "AlertTopic": topic_arn,
            "ConfigParameter": config_name,
            "Dashboard": NAME,
            "Api": "local",
            "AWS::Region": REGION,
            "AWS::AccountId": ACCOUNT,
            "AWS::StackName": NAME,
            "AWS::URLSuffix": "amazonaws.com",
            "AWS::Partition": "aws",
        }

    def configure(self, deployment: Deployment) -> None:
        """Store the configuration where the deployed functions read it (SSM)."""
        boto3.client("ssm").put_parameter(
            Name=self.config_parameter, Type="String", Value=to_json(deployment), Overwrite=True
        )
        parameters.clear_caches()

    def _load_handlers(self) -> None:
        for logical_id, path in self.wiring.functions.items():
            if not path.exists():
                raise ConfigError(f"{self.template}: {logical_id}'s handler {path} does not exist")
            name = path.parent.name
            spec = importlib.util.spec_from_file_location(f"trunkwatch_function_{name}", path)
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            self.modules[logical_id] = module
            self.names[name] = logical_id
        # Where crashes are injected: what the schedule, the streams and GitHub invoke. The
        # API's callers (people, amtool) see its 5xx and try again.
        self._crashable = {*self.wiring.schedules, *(source.function for source in self.wiring.streams)}
        self._crashable.add(self.names.get("webhook", "webhook"))
        # Powertools logs to stdout in Lambda; locally stdout carries the results.
        for handler in logging.getLogger(os.environ.get("POWERTOOLS_SERVICE_NAME", "trunkwatch")).handlers:
            if isinstance(handler, logging.StreamHandler):
                handler.setStream(sys.__stderr__ or sys.stderr)  # not a test-captured stream

    # --- invoking ------------------------------------------------------------------------
    def invoke(self, function: str, event: dict[str, Any]) -> Any:
        logical_id = self.names.get(function, function)
        context = LambdaContext(
            function_name=logical_id,
            aws_request_id=str(uuid.uuid4()),
            invoked_function_arn=f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{logical_id}",
        )
        dying = (
            self.chaos.invocation(logical_id)
            if self.chaos and logical_id in self._crashable
            else contextlib.nullcontext()
        )
        try:
            with contextlib.redirect_stdout(sys.stderr), dying:
                return self.modules[logical_id].lambda_handler(event, context)
        except InvocationDied as died:
            raise InvocationFailed(str(died)) from None
        finally:
            if os.environ.get("POWERTOOLS_METRICS_DISABLED") == "true":
                # Disabled metrics are never flushed, and Powertools keeps them (one set shared
                # by every Metrics instance): clear them per invocation as a flush would, or a
                # long run grows them until a metric's 100 values force a flush.
                Metrics().clear_metrics()

    def ticks_between(self, after: datetime, before: datetime | None) -> Iterator[datetime]:
        """Schedule ticks between two replay events (`before` None: after the last one): the
        `extra_ticks` asked for, and under crash injection the schedule's ticks while
        invocations die and RECOVERY_TICKS more. Deployed, the schedule fires every period,
        and its sweeps settle a tick left open and send what a dead invocation left unsent;
        without crashes a replay ticks at its events only. Each tick's time is yielded after
        it ran (and kept in `chaos.stats.recovery_ticks`, so a run without crashes can tick at
        the same times)."""
        for at in self.extra_ticks:
            if after < at and (before is None or at < before):
                self.tick(at)
                yield at
        if self.chaos is None:
            return
        quiet = 0 if len(self.chaos.stats.crashes) > self._crashes_recovered else RECOVERY_TICKS
        at = after
        while quiet < RECOVERY_TICKS:
            at += self.schedule_period
            if before is not None and at >= before:
                break
            crashes = len(self.chaos.stats.crashes)
            self.tick(at)
            self.chaos.stats.recovery_ticks.append(at)
            quiet = 0 if len(self.chaos.stats.crashes) > crashes else quiet + 1
            yield at
        self._crashes_recovered = len(self.chaos.stats.crashes)

    def scheduled_event(self, function: str) -> dict[str, Any]:
        return scheduled_event(f"{NAME}-{function}")

    def tick(self, at: datetime) -> Any:
        """One schedule tick at `at`: every function the template schedules, in template
        order (ingest polls, then the evaluator sweeps), each followed by the streams it
        causes (evaluation, notification). Returns the first (ingest's) result."""
        results = []
        with self.lock, clock.frozen(at):
            for logical_id in self.wiring.schedules:
                try:
                    results.append(self.invoke(logical_id, scheduled_event(f"{NAME}-{logical_id}")))
                except InvocationFailed:
                    # An asynchronous invocation the template retries 0 times: the event is gone;
                    # what the invocation wrote before it died still flows down the stream.
                    self.dropped_schedule_events += 1
                    results.append(None)
                self.pump.drain()
        return results[0] if results else None

    def deliver(
        self, event: str, body: bytes, at: datetime, signature: str | None = None, delivery: str | None = None
    ) -> dict[str, Any]:
        """A GitHub webhook delivery at `at` through the webhook function's URL, signed with
        the runtime's secret unless `signature` is given. The stream records it causes wait
        for `settle_deliveries`, as concurrent deliveries of one instant would."""
        headers = {
            "Content-Type": "application/json",
            "User-Agent": "GitHub-Hookshot/local",
            "X-GitHub-Event": event,
            "X-GitHub-Delivery": delivery or str(uuid.uuid4()),
            "X-Hub-Signature-256": signature if signature is not None else self.sign(body),
        }
        with self.lock, clock.frozen(at):
            return self._webhook(function_url_event("POST", "/", headers, body))

    def receive(self, headers: dict[str, str], body: bytes) -> dict[str, Any]:
        """A delivery from GitHub (or `gh webhook forward`) on the real clock: the webhook
        function, then the stream records it causes (evaluation, and the notifier once its
        group settles)."""
        with self.lock:
            answer = self._webhook(function_url_event("POST", "/", headers, body))
            self.pump.drain()
            return answer

    def _webhook(self, event: dict[str, Any]) -> dict[str, Any]:
        try:
            return dict(self.invoke("webhook", event))
        except InvocationFailed:
            # What a function URL answers when its function fails; GitHub does not redeliver.
            self.failed_deliveries += 1
            return dict(DIED_ANSWER)

    def delivery_died(self, answer: dict[str, Any]) -> bool:
        """Whether `answer` is that of a webhook invocation crash injection killed."""
        return self.chaos is not None and answer == DIED_ANSWER

    def settle_deliveries(self, at: datetime) -> None:
        """Evaluate what the deliveries of `at` wrote, then, once their second has closed, let
        the delivery that opened its group settle it (`storage.ticks`) and notify."""
        with self.lock:
            with clock.frozen(at):
                self.pump.drain()
            with clock.frozen(at + GROUP_WINDOW):
                clock.run_due()
                self.pump.drain()

    def sign(self, body: bytes) -> str:
        return "sha256=" + hmac.new(self.webhook_secret.encode(), body, hashlib.sha256).hexdigest()

    def published(self, at: datetime) -> list[Published]:
        """Messages the topic delivered since the last call, oldest first."""
        out: list[Published] = []
        sent = self._sent_notifications()
        while True:
            batch = self.sqs.receive_message(
                QueueUrl=self.capture_url, MaxNumberOfMessages=10, MessageAttributeNames=["All"]
            )
            messages = batch.get("Messages", [])
            if not messages:
                return out
            for raw in messages:
                envelope = json.loads(raw["Body"])
                attributes = {k: v["Value"] for k, v in (envelope.get("MessageAttributes") or {}).items()}
                out.append(
                    Published(
                        at,
                        envelope.get("Subject", ""),
                        attributes,
                        json.loads(envelope["Message"]),
                        self._email_body(sent.get(envelope["MessageId"]), envelope["Message"]),
                    )
                )
                self.sqs.delete_message(QueueUrl=self.capture_url, ReceiptHandle=raw["ReceiptHandle"])

    def _sent_notifications(self) -> dict[str, str]:
        """MessageId -> Message as published to the topic (moto's in-process record)."""
        from moto.sns.models import sns_backends

        topic = sns_backends[ACCOUNT][REGION].topics.get(self.topic_arn)
        return {entry[0]: entry[1] for entry in (topic.sent_notifications if topic else [])}

    def _email_body(self, published: str | None, delivered_to_sqs: str) -> str:
        """What SNS delivers to the email subscription for this published message."""
        if published is None or published == delivered_to_sqs:
            return delivered_to_sqs  # not a MessageStructure=json publish: every protocol gets it
        from moto.sns.models import sns_backends

        subscription = sns_backends[ACCOUNT][REGION].subscriptions[self.email_subscription]
        return str(subscription._parse_message_structure(published, "email"))

    def dead_letters(self) -> list[dict[str, Any]]:
        batch = self.sqs.receive_message(QueueUrl=self.dlq_url, MaxNumberOfMessages=10)
        return [json.loads(m["Body"]) for m in batch.get("Messages", [])]


def scheduled_event(rule: str) -> dict[str, Any]:
    """The EventBridge Scheduled Event a schedule delivers, at the current clock."""
    return {
        "version": "0",
        "id": str(uuid.uuid4()),
        "detail-type": "Scheduled Event",
        "source": "aws.events",
        "account": ACCOUNT,
        "time": clock.now().strftime("%Y-%m-%dT%H:%M:%SZ"),
        "region": REGION,
        "resources": [f"arn:aws:events:{REGION}:{ACCOUNT}:rule/{rule}"],
        "detail": {},
    }


def _forget_aws_clients() -> None:
    """Powertools keeps its parameter providers (values and clients) per process; clients
    made for one runtime's emulator endpoint must not outlive it."""
    parameters.clear_caches()


@contextlib.contextmanager
def running(deployment: Deployment, template: Path | None = None) -> Iterator[LocalRuntime]:
    runtime = LocalRuntime(template)
    try:
        yield runtime.start(deployment)
    finally:
        runtime.stop()
