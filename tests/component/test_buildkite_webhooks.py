"""Buildkite webhook deliveries through the webhook function's HTTP contract (Lambda function
URL events with Buildkite's headers): authenticated by `X-Buildkite-Token` or a fresh
`X-Buildkite-Signature`, only a webhook-fed trunk's pipeline and branch stored, into the cells
the poll writes; and scenarios delivered as Buildkite webhooks alone (no poll) publishing
what their HUD form does."""

from __future__ import annotations

import hashlib
import hmac
import json
import shutil
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.support.buildkite import PIPELINE, build, buildkite_webhook_replay, job
from tests.support.scenarios import SCENARIOS, assert_publishes_expected
from trunkwatch.app.delivery import WebhookSecrets, handle_request
from trunkwatch.domain.cells import CellState
from trunkwatch.domain.clock import SimulatedClock, format_time
from trunkwatch.domain.config import Deployment, load_deployment
from trunkwatch.domain.ticks import GROUP_WINDOW
from trunkwatch.storage.memory import memory_storage
from trunkwatch.storage.port import Storage
from trunkwatch_local.replay import ReplayError, parse_replay, read_replay
from trunkwatch_local.runtime import function_url_event
from trunkwatch_local.session import run_replay

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
TOKEN = "bk-webhook-token-made-up-0123456789"  # a made-up value
GITHUB_SECRET = "gh-webhook-secret-made-up-9876543210"  # a made-up value: GitHub's, not this one
SHA = "5d41402abc4b2a76b9719d911017c592aa3b2c1d"
DEPLOYMENT = load_deployment(
    {
        "trunks": [
            {"repo": "acme/engine", "source": "buildkite", "pipeline": PIPELINE, "webhook": True},
        ]
    }
)
TRUNK = DEPLOYMENT.trunks[0].trunk_id
PIPELINE_OBJECT = {"slug": "ci", "url": "https://api.buildkite.com/v2/organizations/acme/pipelines/ci"}


def _never() -> Deployment:
    raise AssertionError("the configuration was read for a delivery refused before it")


def job_finished(
    state: str = "failed", branch: str = "main", pipeline: dict[str, Any] | None = None
) -> bytes:
    built = build(1, SHA, NOW - timedelta(hours=1), branch=branch)
    del built["jobs"]
    payload = {
        "event": "job.finished",
        "job": job(1, "Unit tests", state),
        "build": built,
        "pipeline": pipeline or PIPELINE_OBJECT,
        "sender": {"id": "x", "name": "Buildkite"},
    }
    return json.dumps(payload).encode()


def signature(body: bytes, at: datetime = NOW, token: str = TOKEN) -> str:
    timestamp = str(int(at.timestamp()))
    signed = hmac.new(token.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    return f"timestamp={timestamp},signature={signed}"


def post(
    body: bytes,
    headers: dict[str, str],
    event: str = "job.finished",
    deployment: Callable[[], Deployment] = lambda: DEPLOYMENT,
    storage: Storage | None = None,
) -> tuple[int, str]:
    request = function_url_event(
        "POST", "/", {"Content-Type": "application/json", "X-Buildkite-Event": event, **headers}, body
    )
    clock = SimulatedClock(NOW)
    stored = storage or memory_storage()
    secrets = WebhookSecrets(github=lambda: GITHUB_SECRET, buildkite=lambda: TOKEN)
    answer = handle_request(request, secrets, deployment, lambda: stored, clock)
    clock.advance(GROUP_WINDOW)
    clock.run_due()
    return int(answer["statusCode"]), json.loads(answer["body"])["message"]


BODY = job_finished()


def delivery(
    event: str, number: int, sha: str, made: dict[str, Any], created: datetime = NOW - timedelta(hours=1)
) -> bytes:
    """A job delivery of build `number` (created at `created`) of `sha` on main."""
    built = build(number, sha, created)
    del built["jobs"]
    payload = {
        "event": event,
        "job": made,
        "build": built,
        "pipeline": PIPELINE_OBJECT,
        "sender": {"id": "x"},
    }
    return json.dumps(payload).encode()


@pytest.mark.parametrize(
    ("headers", "said"),
    [
        ({}, "missing X-Buildkite-Token or X-Buildkite-Signature"),
        ({"X-Buildkite-Token": "not-the-token"}, "bad X-Buildkite-Token"),
        ({"X-Buildkite-Token": GITHUB_SECRET}, "bad X-Buildkite-Token"),
        ({"X-Buildkite-Signature": signature(BODY, token="another")}, "bad X-Buildkite-Signature"),
        ({"X-Buildkite-Signature": signature(BODY, token=GITHUB_SECRET)}, "bad X-Buildkite-Signature"),
        ({"X-Buildkite-Signature": signature(BODY + b" ")}, "bad X-Buildkite-Signature"),
        ({"X-Buildkite-Signature": "sha256=abc"}, "must be timestamp=<seconds>,signature=<hex>"),
        (
            {"X-Buildkite-Signature": signature(BODY, NOW - timedelta(minutes=6))},
            "stale X-Buildkite-Signature",
        ),
        (
            {"X-Buildkite-Signature": signature(BODY, NOW + timedelta(minutes=6))},
            "stale X-Buildkite-Signature",
        ),
    ],
    ids=[
        "no-token",
        "wrong-token",
        "githubs-secret",
        "other-token",
        "signed-with-githubs-secret",
        "altered-body",
        "malformed",
        "stale",
        "future",
    ],
)
def test_an_unauthentic_delivery_is_401_before_the_configuration_is_read(
    headers: dict[str, str], said: str
) -> None:
    status, message = post(BODY, headers, deployment=_never)
    assert status == 401 and said in message


@pytest.mark.parametrize(
    "headers",
    [{"X-Buildkite-Token": TOKEN}, {"X-Buildkite-Signature": signature(BODY, NOW - timedelta(minutes=4))}],
    ids=["token", "signature"],
)
def test_an_authentic_delivery_is_stored_as_the_polls_cell(headers: dict[str, str]) -> None:
    storage = memory_storage()
    assert post(BODY, headers, storage=storage) == (200, "stored")
    [stored] = storage.commits.newest(TRUNK, 5)
    assert stored.commit.sha == SHA and stored.commit.pr == 101  # the message's "(#101)"
    assert storage.trunks.job_names(TRUNK) == ["Unit tests"]
    assert stored.states == CellState.FAIL.code


@pytest.mark.parametrize(
    ("body", "status", "said"),
    [
        (b"{not json", 400, "not valid JSON"),
        (b"[1, 2]", 400, "must be a JSON object"),
        (json.dumps({"event": "job.finished", "build": "x"}).encode(), 202, "ignored: not about"),
        (
            json.dumps(
                {"event": "job.finished", "build": {"branch": "main"}, "pipeline": PIPELINE_OBJECT}
            ).encode(),
            400,
            "'build':",
        ),
        (job_finished(branch="feature"), 202, "ignored: not about a webhook-fed trunk's pipeline and branch"),
        (
            job_finished(
                pipeline={
                    "slug": "ci",
                    "url": "https://api.buildkite.com/v2/organizations/other/pipelines/ci",
                }
            ),
            202,
            "ignored: not about",
        ),
    ],
    ids=[
        "not-json",
        "not-an-object",
        "no-pipeline",
        "build-without-fields",
        "other-branch",
        "other-pipeline",
    ],
)
def test_a_signed_delivery_not_about_the_trunk_or_malformed_is_never_stored(
    body: bytes, status: int, said: str
) -> None:
    storage = memory_storage()
    assert post(body, {"X-Buildkite-Signature": signature(body)}, storage=storage)[0] == status
    assert said in post(body, {"X-Buildkite-Signature": signature(body)})[1]
    assert storage.commits.newest(TRUNK, 5) == []


def test_a_scheduled_job_is_pending_until_its_result_and_a_retry_keeps_the_result() -> None:
    storage = memory_storage()
    scheduled = delivery("job.scheduled", 1, SHA, job(1, "Unit tests", "scheduled"))
    assert post(scheduled, {"X-Buildkite-Token": TOKEN}, "job.scheduled", storage=storage) == (200, "stored")
    assert [c.states for c in storage.commits.newest(TRUNK, 5)] == [CellState.PENDING.code]
    assert post(BODY, {"X-Buildkite-Token": TOKEN}, storage=storage) == (200, "stored")
    retry = job(1, "Unit tests", "scheduled", attempt=2, retries_count=1)
    post(
        delivery("job.scheduled", 1, SHA, retry),
        {"X-Buildkite-Token": TOKEN},
        "job.scheduled",
        storage=storage,
    )
    assert [c.states for c in storage.commits.newest(TRUNK, 5)] == [CellState.FAIL.code]


def test_a_slow_failing_job_scheduled_on_newer_commits_stays_firing_while_faster_jobs_end() -> None:
    # "Slow" fails on three commits, then runs on six more whose "Fast" jobs all end first
    # (the schedule ticking between): scheduled there, it still runs on the trunk, so it is
    # not stale (5 commits) and does not resolve.
    start = datetime(2026, 6, 1, 10, 0, tzinfo=UTC)
    lines = [
        json.dumps({"repo": "acme/engine", "branch": "main", "source": "buildkite", "pipeline": PIPELINE})
    ]

    def line(at: datetime, event: str, number: int, made: dict[str, Any]) -> str:
        landed = start + timedelta(minutes=10 * number)
        payload = json.loads(delivery(event, number, f"{number:040x}", made, created=landed))
        return json.dumps({"at": format_time(at), "buildkite_webhook": {"event": event, "payload": payload}})

    for number in range(1, 10):
        landed = start + timedelta(minutes=10 * number)
        lines += [
            line(landed, "job.scheduled", number, job(number, name, "scheduled")) for name in ("Fast", "Slow")
        ]
        lines.append(
            line(landed + timedelta(minutes=2), "job.finished", number, job(number, "Fast", "passed"))
        )
        if number <= 3:
            lines.append(
                line(landed + timedelta(minutes=5), "job.finished", number, job(number, "Slow", "failed"))
            )
        lines.append(json.dumps({"at": format_time(landed + timedelta(minutes=9)), "tick": True}))
    slow = [
        m.message["status"]
        for m in run_replay(parse_replay(lines), store="memory")
        if m.attributes.get("alertname") == "TrunkJobFailing"
    ]
    assert slow == ["firing"]


def test_a_signed_ping_is_pong_and_other_events_are_ignored() -> None:
    assert post(b"{}", {"X-Buildkite-Token": TOKEN}, event="ping", deployment=_never) == (200, "pong")
    assert post(b"{}", {}, event="agent.lost", deployment=_never)[0] == 202


def test_a_buildkite_webhook_line_must_be_a_delivery() -> None:
    header = json.dumps({"repo": "acme/engine", "source": "buildkite", "pipeline": "acme/ci"})
    bad = json.dumps(
        {"at": "2026-06-01T10:00:00Z", "buildkite_webhook": {"event": "agent.lost", "payload": {}}}
    )
    with pytest.raises(
        ReplayError, match=r"^replay:2: 'buildkite_webhook' must be \{\"event\": build.finished"
    ):
        parse_replay([header, bad])


# Scenarios whose Buildkite deliveries alone say what their HUD snapshots do.
DELIVERED = ["basic-break", "infra-outage", "last-two-jobs-recover-at-once"]


@pytest.mark.parametrize("name", DELIVERED)
def test_a_scenario_delivered_as_buildkite_webhooks_publishes_what_its_hud_form_does(
    name: str, tmp_path: Path
) -> None:
    scenario = SCENARIOS / f"{name}.jsonl"
    converted = tmp_path / scenario.name
    converted.write_text("\n".join(buildkite_webhook_replay(scenario.read_text().splitlines())) + "\n")
    shutil.copy(scenario.with_name(f"{name}.expected.jsonl"), tmp_path)
    replay = read_replay(converted)
    kinds = {event.kind for event in replay.events}
    assert "buildkite_webhook" in kinds and not kinds & {"hud", "buildkite"}  # never polled
    assert replay.deployment("http://127.0.0.1").trunks[0].poll_period == timedelta(0)
    assert_publishes_expected(converted, [m.as_json() for m in run_replay(replay, store="memory")])
