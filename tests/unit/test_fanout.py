"""One trunk per invocation: the dispatcher's one message per due trunk, ingest on a poll
message, and the webhook's floor (a delivery for no configured trunk touches no storage),
with an organization's deliveries routed by `repository.full_name`. In memory, no AWS."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.support import webhooks
from trunkwatch.app import dispatch, poll
from trunkwatch.app.delivery import WebhookSecrets, handle_request
from trunkwatch.app.ingest import PollResult
from trunkwatch.app.webhook import trunk_of
from trunkwatch.domain.clock import SimulatedClock
from trunkwatch.domain.config import Deployment, TrunkConfig, load_deployment
from trunkwatch.storage.memory import memory_storage
from trunkwatch.storage.port import Storage
from trunkwatch_local.runtime import function_url_event

NOW = datetime(2026, 11, 18, 20, 0, tzinfo=UTC)
SECRET = "It's a Secret to Everybody"
SECRETS = WebhookSecrets(github=lambda: SECRET, buildkite=lambda: "bk-token-made-up")
SHA = "c" * 40


def org(count: int, **extra: Any) -> Deployment:
    return load_deployment({"trunks": [{"repo": f"example/repo-{n}", **extra} for n in range(count)]})


class Queue:
    """SendMessageBatch of an SQS client: records the entries, refuses what it is told to."""

    def __init__(self, refuse: set[str] = frozenset(), broken_batches: set[int] = frozenset()) -> None:
        self.batches: list[list[dict[str, Any]]] = []
        self.refuse = refuse  # trunk ids whose entries SQS reports failed
        self.broken = broken_batches  # batch numbers whose call raises

    def send_message_batch(self, *, QueueUrl: str, Entries: list[dict[str, Any]]) -> dict[str, Any]:
        assert QueueUrl == "https://queue.example/poll.fifo"
        self.batches.append(Entries)
        if len(self.batches) - 1 in self.broken:
            raise ConnectionError("the queue is unreachable")
        failed = [
            {"Id": e["Id"], "Code": "InternalError", "SenderFault": False}
            for e in Entries
            if json.loads(e["MessageBody"])["trunk"] in self.refuse
        ]
        return {"Successful": [], "Failed": failed}


def sent_trunks(queue: Queue) -> list[str]:
    return [json.loads(e["MessageBody"])["trunk"] for batch in queue.batches for e in batch]


def test_the_dispatcher_sends_one_message_per_due_trunk_in_batches_of_ten() -> None:
    deployment = org(23)
    queue = Queue()
    result = dispatch.dispatch(
        memory_storage().trunks, deployment, NOW, queue, "https://queue.example/poll.fifo"
    )
    ids = [trunk.trunk_id for trunk in deployment.trunks]
    assert result == {"sent": ids, "failed": []}
    assert sent_trunks(queue) == ids and [len(b) for b in queue.batches] == [10, 10, 3]
    # One message group per trunk (its polls never overlap); a tick's message is deduplicated.
    groups = {e["MessageGroupId"] for batch in queue.batches for e in batch}
    assert len(groups) == 23 and all(len(g) <= 128 for g in groups)
    again = Queue()
    dispatch.dispatch(memory_storage().trunks, deployment, NOW, again, "https://queue.example/poll.fifo")
    later = Queue()
    dispatch.dispatch(
        memory_storage().trunks,
        deployment,
        NOW + timedelta(minutes=1),
        later,
        "https://queue.example/poll.fifo",
    )
    dedup = [[e["MessageDeduplicationId"] for e in b] for b in queue.batches]
    assert dedup == [[e["MessageDeduplicationId"] for e in b] for b in again.batches]
    assert not {d for b in dedup for d in b} & {e["MessageDeduplicationId"] for b in later.batches for e in b}


def test_the_dispatcher_skips_a_webhook_fed_trunk_until_its_backstop_poll_is_due() -> None:
    deployment = load_deployment(
        {
            "trunks": [
                {"repo": "example/polled"},
                {"repo": "example/pushed", "webhook": True, "poll_every": "10m"},
                {"repo": "example/push-only", "webhook": True, "poll_every": "0"},
            ]
        }
    )
    storage = memory_storage()
    storage.trunks.record_polled("example/pushed#main", NOW - timedelta(minutes=5))
    queue = Queue()
    result = dispatch.dispatch(storage.trunks, deployment, NOW, queue, "https://queue.example/poll.fifo")
    assert result["sent"] == ["example/polled#main"]


def test_a_trunk_the_queue_refuses_or_a_broken_batch_stops_no_other_trunk(
    caplog: pytest.LogCaptureFixture,
) -> None:
    deployment = org(25)
    ids = [trunk.trunk_id for trunk in deployment.trunks]
    queue = Queue(refuse={ids[3]}, broken_batches={1})
    with caplog.at_level(logging.ERROR):
        result = dispatch.dispatch(
            memory_storage().trunks, deployment, NOW, queue, "https://queue.example/poll.fifo"
        )
    assert result["failed"] == [ids[3], *ids[10:20]]
    assert result["sent"] == [*ids[:3], *ids[4:10], *ids[20:]]
    assert "poll message not sent" in caplog.text


def test_a_trunk_whose_state_cannot_be_read_is_still_dispatched(monkeypatch: pytest.MonkeyPatch) -> None:
    deployment = load_deployment({"trunks": [{"repo": "example/a", "webhook": True}, {"repo": "example/b"}]})
    storage = memory_storage()

    def broken(trunk_id: str, consistent: bool = False) -> Any:
        raise RuntimeError("throttled")

    monkeypatch.setattr(storage.trunks, "state", broken)
    queue = Queue()
    result = dispatch.dispatch(storage.trunks, deployment, NOW, queue, "https://queue.example/poll.fifo")
    assert result["sent"] == ["example/a#main", "example/b#main"]


def record(body: str, message_id: str) -> dict[str, Any]:
    return {"messageId": message_id, "body": body, "eventSource": "aws:sqs"}


def test_ingest_polls_each_message_s_trunk_and_reports_only_unreadable_messages(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "Trunkwatch")
    deployment = org(3)
    polled: list[str] = []

    def poll_trunk(
        storage: Storage, trunk: TrunkConfig, rule: Any, source: Any, now: datetime, reruns: Any
    ) -> PollResult:
        polled.append(trunk.trunk_id)
        if trunk.repo == "example/repo-0":
            raise RuntimeError("the source broke")
        return PollResult(trunk=trunk.trunk_id, commits=1, cells_written=2)

    monkeypatch.setattr(poll, "poll_trunk", poll_trunk)
    records = [
        record(json.dumps({"trunk": "example/repo-0#main"}), "m-0"),
        record("not json", "m-bad"),
        record(json.dumps({"trunk": "example/gone#main"}), "m-gone"),
        record(json.dumps({"trunk": "example/repo-2#main"}), "m-2"),
    ]
    storage = memory_storage()
    result = poll.poll_records(records, storage, deployment, NOW, deadline=1e12)
    assert polled == ["example/repo-0#main", "example/repo-2#main"]
    assert [p["trunk"] for p in result["polled"]] == ["example/repo-2#main"]
    assert [(e["trunk"], e["cause"]) for e in result["errors"]] == [("example/repo-0#main", "internal")]
    # The failed poll is the trunk's (recorded, for SourceDown); only the unreadable message fails.
    assert result["batchItemFailures"] == [{"itemIdentifier": "m-bad"}]
    assert storage.trunks.state("example/repo-0#main").poll_error_cause == "internal"


@pytest.mark.parametrize("body", ["[]", "{}", '{"trunk": ""}', '{"trunk": 7}'])
def test_a_poll_message_that_names_no_trunk_is_refused(body: str) -> None:
    with pytest.raises(ValueError, match="a poll message is"):
        poll.poll_message_trunk(body)


# --- the webhook's floor, and an organization's deliveries -------------------------------


ORG = load_deployment(
    {
        "trunks": [
            {"repo": f"example/{name}", "source": "github", "webhook": True}
            for name in ("api", "web", "infra")
        ]
    }
)


class CountingStorage:
    """Builds the storage on first use and counts every call of its stores' methods."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.storage = memory_storage()

    def __call__(self) -> Storage:
        self.calls.append("open")
        for name in ("trunks", "commits", "cells", "alerts", "ticks", "shards", "logs"):
            store = getattr(self.storage, name)
            for attr in dir(store):
                method = getattr(store, attr)
                if not attr.startswith("_") and callable(method):
                    setattr(store, attr, self._counted(f"{name}.{attr}", method))
        return self.storage

    def _counted(self, name: str, method: Any) -> Any:
        def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls.append(f"{name}({args[0]})" if args and isinstance(args[0], str) else name)
            return method(*args, **kwargs)

        return counted


def deliver(event: str, data: dict[str, Any], storage: CountingStorage) -> tuple[int, str]:
    body = json.dumps(data).encode()
    headers = {
        "X-GitHub-Event": event,
        "X-GitHub-Delivery": f"d-{len(storage.calls)}",
        "X-Hub-Signature-256": webhooks.sign(body, SECRET),
    }
    clock = SimulatedClock(NOW)
    answer = handle_request(
        function_url_event("POST", "/", headers, body), SECRETS, lambda: ORG, storage, clock
    )
    return int(answer["statusCode"]), json.loads(answer["body"])["message"]


@pytest.mark.parametrize(
    ("why", "event", "data"),
    [
        ("another repository", "workflow_job", webhooks.workflow_job(SHA, "build", repo="example/other")),
        (
            "another branch",
            "workflow_job",
            webhooks.workflow_job(SHA, "build", repo="example/api", branch="dev"),
        ),
        (
            "a pull request's job",
            "workflow_job",
            webhooks.workflow_job(SHA, "build", repo="example/web", branch="fix-1"),
        ),
        (
            "a job in progress",
            "workflow_job",
            webhooks.workflow_job(SHA, "build", repo="example/api", status="in_progress"),
        ),
        ("a push to another branch", "push", webhooks.push([SHA], repo="example/api", branch="dev")),
    ],
)
def test_a_delivery_for_no_configured_trunk_makes_no_storage_call_and_logs_no_payload(
    why: str, event: str, data: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    storage = CountingStorage()
    with caplog.at_level(logging.DEBUG):
        status, message = deliver(event, data, storage)
    assert status == 202 and message.startswith("ignored: "), why
    assert storage.calls == [], why
    assert SHA not in caplog.text and "build" not in caplog.text


def test_an_organizations_deliveries_reach_the_trunk_their_repository_names() -> None:
    for name in ("api", "web", "infra"):
        data = webhooks.workflow_job(SHA, "build", conclusion="failure", repo=f"example/{name}")
        trunk = trunk_of(ORG, "workflow_job", data)
        assert isinstance(trunk, TrunkConfig) and trunk.trunk_id == f"example/{name}#main"
    # Through the function: the cells are the named repository's trunk's, and only its.
    storage = CountingStorage()
    assert deliver("push", webhooks.push([SHA], repo="example/web"), storage) == (200, "stored")
    data = webhooks.workflow_job(SHA, "build", conclusion="failure", repo="example/web")
    assert deliver("workflow_run", webhooks.run_of(data), storage) == (200, "stored")
    assert deliver("workflow_job", data, storage) == (200, "stored")
    cells = [call for call in storage.calls if call.startswith("cells.save")]
    assert cells and all(call.endswith("(example/web#main)") for call in cells), storage.calls
