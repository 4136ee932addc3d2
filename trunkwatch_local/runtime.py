"""The local runtime: the template's stack (`trunkwatch_local.stack`) on moto in this process
(no HTTP: at PyTorch scale half the time a moto server costs), its real handlers invoked the
way Lambda invokes them."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import json
import os
import secrets
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
from aws_lambda_powertools import Metrics

from trunkwatch.domain.clock import SimulatedClock, format_time
from trunkwatch.domain.config import Deployment, to_json
from trunkwatch.domain.digest import KIND as DIGEST_KIND
from trunkwatch.domain.ticks import GROUP_WINDOW
from trunkwatch.storage.port import Storage
from trunkwatch_local.chaos import Chaos, InvocationDied
from trunkwatch_local.pump import merged
from trunkwatch_local.schedule import period_seconds
from trunkwatch_local.stack import ACCOUNT, NAME, REGION, LocalStack
from trunkwatch_local.wiring import Wiring

# What a published message and an expected file's row are compared by.
SUMMARY_KEYS = ("at", "status", "alertname", "job", "priority", "team", "day")
# What a function URL answers for a function that failed.
DIED_ANSWER = {"statusCode": 502, "body": "Internal Server Error"}
# Schedule ticks after the last crash: enough for the sweep to settle a tick left open
# (app/sweep.SETTLE_BOUND) and notify after it.
RECOVERY_TICKS = 4
# Ticks at most after a replay's last event while receivers have messages due: half an hour.
DELIVERY_TICKS = 30


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

    @property
    def is_digest(self) -> bool:
        return is_digest(self.as_json())


def is_digest(message: dict[str, Any]) -> bool:
    """Whether a `Published.as_json()` is a daily digest (design.md §4.4): no alert has `kind`."""
    return bool(message["attributes"].get("kind") == DIGEST_KIND)


def summary_row(message: dict[str, Any]) -> dict[str, Any]:
    """A `Published.as_json()` as the expected files list it."""
    body = message["message"]
    if is_digest(message):
        return {
            "at": message["at"],
            "status": "digest",
            **{key: body[key] for key in ("repo", "branch", "day")},
        }
    labels = body["alerts"][0]["labels"]
    return {"at": message["at"], "status": body["status"], "job": labels.get("job"), **labels}


def expected_rows(replay_file: Path) -> list[dict[str, Any]] | None:
    """The rows of a replay file's `<name>.expected.jsonl`, if it has one."""
    expected = replay_file.with_name(replay_file.name.split(".jsonl")[0] + ".expected.jsonl")
    if not expected.is_file():
        return None
    return [json.loads(line) for line in expected.read_text().splitlines() if line.strip()]


def as_expected(rows: Iterable[dict[str, Any]]) -> Counter[tuple[Any, ...]]:
    """Rows as they are compared: by SUMMARY_KEYS, the messages of one time in any order."""
    return Counter(tuple(row.get(key) for key in SUMMARY_KEYS) for row in rows)


class LocalRuntime:
    """The stack with its event source mappings, on its simulated clock: every Lambda
    invocation passes through `invoke`."""

    def __init__(
        self,
        template: Path | None = None,
        webhook_secret: str | None = None,
        chaos: Chaos | None = None,
        clock: SimulatedClock | None = None,
        store: str = "memory",
        extra_ticks: Iterable[datetime] = (),
        wrap_storage: Callable[[Storage], Storage] | None = None,
        buildkite_token: str | None = None,
    ) -> None:
        # Crash injection kills at AWS calls; the in-memory store makes none, so its storage
        # is wrapped to kill at its calls (inside `wrap_storage`'s, if given).
        if chaos is not None and store == "memory":
            then = wrap_storage or (lambda storage: storage)
            wrap_storage = lambda storage: then(chaos.storage(storage))  # noqa: E731
        self.stack = LocalStack(template, clock=clock, store=store, wrap_storage=wrap_storage)
        self.clock = self.stack.clock  # what every handler of the runtime runs on
        self.extra_ticks = sorted(extra_ticks)  # schedule ticks between a replay's events
        self.chaos = chaos
        self._crashes_recovered = 0  # crashes the schedule's recovery ticks have run after
        self.schedule_period = timedelta(minutes=1)  # the deployment's, once started
        self.wiring: Wiring = self.stack.wiring
        # How often the deployed schedule polls (the dispatcher's schedule in the template).
        self.poll_period = timedelta(
            seconds=period_seconds(self.wiring.schedules[self.stack.logical_id("dispatcher")])
        )
        # Crashes hit what the schedule, the mappings and webhooks invoke; the API's callers
        # (people, amtool) see its 5xx and try again.
        self._crashable = {
            *self.wiring.schedules,
            *(source.function for source in self.wiring.streams),
            *(source.function for source in self.wiring.queues),
        }
        self._crashable.add(self.stack.logical_id("webhook"))
        # The webhooks' secret and token: the caller's, else random per run, never printed.
        self.webhook_secret = webhook_secret or secrets.token_hex(20)
        self.buildkite_token = buildkite_token or secrets.token_hex(20)
        # Ticks and deliveries (serve's two threads) run one at a time, with what they cause.
        self.lock = threading.RLock()
        self._environments: dict[str, ThreadPoolExecutor] = {}

    # --- lifecycle -------------------------------------------------------------------
    def start(self, deployment: Deployment, api_url: str | None = None) -> LocalRuntime:
        """Start the stack with `deployment` and load the handlers; `api_url` is the local
        API's (the notifier's API_URL). The process's environment is the functions' until
        `stop`."""
        self.schedule_period = timedelta(seconds=period_seconds(deployment.schedule))
        # Locally stdout carries results: logs (and EMF metrics) only when asked for.
        level = os.environ.get("TRUNKWATCH_LOG_LEVEL", "WARNING").upper()
        self.stack.start(
            to_json(deployment),
            {
                "API_URL": api_url,
                "POWERTOOLS_TRACE_DISABLED": "true",
                "POWERTOOLS_LOG_LEVEL": level,
                "POWERTOOLS_METRICS_DISABLED": "false" if level in ("DEBUG", "INFO") else "true",
            },
            webhook_secret=self.webhook_secret,
            buildkite_token=self.buildkite_token,
        )
        if self.chaos is not None:
            self.stack.exits.enter_context(self.chaos.installed())
        self.sqs = boto3.client("sqs")
        self.dynamodb = boto3.client("dynamodb")
        # Powertools logs to stdout in Lambda; locally stdout carries the results.
        self.stack.load_handlers(log_stream=sys.__stderr__ or sys.stderr)  # not a test-captured stream
        self.pump = self.stack.pump(self.invoke)
        self.queues = self.stack.queue_pump(self.invoke)
        return self

    def stop(self) -> None:
        """Undo `start`, however far it got."""
        pump = getattr(self, "pump", None)  # none if `start` failed before it
        if self.chaos is not None and pump is not None:
            self.chaos.stats.stream_retries = pump.stats.retries
            self.chaos.stats.dead_lettered = pump.stats.dead_lettered
        for environment in self._environments.values():
            environment.shutdown()
        self._environments.clear()
        self.stack.stop()  # stops listening, empties the account, puts the environment back

    def __enter__(self) -> LocalRuntime:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def configure(self, deployment: Deployment) -> None:
        """Write the configuration where the functions read it (their CONFIG_FILE)."""
        self.stack.configure(to_json(deployment))

    # --- invoking ------------------------------------------------------------------------
    def invoke(self, function: str, event: dict[str, Any]) -> Any:
        logical_id = self.stack.logical_id(function)
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
        handler = self.stack.handler(logical_id).lambda_handler

        def run() -> Any:
            with contextlib.redirect_stdout(sys.stderr), dying:
                return handler(event, context)

        try:
            return self._environment(logical_id).submit(run).result()
        except InvocationDied as died:
            assert self.chaos is not None
            self.chaos.stats.died_at.append(self.clock.now())
            raise InvocationFailed(str(died)) from None
        finally:
            if os.environ.get("POWERTOOLS_METRICS_DISABLED") == "true":
                # Disabled metrics are never flushed, and Powertools keeps them (one set shared
                # by every Metrics instance): clear them per invocation as a flush would, or a
                # long run grows them until a metric's 100 values force a flush.
                Metrics().clear_metrics()

    def _environment(self, logical_id: str) -> ThreadPoolExecutor:
        """The thread `logical_id`'s invocations run on, one at a time, as in its own execution
        environment. Its handler so starts at one shallow depth whoever invokes it: CPython
        frees a thread's frame-stack chunk when the frame at its base returns, and at some
        callers' depths (pytest's) moto's recursive copies crossed a chunk's edge millions of
        times, each an mmap and a munmap."""
        environment = self._environments.get(logical_id)
        if environment is None:
            # setdefault: serve's threads may ask at once; an executor starts no thread until used.
            environment = self._environments.setdefault(
                logical_id, ThreadPoolExecutor(1, thread_name_prefix=logical_id)
            )
        return environment

    def scheduled_event(self, logical_id: str, at: datetime) -> dict[str, Any]:
        """The event `logical_id`'s schedule rule (as the stack names it) delivers at `at`."""
        return scheduled_event(f"{NAME}-{logical_id}", at)

    def ticks_between(self, after: datetime, before: datetime | None) -> Iterator[datetime]:
        """Schedule ticks between two replay events (`before` None: after the last), each
        yielded after it ran: the `extra_ticks`, and under crash injection the schedule's
        ticks while invocations die and RECOVERY_TICKS more (kept in
        `chaos.stats.recovery_ticks`, for a run without crashes to tick at the same times):
        deployed, the schedule's sweeps settle and send what a dead invocation left."""
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
                break  # the next event comes first: the recovery goes on after it
            crashes = len(self.chaos.stats.crashes)
            self.tick(at)
            self.chaos.stats.recovery_ticks.append(at)
            quiet = 0 if len(self.chaos.stats.crashes) > crashes else quiet + 1
            yield at
        else:
            self._crashes_recovered = len(self.chaos.stats.crashes)

    def delivery_ticks(self) -> Iterator[datetime]:
        """After a replay's last event: schedule ticks, each yielded after it ran, while a
        receiver has a message due (failed or throttled), as the deployed schedule goes on."""
        from trunkwatch.app.notify import due

        edge, at = self.stack.handler("notifier").edge, self.clock.now()
        for _ in range(DELIVERY_TICKS):
            with self.lock:
                if not due(edge.storage(), edge.clock, edge.settings, edge.deployment()):
                    return
            at += self.schedule_period
            self.tick(at)
            yield at

    def tick(self, at: datetime) -> Any:
        """One schedule tick at `at`: each scheduled function in template order, then the
        queue messages it sent and the stream records they cause. Returns the first's (the
        dispatcher's) queue consumers' results merged, None if it died."""
        results: list[dict[str, Any] | None] = []
        with self.lock:
            self.clock.set(at)
            for logical_id in self.wiring.schedules:
                died = False
                try:
                    self.invoke(logical_id, self.scheduled_event(logical_id, at))
                except InvocationFailed:
                    # An asynchronous invocation retried 0 times: the event is gone.
                    assert self.chaos is not None  # only crash injection kills an invocation
                    self.chaos.stats.dropped_schedule_events += 1
                    died = True
                consumed = merged(self.queues.drain())
                results.append(None if died else consumed)
                self.pump.drain()
        return results[0] if results else None

    def deliver(
        self, event: str, body: bytes, at: datetime, signature: str | None = None, delivery: str | None = None
    ) -> dict[str, Any]:
        """A GitHub webhook delivery at `at`, signed with the runtime's secret unless
        `signature` is given; what it causes waits for `settle_deliveries`."""
        headers = {
            "Content-Type": "application/json",
            "User-Agent": "GitHub-Hookshot/local",
            "X-GitHub-Event": event,
            "X-GitHub-Delivery": delivery or str(uuid.uuid4()),
            "X-Hub-Signature-256": signature if signature is not None else self.sign(body),
        }
        return self._webhook(headers, body, at)

    def deliver_buildkite(self, event: str, body: bytes, at: datetime) -> dict[str, Any]:
        """A Buildkite webhook delivery at `at`, signed with the runtime's token, as `deliver`."""
        timestamp = str(int(at.timestamp()))
        signed = hmac.new(self.buildkite_token.encode(), f"{timestamp}.".encode() + body, hashlib.sha256)
        headers = {
            "Content-Type": "application/json",
            "User-Agent": "Buildkite-Request",
            "X-Buildkite-Event": event,
            "X-Buildkite-Signature": f"timestamp={timestamp},signature={signed.hexdigest()}",
        }
        return self._webhook(headers, body, at)

    def receive(self, headers: dict[str, str], body: bytes) -> dict[str, Any]:
        """A delivery on the real clock (`serve`): the webhook function and what it causes,
        waiting until its group closes, as deployed, to settle it and notify."""
        with self.lock:
            answer = self._webhook(headers, body, datetime.now(UTC))
            self.pump.drain()
            while (due := self.clock.next_due()) is not None:
                time.sleep(max(0.0, (due - datetime.now(UTC)).total_seconds()))
                self.clock.set(max(due, datetime.now(UTC)))
                self.clock.run_due()
                self.pump.drain()
            return answer

    def _webhook(self, headers: dict[str, str], body: bytes, at: datetime) -> dict[str, Any]:
        with self.lock:
            self.clock.set(at)
            try:
                return dict(self.invoke("webhook", function_url_event("POST", "/", headers, body)))
            except InvocationFailed:
                # A function URL's answer for a failed function; GitHub does not redeliver.
                assert self.chaos is not None
                self.chaos.stats.failed_deliveries += 1
                return dict(DIED_ANSWER)

    def settle_deliveries(self, at: datetime) -> None:
        """Evaluate what the deliveries of `at` wrote, then settle their group and notify."""
        with self.lock:
            self.clock.set(at)
            self.pump.drain()
            self.clock.set(at + GROUP_WINDOW)
            self.clock.run_due()
            self.pump.drain()

    def sign(self, body: bytes) -> str:
        return "sha256=" + hmac.new(self.webhook_secret.encode(), body, hashlib.sha256).hexdigest()

    def published(self, at: datetime) -> list[Published]:
        """Messages the topic delivered since the last call, oldest first."""
        from moto.sns.models import sns_backends

        topic = sns_backends[ACCOUNT][REGION].topics.get(self.stack.topic_arn)
        sent = {entry[0]: entry[1] for entry in (topic.sent_notifications if topic else [])}  # as published
        out: list[Published] = []
        while messages := self.sqs.receive_message(
            QueueUrl=self.stack.capture_url, MaxNumberOfMessages=10, MessageAttributeNames=["All"]
        ).get("Messages", []):
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
                self.sqs.delete_message(QueueUrl=self.stack.capture_url, ReceiptHandle=raw["ReceiptHandle"])
        return out

    def _email_body(self, published: str | None, delivered_to_sqs: str) -> str:
        """What SNS sends the email subscription: with MessageStructure=json, `email` or `default`."""
        if published is None or published == delivered_to_sqs:
            return delivered_to_sqs  # not a MessageStructure=json publish: every protocol gets it
        structure = json.loads(published)
        return str(structure.get("email", structure["default"]))

    def dead_letters(self) -> list[dict[str, Any]]:
        batch = self.sqs.receive_message(QueueUrl=self.stack.dlq_url, MaxNumberOfMessages=10)
        return [json.loads(m["Body"]) for m in batch.get("Messages", [])]


def scheduled_event(rule: str, at: datetime) -> dict[str, Any]:
    """The EventBridge Scheduled Event a schedule delivers at `at`."""
    return {
        "version": "0",
        "id": str(uuid.uuid4()),
        "detail-type": "Scheduled Event",
        "source": "aws.events",
        "account": ACCOUNT,
        "time": at.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "region": REGION,
        "resources": [f"arn:aws:events:{REGION}:{ACCOUNT}:rule/{rule}"],
        "detail": {},
    }


def function_url_event(method: str, path: str, headers: dict[str, str], body: bytes) -> dict[str, Any]:
    """The event a Lambda function URL sends its function (payload format version 2.0)."""
    lowered = {name.lower(): value for name, value in headers.items()}
    try:
        text, is_base64 = body.decode("utf-8"), False
    except UnicodeDecodeError:
        text, is_base64 = base64.b64encode(body).decode(), True
    now = time.time()
    return {
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": path,
        "rawQueryString": "",
        "headers": lowered,
        "requestContext": {
            "accountId": "anonymous",
            "apiId": "local",
            "domainName": f"local.lambda-url.{REGION}.on.aws",
            "domainPrefix": "local",
            "http": {
                "method": method,
                "path": path,
                "protocol": "HTTP/1.1",
                "sourceIp": "127.0.0.1",
                "userAgent": lowered.get("user-agent", ""),
            },
            "requestId": str(uuid.uuid4()),
            "routeKey": "$default",
            "stage": "$default",
            "time": time.strftime("%d/%b/%Y:%H:%M:%S +0000", time.gmtime(now)),
            "timeEpoch": int(now * 1000),
        },
        "body": text,
        "isBase64Encoded": is_base64,
    }
