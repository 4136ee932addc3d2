"""Every DynamoDB request each function makes is one its role in template.yaml allows.

The local runtime runs the real handlers on moto's table; every DynamoDB call botocore makes
is heard through its public event hooks (`trunkwatch_local.aws_calls`), attributed to the
function whose invocation made it (the webhook's group settling, which runs after its
delivery's bucket closes, to the webhook) and judged by that function's deployed role,
leading-key conditions included (tests/support/iam.py). moto itself checks no permission,
so this is where a missing action or a too narrow condition shows."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import pytest

from tests.support import webhooks
from tests.support.iam import TableRequest, allows, table_requests, translated_resources
from tests.support.paths import ROOT
from tests.support.scenarios import SCENARIOS
from trunkwatch.domain.clock import SimulatedClock
from trunkwatch.domain.config import load_deployment
from trunkwatch_local import aws_calls
from trunkwatch_local.replay import Replay, parse_replay
from trunkwatch_local.runtime import LocalRuntime
from trunkwatch_local.session import Session, replay_steps

T = TypeVar("T")
Requests = dict[str, set[TableRequest]]  # logical id of the function -> what it asked


class _ByFunction:
    """Keeps each DynamoDB call in `requests` under the function running at the time (an
    `aws_calls` listener)."""

    def __init__(self) -> None:
        self.requests: Requests = defaultdict(set)
        self.running: list[str | None] = [None]

    def run(self, function: str, call: Callable[[], T]) -> T:
        self.running.append(function)
        try:
            return call()
        finally:
            self.running.pop()

    def before(self, call: aws_calls.Call) -> None:
        function = self.running[-1]
        # Not the runtime's own calls (setup, reading the topic), nor the stream's (the mapping's).
        if function is not None and call.service == "dynamodb":
            self.requests[function].update(table_requests(call.operation, call.params))

    def answered(self, wall_seconds: float, cpu_seconds: float) -> None:
        pass

    def after(self, call: aws_calls.Call, response: dict[str, Any], failed: bool) -> None:
        pass


def _lines(name: str) -> list[str]:
    return (SCENARIOS / name).read_text().splitlines()


@pytest.fixture
def requests() -> Iterator[Requests]:
    """What each function asked of the table over: a webhook-fed trunk breaking and
    recovering (every API view read while it fires), silences made and expired, a break
    confirmed by reruns, alerts acknowledged (through the API and an `ACK!` silence), and the
    dispatcher asking whether a backstop poll is due."""
    by_function = _ByFunction()
    invoke, run_due = LocalRuntime.invoke, SimulatedClock.run_due
    patches = pytest.MonkeyPatch()

    def invoking(self: LocalRuntime, function: str, event: dict[str, Any]) -> Any:
        return by_function.run(self.stack.logical_id(function), lambda: invoke(self, function, event))

    def running_due(self: SimulatedClock) -> int:
        # The only deferred actions are the webhook's: a group's opener settles it.
        return by_function.run("WebhookFunction", lambda: run_due(self))

    patches.setattr(LocalRuntime, "invoke", invoking)
    patches.setattr(SimulatedClock, "run_due", running_due)
    try:
        with aws_calls.listening(by_function):
            # Two jobs breaking and recovering together: the table requests of the PyTorch-sized
            # basic-break, action by action and partition by partition, at a third of its time.
            pushed = webhooks.replay_as_deliveries(_lines("last-two-jobs-recover-at-once.jsonl"))
            _replay(parse_replay(pushed, "pushed"))
            _replay(parse_replay(_lines("silenced.jsonl"), "silenced"))
            _replay(parse_replay(_lines("verdicts-by-reruns.jsonl"), "verdicts"))
            _replay(parse_replay(_lines("acknowledged.jsonl"), "acknowledged"))
            _dispatch_a_backstop_poll()
        yield by_function.requests
    finally:
        patches.undo()


def _replay(replay: Replay) -> None:
    """The replay through a local session; while an alert fires, every view of the API too."""
    session = Session(LocalRuntime(store="dynamodb"))
    try:
        session.github.repo = replay.repo
        session.start(replay.deployment(session.hud.url, session.github.url))
        trunk = f"{replay.repo}%23{replay.branch}"
        for _, published in replay_steps(session, replay):
            if any(message.message["status"] == "firing" for message in published):
                for path in (
                    "/api/v2/alerts",
                    "/api/v2/alerts/groups",
                    "/api/v2/silences",
                    "/api/v2/acks",
                    "/api/v2/trunks",
                    f"/api/v2/trunks/grid?trunk={trunk}",
                    f"/api/v2/trunks/history?trunk={trunk}",
                ):
                    session.call_api("GET", path)
    finally:
        session.stop()


def _dispatch_a_backstop_poll() -> None:
    """One schedule tick's dispatch of a webhook-fed trunk with a backstop poll (the replays'
    is never polled): the dispatcher reads the trunk's state to tell whether it is due."""
    trunk = {"repo": "pytorch/pytorch", "branch": "main", "source": "hud", "url": "http://127.0.0.1:9"}
    runtime = LocalRuntime(store="dynamodb").start(load_deployment({"trunks": [{**trunk, "webhook": True}]}))
    try:
        runtime.invoke(
            "DispatcherFunction", runtime.scheduled_event("DispatcherFunction", runtime.clock.now())
        )
    finally:
        runtime.stop()


@pytest.fixture(scope="module")
def roles() -> dict[str, Any]:
    """Each function's role, by the function's logical id."""
    resources = translated_resources(ROOT / "template.yaml")
    return {
        name: resources[resource["Properties"]["Role"]["Fn::GetAtt"][0]]
        for name, resource in resources.items()
        if resource["Type"] == "AWS::Lambda::Function"
    }


@pytest.mark.long(minutes=2)
def test_every_table_request_is_allowed_by_its_functions_role_and_no_more(
    requests: Requests, roles: dict[str, Any]
) -> None:
    """One test over the one recording (the replays on moto are most of this file's time;
    apart, pytest-xdist's workers would each record them again). Every function that uses the
    table was run; its every request is one its role allows; and the leading-key conditions
    hold something back: the alerts, silences and reruns the evaluator, the API and ingest
    write are denied to the internet-facing webhook, and the cells, ticks and trunk state to
    the notifier, which deletes nothing (its claims are its notification logs' entries)."""
    assert set(requests) >= {
        "DispatcherFunction",
        "IngestFunction",
        "WebhookFunction",
        "EvaluatorFunction",
        "NotifierFunction",
        "ApiFunction",
    }

    denied = {
        function: sorted(str(request) for request in asked if not allows(roles[function], request))
        for function, asked in requests.items()
    }
    assert {function: found for function, found in denied.items() if found} == {}

    writes = {"dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:BatchWriteItem"}
    others = {
        request
        for function in ("EvaluatorFunction", "ApiFunction", "IngestFunction")
        for request in requests[function]
        if request.action in writes
    }
    webhook_denied = {request for request in others if not allows(roles["WebhookFunction"], request)}
    assert {"ALERTS", "EPISODES", "SILENCE", "RERUNS"} <= _partitions(webhook_denied)
    notifier_denied = {request for request in others if not allows(roles["NotifierFunction"], request)}
    assert {"ALERTS", "CELLS", "TICK", "TRUNK", "COMMITS", "SILENCE"} <= _partitions(notifier_denied)
    # The API writes acknowledgements (their own partition), never a notification log.
    api_writes = {request for request in requests["ApiFunction"] if request.action in writes}
    assert "ACKS" in _partitions(api_writes)
    put = "dynamodb:PutItem"
    assert not allows(roles["ApiFunction"], TableRequest(put, frozenset({"LOG#pytorch/pytorch#main"})))
    delete = "dynamodb:DeleteItem"
    for partition in ("CELLS#pytorch/pytorch#main#j", "LOG#pytorch/pytorch#main", "IDEMPOTENCY"):
        assert not allows(roles["NotifierFunction"], TableRequest(delete, frozenset({partition})))
    assert not allows(roles["NotifierFunction"], TableRequest(put, frozenset({"IDEMPOTENCY"})))


def _partitions(requests: set[TableRequest]) -> set[str]:
    return {key.split("#", 1)[0] for request in requests for key in request.leading_keys}


def test_the_evaluator_deletes_only_superseded_fixed_breakages(roles: dict[str, Any]) -> None:
    delete = "dynamodb:DeleteItem"
    evaluator = roles["EvaluatorFunction"]
    assert allows(evaluator, TableRequest(delete, frozenset({"FIXED#pytorch/pytorch#main"})))
    for key in (
        "CELLS#pytorch/pytorch#main#j",
        "ALERTS#pytorch/pytorch#main",
        "SILENCE",
        "LOG#pytorch/pytorch#main",
    ):
        assert not allows(evaluator, TableRequest(delete, frozenset({key})))


def test_table_requests_are_read_as_iam_authorizes_them() -> None:
    """A transaction is one authorization per item, a batch one for all its keys."""

    def key(pk: str) -> dict[str, Any]:
        return {"pk": {"S": pk}, "sk": {"S": "x"}}

    transaction = {"TransactItems": [{"Put": {"Item": key("A#1")}}, {"Update": {"Key": key("B")}}]}
    query = {
        "KeyConditionExpression": "#0 = :0 AND begins_with (#1, :1)",
        "ExpressionAttributeNames": {"#0": "pk", "#1": "sk"},
        "ExpressionAttributeValues": {":0": {"S": "LOG#t"}, ":1": {"S": "r#"}},
    }
    requests = [
        *table_requests("TransactWriteItems", transaction),
        *table_requests("BatchGetItem", {"RequestItems": {"t": {"Keys": [key("C#1"), key("C#2")]}}}),
        *table_requests("Query", query),
    ]
    assert requests == [
        TableRequest("dynamodb:PutItem", frozenset({"A#1"})),
        TableRequest("dynamodb:UpdateItem", frozenset({"B"})),
        TableRequest("dynamodb:BatchGetItem", frozenset({"C#1", "C#2"})),
        TableRequest("dynamodb:Query", frozenset({"LOG#t"})),
    ]
