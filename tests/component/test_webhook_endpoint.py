"""The webhook function's HTTP contract: Lambda function URL events (payload version 2.0)
with GitHub's headers, against a moto table."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest

from tests.support import webhooks
from tests.support.aws import TABLE, table_items
from trunkwatch.app.delivery import MAX_BODY_BYTES, WebhookSecrets, handle_request
from trunkwatch.domain.clock import SimulatedClock
from trunkwatch.domain.config import Deployment, load_deployment
from trunkwatch.domain.ticks import GROUP_WINDOW
from trunkwatch.storage.dynamodb import open_table
from trunkwatch_local.runtime import function_url_event

NOW = datetime(2026, 11, 18, 16, 0, tzinfo=UTC)
SECRET = "It's a Secret to Everybody"  # GitHub's documented test vector's secret
BUILDKITE_TOKEN = "bk-webhook-token-made-up-0123456789"  # a made-up value
A = "a" * 40
DEPLOYMENT = load_deployment(
    {"trunks": [{"repo": webhooks.REPO, "branch": "main", "source": "github", "webhook": True}]}
)


def _never() -> Deployment:
    raise AssertionError("the configuration was read for a delivery refused before it")


def post(
    event: str,
    body: bytes,
    signature: str | None = None,
    delivery: str = "d-1",
    deployment: Callable[[], Deployment] = lambda: DEPLOYMENT,
) -> tuple[int, str]:
    headers = {"X-GitHub-Event": event, "X-GitHub-Delivery": delivery, "Content-Type": "application/json"}
    headers["X-Hub-Signature-256"] = webhooks.sign(body, SECRET) if signature is None else signature
    event = function_url_event("POST", "/", headers, body)
    clock = SimulatedClock(NOW)
    secrets = WebhookSecrets(github=lambda: SECRET, buildkite=lambda: BUILDKITE_TOKEN)
    answer = handle_request(event, secrets, deployment, lambda: open_table(TABLE, "us-east-1"), clock)
    clock.advance(GROUP_WINDOW)  # the group the delivery opened (if it did) closes and settles
    clock.run_due()
    return int(answer["statusCode"]), json.loads(answer["body"])["message"]


def payload(data: dict[str, Any]) -> bytes:
    return json.dumps(data).encode()


def test_githubs_test_vector_signs_a_ping() -> None:
    signature = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
    assert webhooks.sign(b"Hello, World!", SECRET) == signature
    assert post("ping", b"Hello, World!", signature, deployment=_never) == (200, "pong")


@pytest.mark.parametrize("signature", ["", "sha256=" + "0" * 64, "sha1=abc", "757107ea0eb2509fc2"])
def test_a_bad_or_missing_signature_is_401_and_writes_nothing(aws: dict[str, Any], signature: str) -> None:
    status, message = post("push", payload(webhooks.push([A])), signature, deployment=_never)
    assert (status, message) == (401, "bad or missing X-Hub-Signature-256")
    assert table_items() == []


@pytest.mark.parametrize("other", ["another secret", BUILDKITE_TOKEN], ids=["another", "buildkites-token"])
def test_a_body_signed_with_another_secret_is_401(aws: dict[str, Any], other: str) -> None:
    body = payload(webhooks.push([A]))
    assert post("push", body, webhooks.sign(body, other), deployment=_never)[0] == 401
    assert table_items() == []


def test_the_same_delivery_twice_is_written_once(aws: dict[str, Any]) -> None:
    assert post("push", payload(webhooks.push([A])), delivery="push-1") == (200, "stored")
    failed = webhooks.workflow_job(A, "linux-jammy / build", conclusion="failure")
    assert post("workflow_run", payload(webhooks.run_of(failed)), delivery="run-1") == (200, "stored")
    job = payload(failed)
    assert post("workflow_job", job, delivery="job-1") == (200, "stored")
    cells = len(table_items("cell"))
    before = table_items()
    assert post("workflow_job", job, delivery="job-1") == (200, "stored")  # nothing left to store
    assert len(table_items("cell")) == cells == 2  # the job and its run's `(workflow)` pass
    changed = [item for item in table_items() if item not in before]
    assert {item["kind"]["S"] for item in changed} <= {"shard"}  # the same report written again


def test_a_pull_requests_job_is_accepted_and_writes_nothing(aws: dict[str, Any]) -> None:
    job = payload(webhooks.workflow_job(A, "linux-jammy / build", branch="my-feature"))
    assert post("workflow_job", job) == (202, "ignored: not about a webhook-fed trunk")
    run = payload(webhooks.workflow_run(A, event="pull_request", branch="my-feature"))
    assert post("workflow_run", run) == (202, "ignored: not about a webhook-fed trunk")
    assert post("issues", payload({"action": "opened"})) == (202, "ignored: event 'issues' is not ingested")
    assert table_items() == []
    # A fork's pull request from its own `main`: its run is recorded as not a trunk run, so
    # that its jobs, on the trunk's branch name, are dropped whenever they come.
    fork = payload(webhooks.workflow_run(A, event="pull_request", head_repo="someone/pytorch"))
    answer = (200, "ignored: not a trunk run (a push to the trunk's branch in its own repository)")
    assert post("workflow_run", fork) == answer
    assert [item["kind"]["S"] for item in table_items()] == ["run"]


def test_an_oversized_body_is_413_before_its_signature_is_checked(aws: dict[str, Any]) -> None:
    body = b'{"padding": "' + b"x" * MAX_BODY_BYTES + b'"}'
    assert post("push", body, deployment=_never)[0] == 413
    assert table_items() == []


@pytest.mark.parametrize(
    "body",
    [b"{not json", b"[" * 100_000 + b"]" * 100_000, b'"a string"', b"\xff\xfe"],
    ids=["invalid", "deeply-nested", "not-an-object", "not-utf8"],
)
def test_a_body_that_is_not_a_json_object_is_400(aws: dict[str, Any], body: bytes) -> None:
    status, _ = post("push", body, deployment=_never)
    assert status == 400
    assert table_items() == []


def test_a_delivery_missing_a_field_is_400_and_can_be_redelivered(aws: dict[str, Any]) -> None:
    post("push", payload(webhooks.push([A])), delivery="push-1")
    post("workflow_run", payload(webhooks.run_of(webhooks.workflow_job(A, "linux-jammy / build"))))
    broken = webhooks.workflow_job(A, "linux-jammy / build")
    del broken["workflow_job"]["run_id"]
    assert post("workflow_job", payload(broken), delivery="job-1") == (400, "'run_id' must be an integer")
    assert table_items("cell") == [] and table_items("shard") == []
    # Nothing of it was kept: a fixed redelivery is stored.
    fixed = payload(webhooks.workflow_job(A, "linux-jammy / build"))
    assert post("workflow_job", fixed, delivery="job-1") == (200, "stored")


def test_a_delivery_without_its_id_is_400(aws: dict[str, Any]) -> None:
    assert post("push", payload(webhooks.push([A])), delivery="") == (400, "missing X-GitHub-Delivery")
    assert table_items() == []
