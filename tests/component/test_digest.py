"""The daily digest (design.md §4.4) on the local runtime: a trunk replayed over two days
with `digest_hour: 9` sends each day's digest once, at the first event from 09:00 the next
day, to the stack's topic (kind=digest) and the receivers that opt in, never to the others;
and a digest whose notifier dies while sending it goes at the next sweep, once."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from trunkwatch import sources
from trunkwatch.channels import RECEIVER_TYPES
from trunkwatch.domain.config import load_deployment
from trunkwatch.domain.digest import KIND
from trunkwatch_local.chaos import Chaos
from trunkwatch_local.hud_server import HudServer
from trunkwatch_local.receiver_servers import SlackServer, WebhookServer
from trunkwatch_local.replay import Replay, ReplayEvent
from trunkwatch_local.runtime import LocalRuntime, Published
from trunkwatch_local.scenario import DEMO_JOBS, Trunk
from trunkwatch_local.session import Session, replay_into

START = datetime(2026, 11, 18, 15, 0, tzinfo=UTC)
TEST = "pull / linux-jammy-py3.10-gcc11 / test (default, linux.2xlarge)"
BUILD = "pull / linux-jammy-py3.10-gcc11 / build"
MAC = "trunk / macos-py3-arm64 / test (default, macos-m1-stable)"
CUDA = "trunk / linux-jammy-cuda12.8-py3.10-gcc11 / test (default, linux.g5.4xlarge.nvidia.gpu)"
# Every function but the notifier is spared when crashes are injected.
SPARED = ("DispatcherFunction", "IngestFunction", "EvaluatorFunction", "WebhookFunction", "ApiFunction")


def outcome(job: str, index: int) -> str:
    """Commit 4 breaks the test and the build for two commits (commit 6 fixes them), commit 10
    breaks CUDA for four (it pages), both on the 18th; commit 60 breaks macOS for two on the
    19th (commit 62 fixes it)."""
    if (
        job.startswith("pull / linux-jammy-py3.10-gcc11 / test (default, 2, 3") or job == BUILD
    ) and index in (
        4,
        5,
    ):
        return "failure"
    if job.startswith("trunk / linux-jammy-cuda12.8") and 10 <= index <= 13:
        return "failure"
    if job.startswith("trunk / macos") and index in (60, 61):
        return "failure"
    return "success"


TRUNK = Trunk(jobs=DEMO_JOBS, outcome=outcome, start=START)


@pytest.fixture
def servers() -> Iterator[tuple[WebhookServer, SlackServer, SlackServer]]:
    hook, slack, alerts_only = WebhookServer(), SlackServer(), SlackServer()
    yield hook, slack, alerts_only
    for server in (hook, slack, alerts_only):
        server.stop()


def digests(published: list[Published]) -> list[Published]:
    return [message for message in published if message.is_digest]


def test_each_days_digest_is_sent_once_at_its_hour_with_the_days_breakages(
    servers: tuple[WebhookServer, SlackServer, SlackServer],
) -> None:
    hook, slack, alerts_only = servers
    polls = TRUNK.polls(timedelta(hours=1), START + timedelta(hours=44))  # to 11:00 on the 20th
    replay = Replay(
        "pytorch/pytorch",
        "main",
        {"digest_hour": 9},
        [ReplayEvent(n, at, "hud", snapshot) for n, (at, snapshot) in enumerate(polls, start=2)],
        receivers=[
            {"type": "webhook", "url": hook.url + "/digest", "digest": True},
            {"type": "slack", "url": slack.url + "/services/T/B/DIGEST", "digest": True},
            {"type": "slack", "url": alerts_only.url + "/services/T/B/ALERTS"},
        ],
    )
    with Session() as session:
        session.start(replay.deployment(session.hud.url))
        published = list(replay_into(session, replay))
    sent = digests(published)
    # One a day, at the first event from 09:00 UTC the next day.
    assert [(m.at, m.message["day"]) for m in sent] == [
        (datetime(2026, 11, 19, 9, 0, tzinfo=UTC), "2026-11-18"),
        (datetime(2026, 11, 20, 9, 0, tzinfo=UTC), "2026-11-19"),
    ]
    first, second = (m.message for m in sent)
    assert (first["kind"], first["trunk"], first["repo"], first["branch"]) == (
        KIND,
        "pytorch/pytorch#main",
        "pytorch/pytorch",
        "main",
    )

    def entries(body: dict[str, Any]) -> list[dict[str, Any]]:
        keys = ("culprit_sha", "fix_sha", "jobs", "failed_commits")
        return [{key: entry[key] for key in keys} for entry in body["fixed_before_page"]]

    # The two-commit breakage of two jobs is one entry; the CUDA break, which paged, is none.
    assert entries(first) == [
        {"culprit_sha": TRUNK.sha(4), "fix_sha": TRUNK.sha(6), "jobs": [BUILD, TEST], "failed_commits": 2}
    ]
    assert entries(second) == [
        {"culprit_sha": TRUNK.sha(60), "fix_sha": TRUNK.sha(62), "jobs": [MAC], "failed_commits": 2}
    ]
    assert [(page["alertname"], [j["job"] for j in page["jobs"]]) for page in first["pages"]] == [
        ("TrunkBroken", [CUDA])
    ]
    assert first["hours_broken"] > 0 and second["pages"] == [] and second["hours_broken"] == 0
    # Never a page: a message attribute tells it from alerts, and it has no priority.
    assert all(m.attributes == {"kind": KIND, "repo": "pytorch/pytorch", "branch": "main"} for m in sent)
    assert sent[0].subject.startswith(
        "[DIGEST] pytorch/pytorch@main 2026-11-18: 1 fixed before a page, 1 page"
    )
    assert sent[0].email.startswith("Daily digest: pytorch/pytorch@main, 2026-11-18 (UTC)")
    # The receivers that opt in get the same, once each; the others get none.
    posted = [body for path, body in hook.posts if body.get("kind") == KIND]
    assert [{**body, "receiver": "", "externalURL": ""} for body in posted] == [
        {**m.message, "receiver": "", "externalURL": ""} for m in sent
    ]
    headers = [post["attachments"][0]["blocks"][0]["text"]["text"] for post in slack.posts]
    assert [h for h in headers if h.startswith("Daily digest")] == [
        "Daily digest: pytorch/pytorch@main, 2026-11-18 (UTC)",
        "Daily digest: pytorch/pytorch@main, 2026-11-19 (UTC)",
    ]
    assert alerts_only.posts and "Daily digest" not in json.dumps(alerts_only.posts)


def run_across_midnight(runtime: LocalRuntime, hud: HudServer, chaos: Chaos | None) -> list[Published]:
    """A tick every 10 minutes from 22:00 on the 18th to 00:40; under `chaos`, the notifier
    dies at every AWS call of the 00:00 tick (every retry included): the sweep that finds the
    18th's digest due."""
    published = []
    midnight = datetime(2026, 11, 19, tzinfo=UTC)
    for minutes in range(-120, 50, 10):
        at = midnight + timedelta(minutes=minutes)
        if chaos is not None:
            chaos.crash_rate = 0.999 if minutes == 0 else 0.0
        hud.serve(TRUNK.snapshot(at))
        runtime.tick(at)
        published += runtime.published(at)
    return published


def test_a_digest_whose_notifier_died_goes_at_the_next_sweep_once() -> None:
    hud, hook = HudServer(), WebhookServer()
    document = {
        "trunks": [{"repo": "pytorch/pytorch", "source": "hud", "url": hud.url}],
        "receivers": [{"type": "webhook", "url": hook.url + "/digest", "digest": True}],
    }
    chaos = Chaos(7, 0.0, spared=SPARED)
    try:
        deployment = load_deployment(document, RECEIVER_TYPES, sources=sources.REGISTRY)
        with LocalRuntime(chaos=chaos).start(deployment) as runtime:
            published = run_across_midnight(runtime, hud, chaos)
    finally:
        hud.stop()
        hook.stop()
    assert chaos.stats.crashes and {crash.function for crash in chaos.stats.crashes} == {"NotifierFunction"}
    # Nothing went at midnight; the next sweep sent the 18th's digest, once to each.
    sent = digests(published)
    assert [(m.at, m.message["day"]) for m in sent] == [
        (datetime(2026, 11, 19, 0, 10, tzinfo=UTC), "2026-11-18")
    ]
    assert [body["day"] for _, body in hook.posts if body.get("kind") == KIND] == ["2026-11-18"]


# (call, seed): each seed's draw dies before or after the call.
CRASHES = [
    ("sns.Publish", 3),  # before: nothing sent
    ("sns.Publish", 1),  # after: sent, nothing recorded: once more (the duplicate SNS allows)
    ("storage.logs.advance", 1),  # before the log records it: once more, as above
    ("storage.logs.advance", 2),  # after: sent and recorded: not again
]


@pytest.mark.parametrize(("call", "seed"), CRASHES)
def test_a_digest_whose_notifier_dies_while_sending_it_is_sent_once(call: str, seed: int) -> None:
    """The notifier dies at the midnight sweep's `call`: before or after its publish (nothing
    sent, or sent and not recorded), before or after its log entry advances under the
    delivery's claim. The next sweep sends the 18th's digest if it did not go, and only then:
    once, but where the crash came right after the publish and before that record (the one
    duplicate SNS allows, design.md §4)."""
    hud = HudServer()
    chaos = Chaos(seed, 0.0, spared=SPARED, calls=[call])
    published: list[Published] = []
    try:
        deployment = load_deployment(
            {"trunks": [{"repo": "pytorch/pytorch", "source": "hud", "url": hud.url}]},
            RECEIVER_TYPES,
            sources=sources.REGISTRY,
        )
        with LocalRuntime(chaos=chaos, store="memory").start(deployment) as runtime:
            midnight = datetime(2026, 11, 19, tzinfo=UTC)
            for minutes in range(-20, 40, 10):
                at = midnight + timedelta(minutes=minutes)
                chaos.crash_rate = 0.999 if minutes == 0 else 0.0
                hud.serve(TRUNK.snapshot(at))
                runtime.tick(at)
                published += runtime.published(at)
    finally:
        hud.stop()
    (crash,) = chaos.stats.crashes  # its retries wait for the next sweep
    assert (crash.function, crash.call) == ("NotifierFunction", call)
    days = [m.message["day"] for m in digests(published)]
    assert days == ["2026-11-18"] * (1 + chaos.stats.after_publish), crash
