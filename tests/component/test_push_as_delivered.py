"""Push as GitHub delivers it: one history replayed as the HUD snapshots a poll reads and as
the webhook deliveries GitHub sends (each job when it is queued and when it ends, in any
order within an instant, some twice) pages alike, message for message, on the local runtime
with the in-memory store (`tests/support/timeline.py` makes both forms of one history)."""

from __future__ import annotations

import json
import random
import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from benchmarks.redtrunk import RedTrunk
from tests.support import webhooks
from tests.support.scenarios import SCENARIOS
from tests.support.timeline import Landing, Report, Timeline
from trunkwatch_local.replay import parse_replay
from trunkwatch_local.runtime import is_digest
from trunkwatch_local.session import run_replay

_LOCAL_PORT = re.compile(r"127\.0\.0\.1:\d+")
_SILENCE_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
# A job's run link names its shard: where several shards of a job fail in one instant, the
# cell links the first failing one the poll lists, or the first one delivered.
_SHARD = re.compile(r"(/actions/runs/\d+)/job/\d+")


def messages(lines: list[str]) -> list[dict[str, Any]]:
    """The replay's messages, with what differs from run to run left out: the ports of its
    local servers, the ids of its silences, and which failing shard's run a link names."""
    found = []
    for message in run_replay(parse_replay(lines, "test"), store="memory"):
        text = _LOCAL_PORT.sub("127.0.0.1:PORT", json.dumps(message.as_json()))
        found.append(json.loads(_SHARD.sub(r"\1/job/N", _SILENCE_ID.sub("ID", text))))
    return found


def lines(header: dict[str, Any], events: Any) -> list[str]:
    return [json.dumps(header), *(json.dumps(event) for event in events)]


def summary(replayed: list[dict[str, Any]]) -> list[tuple[str, ...]]:
    return [
        (m["at"], "digest", m["message"]["day"], "")
        if is_digest(m)
        else (
            m["at"],
            m["attributes"]["alertname"],
            m["attributes"]["status"],
            m["message"]["alerts"][0]["labels"].get("job", ""),
        )
        for m in replayed
    ]


@pytest.mark.long
def test_a_red_trunk_pages_alike_polled_and_pushed() -> None:
    # A day of a generated red trunk (breakages, flaky jobs, retries, a slow job family),
    # seen every 10 minutes: the poll reads each instant's snapshot; the deliveries of each
    # instant arrive shuffled, a tenth of them twice. A retry is queued an instant after
    # the failure it retries (the poll shows a job's latest attempt only).
    step = timedelta(minutes=10)
    trunk = Timeline.of_redtrunk(RedTrunk(seed=101, days=1), retry_after=step).quantized(step)
    polled = messages(lines(trunk.header(), trunk.snapshots()))
    pushed = messages(lines(trunk.header(), trunk.deliveries(random.Random(3), redelivered=0.1)))
    assert summary(pushed) == summary(polled)
    assert pushed == polled
    pages = [m for m in polled if m["attributes"].get("alertname") == "TrunkJobFailing"]
    assert len(pages) >= 10 and {m["attributes"]["status"] for m in pages} == {"firing", "resolved"}


# The scenarios that webhooks can deliver (no scripted source outage, no reruns to confirm).
DELIVERABLE = [
    "basic-break",
    "flaky-and-pending",
    "infra-outage",
    "last-two-jobs-recover-at-once",
    "resolved-while-due-a-reminder",
    "silenced",
]


@pytest.mark.parametrize("name", DELIVERABLE)
def test_a_scenario_pages_alike_polled_and_pushed(name: str) -> None:
    history = (SCENARIOS / f"{name}.jsonl").read_text().splitlines()
    polled = messages(webhooks.as_github_knows_it(history))
    pushed = webhooks.shuffled(webhooks.replay_as_deliveries(history), random.Random(7))
    assert messages(pushed) == polled


T0 = datetime(2026, 11, 18, 12, 0, tzinfo=UTC)
SLOW, FAST = "trunk / macos / test (default, 1, 1, macos-m1)", "pull / linux / build"


def test_a_slow_job_running_on_newer_commits_is_not_stale() -> None:
    # The slow job fails on commits 1-3 and fires; it is queued on commits 4-9, whose fast
    # jobs have passed: it still runs, so it is not stale (its queued deliveries say so, as
    # a poll's pending cells do), and nothing resolves it.
    shas = [f"{n:040x}" for n in range(1, 10)]
    at = [T0 + timedelta(minutes=10 * n) for n in range(len(shas))]
    landings = tuple(
        Landing(t, sha, f"change {n}", None, "dev") for n, (t, sha) in enumerate(zip(at, shas, strict=True))
    )
    reports = []
    for n, sha in enumerate(shas):
        reports += [Report(at[n], sha, SLOW, 1, None, ""), Report(at[n], sha, FAST, 1, None, "")]
        reports.append(Report(at[n] + timedelta(minutes=5), sha, FAST, 1, "success", ""))
        if n < 3:
            reports.append(Report(at[n] + timedelta(minutes=5), sha, SLOW, 1, "failure", ""))
    trunk = Timeline("pytorch/pytorch", "main", landings, tuple(sorted(reports, key=lambda r: r.at)))
    pushed = summary(messages(lines(trunk.header(), trunk.deliveries())))
    job = "trunk / macos / test (default, macos-m1)"
    assert [(status, j) for _, name, status, j in pushed if name == "TrunkJobFailing"] == [("firing", job)]
    assert summary(messages(lines(trunk.header(), trunk.snapshots()))) == pushed


def _noise(lines: list[str]) -> list[str]:
    """The deliveries of `lines` with runs that are not trunk runs beside them, all failing:
    a fork's pull request from its own `main` on each trunk commit, a scheduled and a
    dispatched run of each trunk commit, and a push to a release branch; each such job is
    delivered before its run (GitHub does not order deliveries)."""
    out = lines[:1]
    for line in lines[1:]:
        out.append(line)
        event = json.loads(line)
        payload = event.get("webhook", {}).get("payload", {})
        if event.get("webhook", {}).get("event") != "push":
            continue
        for commit in payload["commits"]:
            sha = commit["id"]
            for n, run in enumerate(
                (
                    {"event": "pull_request", "head_repo": "someone/pytorch"},
                    {"event": "schedule"},
                    {"event": "workflow_dispatch"},
                    {"event": "push", "branch": "release/2.10"},
                )
            ):
                run_id = 900_000 + n * 10_000 + len(out)
                job = webhooks.workflow_job(
                    sha,
                    "linux-jammy-py3.10-gcc11 / build",
                    conclusion="failure",
                    run_id=run_id,
                    branch=run.get("branch", "main"),
                )
                delivered = webhooks.workflow_run(sha, run_id=run_id, conclusion="failure", **run)
                for name, body in (("workflow_job", job), ("workflow_run", delivered)):
                    out.append(json.dumps({"at": event["at"], "webhook": {"event": name, "payload": body}}))
    return out


def test_runs_that_are_not_trunk_runs_change_no_message() -> None:
    history = (SCENARIOS / "basic-break.jsonl").read_text().splitlines()
    polled = messages(webhooks.as_github_knows_it(history))
    noisy = webhooks.shuffled(_noise(webhooks.replay_as_deliveries(history)), random.Random(11))
    assert messages(noisy) == polled
