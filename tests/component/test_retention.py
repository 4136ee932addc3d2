"""Item TTLs through the whole pipeline (local runtime): cells, commits, ticks and notification
logs carry `expires_at`, and a table whose expired items are gone still fires, shows and
resolves the same alerts. moto never expires items, so `expire` deletes what DynamoDB's TTL
would have deleted by then."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import boto3
import pytest

from tests.support import band
from tests.support.paths import ROOT
from trunkwatch.domain.clock import format_time, parse_time
from trunkwatch.storage.ticks import TICK_TTL
from trunkwatch_local.hud_server import HudServer
from trunkwatch_local.replay import Replay
from trunkwatch_local.runtime import NAME, LocalRuntime
from trunkwatch_local.scenario import Trunk

RETENTION = timedelta(hours=200)
BROKEN = "pull / linux-jammy / test (default, linux.2xlarge)"
LINT = "lint / lint"
FIRST_FAIL, FIXED = 2, 20  # commit 2 breaks the job, commit 20 fixes it
EVERY = timedelta(hours=24)  # a commit a day: commits expire while the job is broken
API_EVENT = ROOT / "events" / "api_get_silences.json"


def outcome(job: str, index: int) -> str:
    return "failure" if job == BROKEN and FIRST_FAIL <= index < FIXED else "success"


@pytest.fixture
def pipeline() -> Iterator[tuple[LocalRuntime, HudServer, Trunk]]:
    hud = HudServer()
    trunk = Trunk(jobs=(BROKEN, LINT), outcome=outcome, commit_every=EVERY, job_duration=timedelta(hours=1))
    config = {"retention": "200h", "repeat_interval": "0"}
    runtime = LocalRuntime(store="dynamodb").start(
        Replay("pytorch/pytorch", "main", config).deployment(hud.url)
    )
    try:
        yield runtime, hud, trunk
    finally:
        runtime.stop()
        hud.stop()


def page(trunk: Trunk, at: datetime) -> dict[str, Any]:
    """The HUD page at `at`; the autorevert bot reverted the culprit, to no avail (the job
    stays broken until FIXED)."""
    snapshot = trunk.snapshot(at)
    for row in snapshot["shaGrid"]:
        if row["sha"] == trunk.sha(FIRST_FAIL):
            row.update(isAutoreverted=True, autorevertSignals=[BROKEN])
    return snapshot


def tick_at(commit: int, trunk: Trunk) -> datetime:
    """Two hours after `commit` landed: its jobs are done."""
    return trunk.start + commit * EVERY + timedelta(hours=2)


def items(kind: str) -> list[dict[str, Any]]:
    scanned = boto3.client("dynamodb").scan(TableName=NAME)["Items"]
    return [item for item in scanned if item.get("kind", {}).get("S") == kind]


def epoch(at: datetime) -> int:
    return int(at.timestamp())


def expire(at: datetime) -> int:
    """Delete what DynamoDB's TTL deletes by `at`: trunkwatch's items whose `expires_at` has
    passed."""
    client = boto3.client("dynamodb")
    gone = [
        item
        for item in client.scan(TableName=NAME)["Items"]
        if "kind" in item and "expires_at" in item and int(item["expires_at"]["N"]) <= epoch(at)
    ]
    for item in gone:
        client.delete_item(TableName=NAME, Key={"pk": item["pk"], "sk": item["sk"]})
    return len(gone)


def api_alerts(runtime: LocalRuntime, at: datetime) -> list[dict[str, Any]]:
    """GET /api/v2/alerts through the API function, as API Gateway invokes it."""
    event = json.loads(API_EVENT.read_text())
    event.update(path="/api/v2/alerts", pathParameters={"proxy": "alerts"})
    event.update(queryStringParameters=None, multiValueQueryStringParameters=None)
    runtime.clock.set(at)
    response = runtime.invoke("api", event)
    assert response["statusCode"] == 200, response
    alerts: list[dict[str, Any]] = json.loads(response["body"])
    return alerts


def sent(messages: list[Any]) -> list[tuple[str, str]]:
    return [(m.message["status"], m.attributes["alertname"]) for m in messages if not m.is_digest]


def test_items_carry_their_expiry(pipeline: Any) -> None:
    runtime, hud, trunk = pipeline
    for commit in range(6):
        at = tick_at(commit, trunk)
        hud.serve(trunk.snapshot(at))
        runtime.tick(at)
    assert ("firing", "TrunkJobFailing") in sent(runtime.published(at))

    commit_times = {c["sha"]["S"]: parse_time(c["time"]["S"]) for c in items("commit")}
    assert len(commit_times) == 6
    for item in items("commit"):
        assert int(item["expires_at"]["N"]) == epoch(commit_times[item["sha"]["S"]] + RETENTION)
    cells = items("cell")
    assert len(cells) == 12  # two jobs on six commits
    for cell in cells:  # a cell goes with its commit
        assert int(cell["expires_at"]["N"]) == epoch(commit_times[cell["sha"]["S"]] + RETENTION)
    ticks = items("tick")
    assert ticks and all(
        int(t["expires_at"]["N"]) == epoch(parse_time(t["at"]["S"]) + TICK_TTL) for t in ticks
    )
    logs = [log for log in items("notification") if log["last_status"]["S"] != "digest"]
    assert {log["last_status"]["S"] for log in logs} == {"firing"}
    assert all("expires_at" not in log for log in logs)  # firing: its resolution is still due
    # A day's digest is sent once and its entry expires.
    assert all("expires_at" in log for log in items("notification") if log not in logs)
    # Every item is one of the storage port's kinds: nothing is written past it.
    assert all("kind" in item for item in boto3.client("dynamodb").scan(TableName=NAME)["Items"])


def test_expired_items_change_no_alert(pipeline: Any) -> None:
    runtime, hud, trunk = pipeline
    messages, deleted = [], 0
    for commit in range(FIXED + 3):
        at = tick_at(commit, trunk)
        deleted += expire(at)
        hud.serve(page(trunk, at))  # the page still lists commits whose items are gone
        runtime.tick(at)
        messages += runtime.published(at)
        # Nothing is written already expired: commits past the horizon are not stored again.
        assert all(int(i["expires_at"]["N"]) > epoch(at) for i in items("cell") + items("commit"))
        if commit == FIXED - 1:
            firing_at = at
            shown = api_alerts(runtime, at)
            stored_seqs = sorted(int(c["seq"]["N"]) for c in items("commit"))
    assert deleted > 0

    # While firing, the culprit's and its last pass's cells and commits had long expired...
    first_kept = parse_time(min(c["time"]["S"] for c in items("commit")))
    assert first_kept > trunk.start + FIRST_FAIL * EVERY
    assert len(stored_seqs) < FIXED
    # ...and the alert kept them, and counted every failing commit.
    job = next(a for a in shown if a["labels"]["alertname"] == "TrunkJobFailing")
    assert job["annotations"]["culprit_sha"] == trunk.sha(FIRST_FAIL)
    assert job["annotations"]["last_pass_sha"] == trunk.sha(FIRST_FAIL - 1)
    assert job["annotations"]["streak"] == str(FIXED - FIRST_FAIL)
    assert job["annotations"]["culprit_autoreverted_by"] == f"autorevert ({BROKEN})"
    assert job["startsAt"].startswith(format_time(trunk.start + FIRST_FAIL * EVERY)[:19])
    assert any(a["labels"]["alertname"] == "TrunkBroken" for a in shown)

    # One episode: fired once, never again on stale data, resolved once by the fix.
    assert sorted(sent(messages)) == [
        ("firing", "TrunkBroken"),
        ("firing", "TrunkJobFailing"),
        ("resolved", "TrunkBroken"),
        ("resolved", "TrunkJobFailing"),
    ]
    alerts = [m for m in messages if not m.is_digest]
    assert all(m.at > firing_at for m in alerts if m.message["status"] == "resolved")
    # Resolved: the logs now expire a retention after they were last written.
    resolved_at = max(m.at for m in alerts)
    logs = [log for log in items("notification") if log["last_status"]["S"] != "digest"]
    assert {log["last_status"]["S"] for log in logs} == {"resolved"}
    assert all(int(log["expires_at"]["N"]) == epoch(resolved_at + RETENTION) for log in logs)
    assert runtime.dead_letters() == []


def test_a_log_expires_unless_it_was_last_sent_firing() -> None:
    hud = HudServer()
    trunk = Trunk(jobs=band.JOBS, outcome=band.outcome)
    runtime = LocalRuntime(store="dynamodb").start(Replay("pytorch/pytorch", "main", {}).deployment(hud.url))
    try:
        band.run(runtime, hud, trunk, hours=5)
        logs = {(log["alertname"]["S"], log.get("job", {}).get("S")): log for log in items("notification")}
    finally:
        runtime.stop()
        hud.stop()
    horizon = epoch(trunk.start + timedelta(hours=720))
    for log in logs.values():
        if log.get("last_status", {}).get("S") == "firing":
            assert "expires_at" not in log
        else:
            assert int(log["expires_at"]["N"]) > horizon
    # Resolved once sent, firing still, and held (inhibited) but never sent before it recovered.
    assert "expires_at" in logs[("TrunkJobFailing", "pull / job0")]
    assert "expires_at" not in logs[("TrunkJobFailing", "pull / job6")]
    held = logs[("TrunkJobFailing", "pull / job5")]
    assert "last_status" not in held and "held_by" in held and "expires_at" in held
