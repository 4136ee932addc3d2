"""The Slack and GitHub-issues channels against stand-ins: what they send, Slack's limits,
GitHub's REST shapes, and bad answers (status, timeout, not JSON) as ChannelError."""

from __future__ import annotations

import dataclasses
import json
import math
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from trunkwatch.app.notify import channels_for
from trunkwatch.app.receivers import receiver_channels, receiver_name
from trunkwatch.app.settings import Settings
from trunkwatch.channels import RECEIVER_TYPES
from trunkwatch.channels.base import ChannelError, ChannelRejected, Notification
from trunkwatch.channels.github_culprit import GitHubCulpritChannel
from trunkwatch.channels.github_culprit import marker as marker_of_culprit
from trunkwatch.channels.github_issues import GitHubIssuesChannel, marker
from trunkwatch.channels.slack import MAX_BLOCKS, MAX_SECTION_CHARS, SlackChannel, slack_message
from trunkwatch.channels.sns import SnsChannel
from trunkwatch.channels.transport import failure as failure_of
from trunkwatch.channels.webhook import webhook_body
from trunkwatch.domain.alerts import RECEIVER, Alert, CommitSummary, FailingJob
from trunkwatch.domain.config import ConfigError, ReceiverConfig, load_deployment
from trunkwatch.domain.config import receiver_config as read_receiver
from trunkwatch.net.http import Response
from trunkwatch_local.github_server import GitHubServer
from trunkwatch_local.receiver_servers import SlackServer, WebhookServer
from trunkwatch_local.replay import ReplayError, parse_replay
from trunkwatch_local.stand_in import GARBAGE

START = datetime(2026, 11, 18, 18, 0, tzinfo=UTC)
TRUNK_LABELS = {
    "alertname": "TrunkBroken",
    "repo": "pytorch/pytorch",
    "branch": "main",
    "priority": "P2",
    "team": "ci-oncall",
}
JOB_LABELS = {**TRUNK_LABELS, "alertname": "TrunkJobFailing", "priority": "P3", "job": "pull / a"}
ANNOTATIONS = {
    "summary": "HUD is broken - 3 commits in a row (<=5 jobs failing)",
    "failing_jobs": "pull / a\npull / <b> & *c*",
    "runbook_url": "http://127.0.0.1:9093/runbook#trunkbroken",
    "silence_url": "http://127.0.0.1:9093/#/silences/new?filter=x",
}
WEBHOOK_PATH = "/services/T000/B000/secretpart"
FAILING = FailingJob(3, CommitSummary("0123456789abcdef", "Make x faster", 4242, "octocat", START))


def receiver_config(data: dict[str, Any]) -> ReceiverConfig:
    return read_receiver(data, RECEIVER_TYPES)


def note(
    labels: dict[str, str] = TRUNK_LABELS,
    status: str = "firing",
    reason: str = "firing",
    annotations: dict[str, str] = ANNOTATIONS,
    jobs: tuple[str, ...] = ("pull / a", "pull / <b> & *c*"),
    failing: FailingJob | None = None,
) -> Notification:
    """A trunk-level alert failing on `jobs`, or a job alert failing as `failing` says."""
    ends = START if status == "resolved" else None
    alert = Alert(
        dict(labels),
        dict(annotations),
        starts_at=START,
        ends_at=ends,
        generator_url="https://hud.pytorch.org/hud/pytorch/pytorch/main",
        jobs=dict.fromkeys(jobs, FAILING),
        failing=failing,
    )
    return Notification(alert, status, reason, "http://127.0.0.1:9093", "r")


def everything(labels: dict[str, str]) -> bool:
    return True


@pytest.fixture
def slack() -> Iterator[SlackServer]:
    server = SlackServer()
    yield server
    server.stop()


@pytest.fixture
def github() -> Iterator[GitHubServer]:
    server = GitHubServer()
    yield server
    server.stop()


def slack_channel(server: SlackServer, timeout_s: float = 5) -> SlackChannel:
    return slack_channel_at(server.url, timeout_s)


def slack_channel_at(url: str, timeout_s: float = 5) -> SlackChannel:
    return SlackChannel("slack:test", lambda: url + WEBHOOK_PATH, everything, timeout_s=timeout_s)


def github_channel(
    url: str, labels: tuple[str, ...] = ("trunk-health",), timeout_s: float = 5
) -> GitHubIssuesChannel:
    return GitHubIssuesChannel(
        "github_issues:pytorch/pytorch", url, "pytorch/pytorch", labels, lambda: "tkn", everything, timeout_s
    )


# --- Slack ------------------------------------------------------------------------------


def test_slack_message_carries_the_email_content_in_a_coloured_attachment(slack: SlackServer) -> None:
    slack_channel(slack).send(note())
    (post,) = slack.posts
    assert post["text"] == "FIRING: HUD is broken - 3 commits in a row (&lt;=5 jobs failing)"
    (attachment,) = post["attachments"]
    assert attachment["color"] == "#e8912d"  # P2 firing
    text = json.dumps(attachment["blocks"])
    assert "Failing: 2 jobs" in text and "pull / &lt;b&gt; &amp; *c*" in text  # mrkdwn-escaped
    assert "<http://127.0.0.1:9093/runbook#trunkbroken|Runbook>" in text
    assert "Source: pytorch/pytorch@main" in text and note().alert.fingerprint in text
    assert attachment["blocks"][0]["type"] == "header"


def _mrkdwn_texts(message: dict[str, Any]) -> list[str]:
    """Every text Slack parses for control sequences: all but the plain_text header."""
    (attachment,) = message["attachments"]
    texts = [message["text"], attachment["fallback"]]
    for block in attachment["blocks"]:
        if block["type"] == "section":
            texts.append(block["text"]["text"])
        elif block["type"] == "context":
            texts += [element["text"] for element in block["elements"]]
        else:
            assert block["text"]["type"] == "plain_text"
    return texts


def test_slack_shows_a_job_named_like_a_mention_literally() -> None:
    """Slack's mrkdwn reads `<...>` as a link or a mention and `&` as an entity: a job
    named `<!channel>` must not page the whole channel, and shows as written."""
    job = "pull / <!channel> & <@U024BE7LH|bob> <https://evil.example|docs>"
    labels = {**JOB_LABELS, "job": job}
    annotations = {**ANNOTATIONS, "summary": f"{job} failed 3 commits in a row", "failing_jobs": job}
    message = slack_message(note(labels=labels, annotations=annotations, jobs=(job,)))
    texts = _mrkdwn_texts(message)
    for text in texts:
        assert "<!" not in text and "<@" not in text and "<https://evil" not in text, text
    escaped = "pull / &lt;!channel&gt; &amp; &lt;@U024BE7LH|bob&gt; &lt;https://evil.example|docs&gt;"
    assert message["text"] == f"FIRING: {escaped} failed 3 commits in a row"
    assert message["attachments"][0]["fallback"] == message["text"]
    assert any(escaped in text for text in texts[2:])  # the job's line
    header = message["attachments"][0]["blocks"][0]["text"]
    assert header["type"] == "plain_text" and job in header["text"]  # plain text: as written


def test_slack_mentions_a_mapped_author_and_names_the_others_by_login() -> None:
    users = {"octocat": "U024BE7LH"}
    # A job alert's culprit, and a trunk-level alert's jobs' culprits (all octocat's here).
    for message in (
        slack_message(note(labels=JOB_LABELS, jobs=(), failing=FAILING), users),
        slack_message(note(), users),
    ):
        text = json.dumps(message["attachments"][0]["blocks"])
        assert "by <@U024BE7LH>" in text and "by octocat" not in text
        assert "<@" not in message["text"]  # the notification text pings no one
    unmapped = json.dumps(slack_message(note(), {"someone": "U0SOMEONE"}))
    assert "by octocat" in unmapped and "<@" not in unmapped


def test_a_slack_user_id_that_is_none_is_refused_naming_the_login() -> None:
    with pytest.raises(
        ConfigError, match=r"receivers\.0\.slack_users: octocat: '@octocat' is not a Slack user id"
    ):
        load_deployment(
            {
                "trunks": [{"repo": "pytorch/pytorch"}],
                "receivers": [
                    {"type": "slack", "url": "https://x.invalid/h", "slack_users": {"octocat": "@octocat"}}
                ],
            },
            RECEIVER_TYPES,
        )
    with pytest.raises(ConfigError, match=r"slack_users: 'not a login' is not a GitHub login"):
        receiver_config(
            {"type": "slack", "url": "https://x.invalid/h", "slack_users": {"not a login": "U1AB"}}
        )


def test_a_receiver_matches_on_an_author_the_alert_blames_or_on_its_team() -> None:
    by_author, by_team = receiver_channels(
        [
            receiver_config(
                {"type": "slack", "url": "https://x.invalid/a", "matchers": ['author="octocat"']}
            ),
            receiver_config(
                {"type": "slack", "url": "https://x.invalid/b", "matchers": ['team="ci-oncall"']}
            ),
        ]
    )
    trunk_level = note().alert  # its jobs' culprits are octocat's
    assert trunk_level.authors == ("octocat",)
    assert any(by_author.accepts(labels) for labels in trunk_level.routing_labels())
    monalisas = dataclasses.replace(FAILING, culprit=dataclasses.replace(FAILING.culprit, author="monalisa"))
    job_alert = note(labels=JOB_LABELS, jobs=(), failing=monalisas).alert
    assert job_alert.authors == ("monalisa",)
    assert not any(by_author.accepts(labels) for labels in job_alert.routing_labels())
    assert all(
        by_team.accepts(labels) for labels in [*trunk_level.routing_labels(), *job_alert.routing_labels()]
    )
    # A suspect the reruns cleared blames no one; the fingerprint never depends on the author.
    cleared = dataclasses.replace(FAILING, verdict="environmental")
    assert dataclasses.replace(trunk_level, jobs={"pull / a": cleared}).authors == ()
    assert dataclasses.replace(job_alert, failing=cleared).authors == ()
    assert "author" not in trunk_level.labels


def test_slack_cuts_an_escaped_text_between_entities() -> None:
    summary = "<" * 2000  # 8000 characters once escaped
    message = slack_message(note(annotations={**ANNOTATIONS, "summary": summary}))
    text = message["text"]
    assert len(text) <= 3000 and text.startswith("FIRING: &lt;") and text.endswith("&lt;")


def test_slack_colours_by_status_and_priority() -> None:
    resolved = slack_message(note(status="resolved", reason="resolved"))
    assert resolved["attachments"][0]["color"] == "#2eb886"
    assert resolved["text"].startswith("RESOLVED: ")
    p1 = slack_message(note(labels={**TRUNK_LABELS, "priority": "P1"}))
    assert p1["attachments"][0]["color"] == "#d40e0d"


def test_slack_limits_are_kept_with_a_note() -> None:
    jobs = [f"pull / job {n} " + "x" * 200 for n in range(50)]
    annotations = {**ANNOTATIONS, "failing_jobs": "\n".join(jobs), "summary": "s" * 400}
    message = slack_message(note(annotations=annotations, jobs=tuple(jobs)))
    blocks = message["attachments"][0]["blocks"]
    assert len(blocks) <= MAX_BLOCKS
    assert len(blocks[0]["text"]["text"]) <= 150
    sections = [b["text"]["text"] for b in blocks if b["type"] == "section"]
    assert all(len(text) <= MAX_SECTION_CHARS for text in sections)
    assert any("cut to fit Slack's limits" in text for text in sections)


@pytest.mark.parametrize("failure", [500, 404, 429])
def test_slack_non_2xx_is_a_channel_error_without_the_url(slack: SlackServer, failure: int) -> None:
    slack.fail_next(1, failure)
    with pytest.raises(ChannelError) as raised:
        slack_channel(slack).send(note())
    assert str(failure) in str(raised.value) and "secretpart" not in str(raised.value)
    assert slack.posts == []
    slack_channel(slack).send(note())  # the retry at the next tick goes through
    assert len(slack.posts) == 1


@pytest.mark.parametrize(
    ("status", "body", "rejected", "said"),
    [
        (400, b"invalid_blocks", True, "answered 400: invalid_blocks"),
        (422, b'{"message": "Validation Failed", "errors": []}', True, "answered 422: Validation Failed"),
        (413, b"", True, "answered 413"),
        (429, b"rate_limited", False, "answered 429: rate_limited"),
        (408, b"", False, "answered 408"),
        (403, b'{"message": "You have exceeded a secondary rate limit"}', False, "secondary rate limit"),
        (404, b"no_service", False, "answered 404: no_service"),
        (503, b"<html>busy</html>", False, "answered 503"),
    ],
)
def test_a_refusal_of_the_message_itself_is_told_apart_from_a_failure_worth_retrying(
    status: int, body: bytes, rejected: bool, said: str
) -> None:
    error = failure_of(Response(status, {}, body), "Slack receiver s")
    assert isinstance(error, ChannelRejected) is rejected and said in str(error)
    assert "<html>" not in str(error)


def test_slack_unreachable_is_a_channel_error() -> None:
    server = SlackServer()
    url = server.url
    server.stop()
    channel = SlackChannel("slack:x", lambda: url + WEBHOOK_PATH, everything)
    with pytest.raises(ChannelError) as raised:
        channel.send(note())
    assert "secretpart" not in str(raised.value)


# --- GitHub issues ----------------------------------------------------------------------


def test_github_issue_opened_once_commented_on_update_and_closed(github: GitHubServer) -> None:
    channel = github_channel(github.url)
    channel.send(note())
    channel.send(note(reason="reminder"))  # the open issue already says it
    channel.send(note(reason="firing"))  # lost local state: found by its marker, not opened again
    (issue,) = github.issues.values()
    assert issue.labels == ["trunk-health"] and marker(note().alert.fingerprint) in issue.body
    assert issue.title == "TrunkBroken on pytorch/pytorch@main: " + ANNOTATIONS["summary"]
    assert "`pull / <b> & *c*`" in issue.body  # shown as written, not as markdown
    assert "[Runbook](http://127.0.0.1:9093/runbook#trunkbroken)" in issue.body

    update = note(reason="update; started failing: pull / c", jobs=("pull / a", "pull / c"))
    update.alert.annotations["failing_jobs"] = "pull / a\npull / c"
    channel.send(update)
    channel.send(update)  # a retry of a comment that went through is not posted twice
    assert len(issue.comments) == 1 and "started failing: pull / c" in issue.comments[0]

    channel.send(note(status="resolved", reason="resolved"))
    assert (issue.state, issue.state_reason) == ("closed", "completed")
    assert issue.comments[-1].startswith("**Resolved**") and len(issue.comments) == 2
    channel.send(note(status="resolved", reason="resolved"))  # already closed: nothing
    assert len(issue.comments) == 2

    channel.send(note())  # the next episode: a new issue
    assert len(github.issues) == 2


def test_github_uses_the_rest_api_shapes(github: GitHubServer) -> None:
    github_channel(github.url, labels=("a", "b c")).send(note())
    listed, posted = github.requests
    assert (listed.method, listed.target) == (
        "GET",
        "/repos/pytorch/pytorch/issues?state=open&per_page=100&labels=a%2Cb+c",
    )
    assert (posted.method, posted.target) == ("POST", "/repos/pytorch/pytorch/issues")
    assert posted.headers["authorization"] == "Bearer tkn"
    assert posted.headers["accept"] == "application/vnd.github+json"
    assert posted.headers["x-github-api-version"] == "2022-11-28"


def test_github_finds_its_issue_on_a_later_page_and_skips_pull_requests(github: GitHubServer) -> None:
    channel = github_channel(github.url, labels=())
    for n in range(150):
        github.add_pull_request(body=marker(note().alert.fingerprint) if n == 0 else f"pr {n}")
    channel.send(note())
    channel.send(note())
    assert len(github.issues) == 1  # found on page 2, after 150 pull requests


def test_job_alerts_do_not_go_to_github_issues(github: GitHubServer) -> None:
    channel = github_channel(github.url)
    assert channel.accepts(TRUNK_LABELS) and not channel.accepts(JOB_LABELS)


@pytest.mark.parametrize("failure", [500, 403, GARBAGE])
def test_github_bad_answers_are_channel_errors_and_nothing_is_lost(
    github: GitHubServer, failure: int | str
) -> None:
    channel = github_channel(github.url)
    github.fail_next(1, failure)
    with pytest.raises(ChannelError):
        channel.send(note())
    assert github.issues == {}
    channel.send(note())
    assert len(github.issues) == 1


class _Slow(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        time.sleep(2)

    do_POST = do_GET

    def log_message(self, format: str, *args: Any) -> None:
        pass


def test_a_receiver_that_does_not_answer_in_time_is_a_channel_error() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Slow)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        for channel in (
            github_channel(url, timeout_s=0.3),
            SlackChannel("slack:x", lambda: url + WEBHOOK_PATH, everything, timeout_s=0.3),
        ):
            # Cut at the channel's timeout (the stand-in sleeps 2 s, then hangs up unanswered).
            with pytest.raises(ChannelError, match=r"no answer within 0\.3s"):
                channel.send(note())
    finally:
        server.shutdown()
        server.server_close()


def test_a_receiver_follows_no_redirect(slack: SlackServer, github: GitHubServer) -> None:
    class Moved(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # the API, or the webhook, moved to the stand-ins' host
            target = github.url if self.path.startswith("/repos/") else slack.url
            self.send_response(301)
            self.send_header("Location", target + self.path)
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_POST = do_GET

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Moved)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        for channel in (github_channel(url), slack_channel_at(url)):
            with pytest.raises(ChannelError, match="answered 301") as raised:
                channel.send(note())
            assert not isinstance(raised.value, ChannelRejected)  # a configuration to fix: retried
    finally:
        server.shutdown()
        server.server_close()
    assert github.requests == [] and slack.requests == []  # the token went nowhere else


def test_a_delivery_past_the_notifiers_time_budget_is_not_started(
    slack: SlackServer, github: GitHubServer
) -> None:
    spent = -math.inf  # the notification's deadline: the tick's budget is gone
    for channel, notification in (
        (slack_channel(slack), note()),
        (github_channel(github.url), note()),
        (culprit_channel(github.url), job_note()),
    ):
        with pytest.raises(ChannelError, match="time budget is spent") as raised:
            channel.send(dataclasses.replace(notification, deadline=spent))
        assert not isinstance(raised.value, ChannelRejected)  # retried at the next tick
    assert slack.requests == [] and github.requests == []


# --- webhook ------------------------------------------------------------------------------

PING_PATH = "/ping/0f7c4c1e-secret-uuid"


@pytest.fixture
def hook() -> Iterator[WebhookServer]:
    server = WebhookServer()
    yield server
    server.stop()


def test_a_webhook_receiver_posts_alertmanagers_webhook_json(
    hook: WebhookServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRUNKWATCH_TEST_PING_URL", hook.url + PING_PATH)
    config = receiver_config({"type": "webhook", "url": {"env": "TRUNKWATCH_TEST_PING_URL"}})
    (channel,) = receiver_channels([config])
    assert channel.name == "webhook:env:TRUNKWATCH_TEST_PING_URL"
    channel.send(note())
    ((path, body),) = hook.posts
    assert path == PING_PATH
    assert body == webhook_body(note())
    assert (body["version"], body["status"], body["receiver"]) == ("4", "firing", "r")
    assert body["alerts"][0]["labels"] == TRUNK_LABELS


def test_a_webhook_receivers_literal_url_is_named_by_a_digest(hook: WebhookServer) -> None:
    (channel,) = receiver_channels([receiver_config({"type": "webhook", "url": hook.url + PING_PATH})])
    assert channel.name.startswith("webhook:") and "secret-uuid" not in channel.name
    channel.send(note())
    assert len(hook.posts) == 1


@pytest.mark.parametrize(("failure", "rejected"), [(400, True), (422, True), (503, False), (404, False)])
def test_a_webhook_receivers_refusal_or_failure_never_names_its_url(
    hook: WebhookServer, failure: int, rejected: bool
) -> None:
    (channel,) = receiver_channels([receiver_config({"type": "webhook", "url": hook.url + PING_PATH})])
    hook.fail_next(1, failure)
    with pytest.raises(ChannelError) as raised:
        channel.send(note())
    assert isinstance(raised.value, ChannelRejected) is rejected
    assert f"answered {failure}: scripted failure" in str(raised.value)
    assert "secret-uuid" not in str(raised.value) and hook.posts == []


# --- wiring ------------------------------------------------------------------------------


def test_receivers_have_stable_unique_names_and_their_matchers() -> None:
    configs = [
        receiver_config({"type": "slack", "url": {"secret": "trunkwatch/slack-oncall"}}),
        receiver_config(
            {"type": "github_issues", "repo": "pytorch/pytorch", "matchers": ['alertname=~"Trunk.*"']}
        ),
        receiver_config(
            {"type": "github_issues", "repo": "pytorch/pytorch", "api_url": "https://ghe.example.com/api/v3"}
        ),
        receiver_config({"type": "slack", "url": "https://hooks.slack.invalid/services/x"}),
        receiver_config({"type": "slack", "url": {"secret": "trunkwatch/slack-oncall"}}),
    ]
    names = [channel.name for channel in receiver_channels(configs)]
    assert names[:3] == [
        "slack:trunkwatch/slack-oncall",
        "github_issues:pytorch/pytorch",
        "github_issues:pytorch/pytorch@ghe.example.com",
    ]
    assert names[3].startswith("slack:") and "hooks" not in names[3]
    assert names[4] == "slack:trunkwatch/slack-oncall-2" and len(set(names)) == 5
    assert receiver_name(configs[0]) == receiver_name(configs[4])  # from what it is, not where
    routed = receiver_channels(configs)[1]
    assert routed.accepts(TRUNK_LABELS)
    assert not routed.accepts({**TRUNK_LABELS, "alertname": "SourceDown"})


def test_sns_is_a_receiver_type_and_the_stacks_topic_one_of_them() -> None:
    stacks = "arn:aws:sns:us-east-1:123456789012:trunkwatch"
    oncall = "arn:aws:sns:us-east-1:123456789012:oncall"
    document = {
        "trunks": [{"repo": "pytorch/pytorch"}],
        "receivers": [{"type": "sns", "topic_arn": oncall, "matchers": ['priority="P1"']}],
    }
    deployment = load_deployment(document, RECEIVER_TYPES)
    settings = Settings.from_environ([], {"TOPIC_ARN": stacks, "AWS_REGION": "us-east-1"})
    topic, routed = channels_for(settings, deployment)
    assert isinstance(topic, SnsChannel) and isinstance(routed, SnsChannel)
    assert (topic.name, topic.topic_arn) == (RECEIVER, stacks)  # its log and messages' name
    assert (routed.name, routed.topic_arn, routed.region) == ("sns:oncall", oncall, "us-east-1")
    assert topic.accepts(TRUNK_LABELS) and not routed.accepts(TRUNK_LABELS)
    assert routed.accepts({**TRUNK_LABELS, "priority": "P1"})
    document["receivers"] = [{"type": "sns", "topic_arn": "oncall"}]
    with pytest.raises(ConfigError, match=r"receivers\.0\.topic_arn: String should match"):
        load_deployment(document, RECEIVER_TYPES)


def test_a_replay_header_names_receivers_and_a_bad_one_is_refused() -> None:
    header = {"repo": "pytorch/pytorch", "receivers": [{"type": "slack", "url": "http://127.0.0.1:1/hook"}]}
    replay = parse_replay([json.dumps(header)])
    (receiver,) = replay.deployment("http://127.0.0.1:2").receivers
    assert (receiver.type, receiver.url) == ("slack", "http://127.0.0.1:1/hook")
    header["receivers"] = [{"type": "github_issues", "api_url": "http://127.0.0.1:1"}]
    with pytest.raises(ReplayError, match=r"replay:1: .*receivers\.0\.repo: Field required"):
        parse_replay([json.dumps(header)])


def test_an_unreadable_receiver_secret_is_a_channel_error_naming_where(
    monkeypatch: pytest.MonkeyPatch, slack: SlackServer
) -> None:
    monkeypatch.delenv("TRUNKWATCH_TEST_SLACK_URL", raising=False)
    config = receiver_config({"type": "slack", "url": {"env": "TRUNKWATCH_TEST_SLACK_URL"}})
    (channel,) = receiver_channels([config])
    with pytest.raises(ChannelError, match="environment variable TRUNKWATCH_TEST_SLACK_URL is not set"):
        channel.send(note())
    monkeypatch.setenv("TRUNKWATCH_TEST_SLACK_URL", slack.url + WEBHOOK_PATH)
    channel.send(note())  # read when due: set later, used at the next try
    assert len(slack.posts) == 1


# --- GitHub culprit comments -------------------------------------------------------------

CULPRIT_NOTES = {
    "summary": "pull / a failing on pytorch/pytorch (3 commits in a row)",
    "failure_lines": "E AssertionError: ```boom```\nE second line",
    "runbook_url": "http://127.0.0.1:9093/runbook#trunkjobfailing",
}


def culprit_channel(url: str) -> GitHubCulpritChannel:
    return GitHubCulpritChannel("github_culprit", url, lambda: "tkn", everything, timeout_s=5)


def job_note(
    reason: str = "firing", status: str = "firing", verdict: str = "", pr: int | None = 4242
) -> Notification:
    """A job alert failing 3 commits in a row since a culprit (with `pr`, `verdict`)."""
    sha = "0123456789abcdef0123"
    culprit = CommitSummary(
        sha,
        "Make x faster",
        pr,
        "octocat",
        START,
        url=f"https://github.com/pytorch/pytorch/commit/{sha}",
        pr_url=f"https://github.com/pytorch/pytorch/pull/{pr}" if pr else "",
    )
    failing = FailingJob(3, culprit, verdict)
    return note(
        labels=JOB_LABELS, status=status, reason=reason, annotations=CULPRIT_NOTES, jobs=(), failing=failing
    )


def test_github_culprit_comments_once_per_episode_on_the_culprit_pr(github: GitHubServer) -> None:
    pr = github.add_pull_request(body="Make x faster", number=4242)
    channel = culprit_channel(github.url)
    channel.send(job_note())
    for later in (job_note("reminder"), job_note("update; x"), job_note("resolved", status="resolved")):
        channel.send(later)  # the author was told once
    channel.send(job_note())  # a lost log: its marker is found on the PR, not posted again
    (comment,) = github.pull_comments[pr]
    assert comment.startswith(
        "**trunkwatch**: this PR is the first commit on which `pull / a` failed 3 times in a row"
        " on `pytorch/pytorch@main`."
    )
    assert "https://github.com/pytorch/pytorch/commit/0123456789abcdef0123" in comment
    assert "E AssertionError: '''boom'''\nE second line" in comment  # the code block stays closed
    assert "[Runbook](http://127.0.0.1:9093/runbook#trunkjobfailing)" in comment
    assert marker_of_culprit(job_note()) in comment
    assert [r.method for r in github.requests].count("POST") == 1
    assert set(github.authorizations) == {"Bearer tkn"}


def test_github_culprit_uses_the_issue_comments_api_and_reads_every_page(github: GitHubServer) -> None:
    pr = github.add_pull_request(body="", number=77)
    github.pull_comments[pr] += [f"comment {n}" for n in range(120)] + [marker_of_culprit(job_note())]
    culprit_channel(github.url).send(job_note(pr=77))
    assert [(r.method, r.target) for r in github.requests] == [
        ("GET", "/repos/pytorch/pytorch/issues/77/comments?per_page=100"),
        ("GET", "/repos/pytorch/pytorch/issues/77/comments?per_page=100&page=2"),
    ]  # found on page 2: nothing posted
    assert len(github.pull_comments[pr]) == 121


def test_github_culprit_takes_job_alerts_with_a_pr_and_a_new_episode_is_told_again(
    github: GitHubServer,
) -> None:
    channel = culprit_channel(github.url)
    assert channel.accepts(JOB_LABELS) and not channel.accepts(TRUNK_LABELS)
    channel.send(job_note(pr=None))  # a culprit commit pushed without a PR: no one to tell
    assert github.requests == []
    pr = github.add_pull_request(body="", number=4242)
    channel.send(job_note())
    later = job_note()
    later.alert.starts_at = START.replace(hour=22)  # the job broke again: another episode
    channel.send(later)
    assert len(github.pull_comments[pr]) == 2


@pytest.mark.parametrize(("failure", "rejected"), [(422, True), (502, False), (403, False)])
def test_github_culprit_failures_keep_what_is_posted_once(
    github: GitHubServer, failure: int, rejected: bool
) -> None:
    pr = github.add_pull_request(body="", number=4242)
    github.fail_next(1, failure)
    with pytest.raises(ChannelError) as raised:
        culprit_channel(github.url).send(job_note())
    assert isinstance(raised.value, ChannelRejected) is rejected
    culprit_channel(github.url).send(job_note())
    assert len(github.pull_comments[pr]) == 1


def test_github_culprit_comments_only_on_a_confirmed_culprit(github: GitHubServer) -> None:
    pr = github.add_pull_request(body="", number=4242)
    channel = culprit_channel(github.url)
    channel.send(job_note(verdict="unconfirmed"))  # the page: a suspect, not yet blamed
    channel.send(job_note("update; environmental: the last green commit fails too", verdict="environmental"))
    assert github.pull_comments[pr] == []
    channel.send(job_note("update; culprit confirmed", verdict="confirmed"))
    channel.send(job_note("reminder", verdict="confirmed"))
    (comment,) = github.pull_comments[pr]
    assert comment.startswith("**trunkwatch**: this PR is the first commit on which `pull / a` failed")
    assert "\n\nVerdict: culprit confirmed by reruns\n\n" in comment
