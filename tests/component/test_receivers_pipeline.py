"""Slack and GitHub-issues receivers on the local runtime, against stand-ins on 127.0.0.1:
the project's scenarios replayed with a `receivers` header, receivers failing and recovering,
redelivered stream batches and the notification log read through the storage port (on the
in-memory store), and the log lost (its items deleted from moto's table)."""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

from tests.support.aws import record_stream_batches, table_items
from tests.support.scenarios import SCENARIOS
from trunkwatch.app.receivers import receiver_name
from trunkwatch.channels import RECEIVER_TYPES
from trunkwatch.domain.alerts import RECEIVER
from trunkwatch.domain.clock import format_time
from trunkwatch.domain.config import load_deployment
from trunkwatch.domain.notification_log import LogEntry
from trunkwatch.storage.port import Storage
from trunkwatch_local import apigw
from trunkwatch_local.github_server import GitHubServer
from trunkwatch_local.receiver_servers import SlackServer
from trunkwatch_local.replay import Replay, read_replay
from trunkwatch_local.runtime import LambdaContext, LocalRuntime
from trunkwatch_local.scenario import DEMO_JOBS, Trunk, _demo_outcome
from trunkwatch_local.session import Session, replay_into, run_replay

LABELS = ["trunk-health", "ci"]
TRUNK = "pytorch/pytorch#main"
TOKEN_VARIABLE = "TRUNKWATCH_TEST_GITHUB_TOKEN"
FINGERPRINT = re.compile(r"trunkwatch-fingerprint: ([0-9a-f]{16})")


@pytest.fixture
def slack() -> Iterator[SlackServer]:
    server = SlackServer()
    yield server
    server.stop()


@pytest.fixture
def github(monkeypatch: pytest.MonkeyPatch) -> Iterator[GitHubServer]:
    monkeypatch.setenv(TOKEN_VARIABLE, "test-token-not-a-secret")
    server = GitHubServer()
    yield server
    server.stop()


def receivers(slack: SlackServer, github: GitHubServer) -> list[dict[str, Any]]:
    return [
        {"type": "slack", "url": f"{slack.url}/services/T000/B000/XXXX"},
        {
            "type": "github_issues",
            "api_url": github.url,
            "repo": "pytorch/pytorch",
            "labels": LABELS,
            "token": {"env": TOKEN_VARIABLE},
        },
    ]


def log_of(storage: Storage, receiver: dict[str, Any]) -> dict[str, LogEntry]:
    """The trunk's notification log for one of `receivers`' entries, by fingerprint."""
    document = {"trunks": [{"repo": "pytorch/pytorch"}], "receivers": [receiver]}
    (config,) = load_deployment(document, RECEIVER_TYPES).receivers
    return storage.logs.of_receiver(TRUNK, receiver_name(config))


def api_trunks(runtime: LocalRuntime) -> list[dict[str, Any]]:
    """`GET /api/v2/trunks`, as the status page reads it."""
    answer = runtime.invoke("api", apigw.proxy_event("GET", "/api/v2/trunks"))
    assert answer["statusCode"] == 200
    trunks: list[dict[str, Any]] = json.loads(answer["body"])
    return trunks


def slack_posts(slack: SlackServer) -> Counter[tuple[str, str]]:
    """(status, fingerprint) of every post, from its text and its context block."""
    out: Counter[tuple[str, str]] = Counter()
    for post in slack.posts:
        status = "firing" if post["text"].startswith("FIRING: ") else "resolved"
        context = post["attachments"][0]["blocks"][-1]["elements"][1]["text"]
        out[(status, context.removeprefix("Fingerprint: `").rstrip("`"))] += 1
    return out


def sns_messages(published: list[Any]) -> Counter[tuple[str, str]]:
    return Counter((p.message["status"], p.attributes["fingerprint"]) for p in published)


def trunk_level_episodes(published: list[Any]) -> list[tuple[str, str, str]]:
    return [
        (p.message["status"], p.attributes["alertname"], p.attributes["fingerprint"])
        for p in published
        if not p.message["commonLabels"].get("job")
    ]


@pytest.mark.parametrize("name", ["basic-break", "infra-outage", "source-outage"])
def test_a_scenario_reaches_slack_and_github_issues(
    name: str, slack: SlackServer, github: GitHubServer
) -> None:
    replay = read_replay(SCENARIOS / f"{name}.jsonl")
    replay.receivers = receivers(slack, github)
    published = list(run_replay(replay, store="memory"))

    assert published and slack_posts(slack) == sns_messages(published)  # one post per message
    for message in published:  # the default runbook_url: the API's runbook page, at the alert
        alertname, annotations = message.attributes["alertname"], message.message["commonAnnotations"]
        expected = rf"http://127\.0\.0\.1:\d+/runbook#{alertname.lower()}"
        assert re.fullmatch(expected, annotations["runbook_url"])
    episodes = trunk_level_episodes(published)
    firing = [e for e in episodes if e[0] == "firing"]
    assert firing and len(github.issues) == len(firing)  # one issue per firing episode
    for issue in github.issues.values():
        fingerprint = FINGERPRINT.search(issue.body)
        assert fingerprint and issue.labels == LABELS
        resolved = ("resolved", *next(e[1:] for e in firing if e[2] == fingerprint.group(1)))
        assert resolved in episodes  # every scenario resolves what it fires
        assert (issue.state, issue.state_reason) == ("closed", "completed")
        assert issue.comments[-1].startswith("**Resolved**")
        assert issue.title.startswith(resolved[1] + " on pytorch/pytorch@main: ")
    assert set(github.authorizations) == {"Bearer test-token-not-a-secret"}


def _pipeline(
    slack: SlackServer, github: GitHubServer, store: str
) -> Iterator[tuple[LocalRuntime, Any, Trunk]]:
    from trunkwatch_local.hud_server import HudServer

    hud = HudServer()
    trunk = Trunk(jobs=DEMO_JOBS, outcome=_two_breaks)
    replay = Replay("pytorch/pytorch", "main", {}, receivers=receivers(slack, github))
    runtime = LocalRuntime(store=store).start(replay.deployment(hud.url))
    try:
        yield runtime, hud, trunk
    finally:
        runtime.stop()
        hud.stop()


@pytest.fixture
def pipeline(slack: SlackServer, github: GitHubServer) -> Iterator[tuple[LocalRuntime, Any, Trunk]]:
    yield from _pipeline(slack, github, "memory")


@pytest.fixture
def pipeline_on_moto(slack: SlackServer, github: GitHubServer) -> Iterator[tuple[LocalRuntime, Any, Trunk]]:
    """The pipeline with its items in moto's table, for the tests that read or lose them."""
    yield from _pipeline(slack, github, "dynamodb")


SECOND = "lint / lintrunner-noclang / linux-job"
FIRST = "pull / linux-jammy-py3.10-gcc11 / test (default, linux.2xlarge)"  # shards merged


def _two_breaks(job: str, index: int) -> str:
    """The demo's break (commits 4-8) and a second job broken on commits 6-10: the
    trunk-level alert's job list grows, then shrinks, then it resolves."""
    if job == SECOND and 6 <= index <= 10:
        return "failure"
    return _demo_outcome(job, index)


def run(runtime: LocalRuntime, hud: Any, trunk: Trunk, hours: float, after: float = 0) -> list[Any]:
    """The alerts' SNS messages up to `hours` after the trunk's start (past midnight, the
    topic's daily digest too: tests/component/test_digest.py tells of it)."""
    sent = []
    start = trunk.start + timedelta(hours=after)
    for at, snapshot in trunk.polls(timedelta(minutes=10), trunk.start + timedelta(hours=hours)):
        if at <= start:
            continue
        hud.serve(snapshot)
        runtime.tick(at)
        sent += [p for p in runtime.published(at) if not p.is_digest]
    return sent


def test_job_list_changes_are_comments_on_the_one_issue(pipeline: Any, github: GitHubServer) -> None:
    runtime, hud, trunk = pipeline
    sent = run(runtime, hud, trunk, 9)
    (issue,) = github.issues.values()
    updates = [p for p in sent if p.message["notification_reason"].startswith("update")]
    assert len(updates) == 2  # the second job started failing, then the first stopped
    assert [c.split("\n")[0] for c in issue.comments] == [
        f"**Failing jobs changed**: `started failing: {SECOND}`",
        f"**Failing jobs changed**: `stopped failing: {FIRST}`",
        "**Resolved**: HUD is broken - 3 commits in a row (<=5 jobs failing)",
    ]
    assert issue.state == "closed"


def test_a_receiver_failing_for_a_while_gets_everything_once(
    pipeline: Any, slack: SlackServer, github: GitHubServer
) -> None:
    runtime, hud, trunk = pipeline
    slack.fail_next(8)  # a Slack outage across the firing ticks
    github.fail_next(5, failure=502)
    sent = run(runtime, hud, trunk, 9)
    assert slack.failures == 0 and github.failures == 0
    # SNS was unaffected: it sent at once; Slack caught up, once each, no loss.
    assert slack_posts(slack) == sns_messages(sent)
    assert len(github.issues) == 1 and len(next(iter(github.issues.values())).comments) == 3
    failed = log_of(runtime.stack.storage(), receivers(slack, github)[0]).values()
    assert failed and all(entry.last_status == "resolved" for entry in failed)


def test_redelivered_stream_batches_send_nothing_again(
    pipeline: Any, slack: SlackServer, github: GitHubServer
) -> None:
    runtime, hud, trunk = pipeline
    delivered = record_stream_batches(runtime)
    run(runtime, hud, trunk, 5)
    posts, issues, requests = len(slack.posts), len(github.issues), len(github.requests)
    assert posts and issues == 1
    runtime.clock.set(trunk.start + timedelta(hours=5))
    for function, event in delivered:
        runtime.invoke(function, event)
    runtime.pump.drain()
    assert len(slack.posts) == posts and len(github.issues) == 1
    assert github.requests[requests:] == []  # nothing due: GitHub not even asked


def test_lost_notification_log_does_not_open_a_second_issue(
    pipeline_on_moto: Any, github: GitHubServer
) -> None:
    runtime, hud, trunk = pipeline_on_moto
    github.add_pull_request(body="a pull request is listed with issues; never taken for one")
    run(runtime, hud, trunk, 4)
    assert len(github.issues) == 1
    for entry in table_items("notification"):  # the whole notification log is gone
        runtime.dynamodb.delete_item(TableName="trunkwatch-local", Key={"pk": entry["pk"], "sk": entry["sk"]})
    run(runtime, hud, trunk, 9, after=4)
    (issue,) = github.issues.values()
    assert issue.state == "closed"
    assert sum(c.startswith("**Resolved**") for c in issue.comments) == 1


def test_a_message_the_receiver_refuses_for_good_does_not_jam_the_ones_after_it(
    slack: SlackServer, github: GitHubServer
) -> None:
    replay = read_replay(SCENARIOS / "basic-break.jsonl")
    replay.receivers = receivers(slack, github)
    slack.fail_next(1, 422)  # the first message is refused; the receiver takes the rest
    session = Session()
    try:
        session.start(replay.deployment(session.hud.url))
        storage = session.runtime.stack.storage()
        events = replay_into(session, replay)
        published = [next(events)]  # the tick of the refused message, as it left the log
        logs = log_of(storage, replay.receivers[0])
        published += events
        listed = api_trunks(session.runtime)
        (rejection,) = storage.logs.rejected(TRUNK)
    finally:
        session.stop()
    first = published[0]
    refused = (first.message["status"], first.attributes["fingerprint"])

    assert len(published) > 1 and slack.failures == 0
    assert slack_posts(slack) == sns_messages(published) - Counter([refused])  # the rest, once each
    entry = logs[refused[1]]
    assert entry.last_status == "firing"  # done with: not due again at the next tick
    # Kept in the log with the receiver's entry, and listed on the API with the trunk.
    assert (rejection.receiver, rejection.fingerprint) == (entry.receiver, refused[1])
    (trunk,) = listed
    (shown,) = trunk["rejectedNotifications"]
    assert shown == {
        "receiver": entry.receiver,
        "alertname": first.attributes["alertname"],
        "job": first.message["commonLabels"].get("job"),
        "fingerprint": refused[1],
        "status": "firing",
        "reason": first.message["notification_reason"],
        "at": format_time(first.at),  # the tick that tried it
        "answer": f"Slack receiver {entry.receiver} answered 422: scripted failure",
    }


def test_a_tick_out_of_time_leaves_every_receiver_for_the_next_tick(
    pipeline: Any, slack: SlackServer, github: GitHubServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    runtime, hud, trunk = pipeline
    with monkeypatch.context() as short:
        short.setattr(LambdaContext, "get_remaining_time_in_millis", lambda self: 5_000)
        assert run(runtime, hud, trunk, 4) == []  # firing by now, but no time to send
    # Nothing logged by any receiver; the topic's digest entry anchors its first digest
    # (design.md §4.4): no message.
    storage = runtime.stack.storage()
    logged = [log_of(storage, receiver) for receiver in receivers(slack, github)]
    topic = storage.logs.of_receiver(TRUNK, RECEIVER).values()
    assert slack.posts == [] and github.requests == [] and logged == [{}, {}]
    assert [entry.alertname for entry in topic] == ["DailyDigest"]
    sent = run(runtime, hud, trunk, 4.5, after=4)  # the next tick has the time: all of it goes
    assert sent and slack_posts(slack) == sns_messages(sent) and len(github.issues) == 1


def test_the_trunk_level_page_names_every_failing_jobs_culprit(
    slack: SlackServer, github: GitHubServer
) -> None:
    replay = read_replay(SCENARIOS / "basic-break.jsonl")
    replay.receivers = receivers(slack, github)
    published = list(run_replay(replay, store="memory"))
    culprits = {  # each job's culprit, as its own alert names it
        p.message["commonLabels"]["job"]: p.message["commonAnnotations"]
        for p in published
        if p.attributes["alertname"] == "TrunkJobFailing"
    }
    pages = [p for p in published if p.attributes["alertname"] in ("TrunkBroken", "TrunkBadlyBroken")]
    assert pages and any(p.message["status"] == "firing" for p in pages)
    (issue,) = github.issues.values()
    for page in pages:
        jobs = page.message["commonAnnotations"]["failing_jobs"].splitlines()
        assert jobs
        for job in jobs:
            notes = culprits[job]
            said = (
                f"culprit {notes['culprit_sha'][:12]} #{notes['culprit_pr']} by {notes['culprit_author']}, "
            )
            assert re.search(rf"- {re.escape(job)}\n  {re.escape(said)}\d+ commits in a row\n", page.email)
            assert f"`{said}" in issue.body
            assert any(said in json.dumps(post) for post in slack.posts)


def test_a_replayed_break_comments_once_on_the_culprit_pr(github: GitHubServer) -> None:
    replay = read_replay(SCENARIOS / "basic-break.jsonl")
    replay.receivers = [{"type": "github_culprit", "api_url": github.url, "token": {"env": TOKEN_VARIABLE}}]
    pr = github.add_pull_request(body="the culprit", number=160004)
    session = Session(LocalRuntime(store="dynamodb"))
    try:
        session.start(replay.deployment(session.hud.url))
        published = []
        for message in replay_into(session, replay):
            published.append(message)
            # After every message the notification log is lost: only the marker on the pull
            # request keeps the comment from being posted again.
            for entry in table_items():
                if entry.get("kind", {}).get("S") == "notification":
                    session.runtime.dynamodb.delete_item(
                        TableName="trunkwatch-local", Key={"pk": entry["pk"], "sk": entry["sk"]}
                    )
    finally:
        session.stop()
    firing = [
        p.message["commonLabels"]["job"]
        for p in published
        if p.attributes["alertname"] == "TrunkJobFailing" and p.message["status"] == "firing"
    ]
    assert firing and len(github.pull_comments[pr]) == len(set(firing))  # one per job's episode
    for job, comment in zip(sorted(set(firing)), sorted(github.pull_comments[pr]), strict=True):
        assert f"this PR is the first commit on which `{job}` failed" in comment
    assert [r.method for r in github.requests].count("POST") == len(set(firing))


def test_a_receiver_routes_on_the_culprits_author_and_slack_mentions_them() -> None:
    """basic-break's culprit is dev4's: a receiver matching `author="dev4"` gets every message
    of the break, mentioning dev4's Slack user; one matching another author gets none."""
    authors, others = SlackServer(), SlackServer()
    try:
        replay = read_replay(SCENARIOS / "basic-break.jsonl")
        replay.receivers = [
            {
                "type": "slack",
                "url": f"{authors.url}/services/T000/B000/AAAA",
                "matchers": ['author="dev4"'],
                "slack_users": {"dev4": "U0DEV4"},
            },
            {"type": "slack", "url": f"{others.url}/services/T000/B000/BBBB", "matchers": ['author="dev9"']},
        ]
        published = list(run_replay(replay, store="memory"))
    finally:
        authors.stop()
        others.stop()
    assert published and slack_posts(authors) == sns_messages(published) and others.posts == []
    for post in authors.posts:
        assert "<@U0DEV4>" in json.dumps(post) and "by dev4" not in json.dumps(post)
    # The alerts carry the login: the job alert its culprit's, the trunk-level one its jobs'.
    for message in published:
        notes = message.message["commonAnnotations"]
        assert notes.get("culprit_author", notes.get("culprit_authors")) == "dev4"


def _sent(published: list[Any]) -> list[tuple[str, str, str]]:
    """Each published message's time, status (or kind) and alert name."""
    return [
        (m.at, m.message.get("status", m.message.get("kind", "")), m.attributes.get("alertname", ""))
        for m in published
    ]


def test_the_stack_topic_is_a_receiver_the_configuration_narrows_or_turns_off() -> None:
    """basic-break with a `topic` entry: matched, the stack's topic gets only the trunk-level
    messages; turned off, it gets nothing while a Slack receiver gets every message the topic
    would have."""
    everything = list(run_replay(read_replay(SCENARIOS / "basic-break.jsonl"), store="memory"))
    assert {m.attributes["alertname"] for m in everything} == {"TrunkJobFailing", "TrunkBroken"}

    replay = read_replay(SCENARIOS / "basic-break.jsonl")
    replay.receivers = [{"type": "topic", "matchers": ['alertname="TrunkBroken"']}]
    narrowed = list(run_replay(replay, store="memory"))
    assert _sent(narrowed) == [sent for sent in _sent(everything) if sent[2] == "TrunkBroken"]

    slack = SlackServer()
    try:
        replay = read_replay(SCENARIOS / "basic-break.jsonl")
        replay.receivers = [
            {"type": "topic", "enabled": False},
            {"type": "slack", "url": f"{slack.url}/services/T000/B000/XXXX"},
        ]
        assert list(run_replay(replay, store="memory")) == []
    finally:
        slack.stop()
    assert slack_posts(slack) == sns_messages(everything)
