"""The configuration document's validation: defaults, new keys, errors that name the key."""

from __future__ import annotations

import dataclasses
import json
from datetime import timedelta
from typing import Any

import pytest

from trunkwatch.channels import RECEIVER_TYPES
from trunkwatch.channels.github_culprit import GitHubCulpritReceiver
from trunkwatch.channels.github_issues import GitHubIssuesReceiver
from trunkwatch.channels.slack import SlackReceiver
from trunkwatch.channels.webhook import WebhookReceiver
from trunkwatch.domain.config import (
    ConfigError,
    DocumentError,
    RuleConfig,
    TokenRef,
    TrunkConfig,
    load_deployment,
    load_text,
    rule_config,
    to_json,
)

TRUNK = {"repo": "pytorch/pytorch"}
HEARTBEAT_RECEIVER = {"type": "webhook", "url": {"secret": "trunkwatch/receivers/dead-mans-switch"}}


def test_rule_defaults() -> None:
    rule = rule_config({})
    assert rule.failures_to_open == 3 and rule.max_failure_age == timedelta(hours=24)
    assert rule.source_down_after == timedelta(minutes=15)
    assert rule.runbook_url is None and rule.dashboard_url is None
    assert rule_config({"source_down_after": "1h30m"}).source_down_after == timedelta(minutes=90)


def test_frozen_and_validated_on_construction() -> None:
    rule = RuleConfig(failures_to_open=2, max_failure_age="1h")
    assert rule.max_failure_age == timedelta(hours=1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        rule.failures_to_open = 5  # type: ignore[misc]
    with pytest.raises(ConfigError, match="failures_to_open"):
        RuleConfig(failures_to_open=0)
    with pytest.raises(ConfigError, match="exactly one of env, ssm, secret"):
        TokenRef(env="A", ssm="/b")


@pytest.mark.parametrize(
    ("document", "words"),
    [
        ({"trunks": [TRUNK], "defaults": {"source_down_after": "soon"}}, ["source_down_after", "duration"]),
        ({"trunks": [{**TRUNK, "per_page": 500}]}, ["trunks.0.per_page", "less than or equal to 100"]),
        ({"trunks": [{**TRUNK, "config": {"teams": [{"match": "(", "team": "x"}]}}]}, ["teams.0.match"]),
        (
            {"trunks": [TRUNK], "receivers": [{"type": "opsgenie"}]},
            [
                "receivers.0.type: unknown receiver type 'opsgenie' "
                "(known: github_culprit, github_issues, pagerduty, slack, sns, topic, webhook)"
            ],
        ),
        ({"trunks": [TRUNK], "receivers": [{"url": "u"}]}, ["receivers.0.type: unknown receiver type None"]),
        (
            {"trunks": [TRUNK], "receivers": [{"type": "github_culprit", "repo": "a/b"}]},
            ["receivers.0.repo: unknown key"],
        ),
        (
            {"trunks": [], "receivers": [{"type": "slack"}]},
            ["receivers.0.url: Field required", "trunks: List should have at least 1 item"],
        ),
        ({"trunks": [TRUNK], "receivers": [{"type": "slack"}]}, ["receivers.0.url", "required"]),
        ({"trunks": [TRUNK], "receivers": [{"type": "github_issues"}]}, ["receivers.0.repo", "required"]),
        (
            {"trunks": [TRUNK], "receivers": [{"type": "github_issues", "repo": "nope"}]},
            ["receivers.0.repo", "pattern"],
        ),
        (
            {"trunks": [TRUNK], "receivers": [{"type": "slack", "url": "https://x", "repo": "a/b"}]},
            ["receivers.0.repo", "unknown key"],
        ),
        (
            {"trunks": [TRUNK], "receivers": [{"type": "slack", "url": "https://x", "matchers": ["nope"]}]},
            ["receivers.0.matchers.0", "invalid matcher"],
        ),
        (
            {"trunks": [TRUNK], "receivers": [{"type": "slack", "url": "u", "matchers": ['job=~"("']}]},
            ["receivers.0.matchers.0", "regular expression"],
        ),
        (
            {"trunks": [TRUNK], "receivers": [{"type": "slack", "url": {"secret": "a", "env": "B"}}]},
            ["receivers.0.url", "exactly one of"],
        ),
        ({"trunks": [TRUNK], "receivers": {"type": "slack"}}, ["receivers", "list"]),
        ({"trunks": [TRUNK], "receivers": [{"type": "webhook"}]}, ["receivers.0.url: Field required"]),
        ({"trunks": [TRUNK], "heartbeat": "5m"}, ["heartbeat: Input should be a valid dictionary"]),
        ({"trunks": [TRUNK], "heartbeat": {"every": "5m"}}, ["heartbeat.receivers: Field required"]),
        (
            {"trunks": [TRUNK], "heartbeat": {"receivers": []}},
            ["heartbeat.receivers: List should have at least 1"],
        ),
        (
            {"trunks": [TRUNK], "heartbeat": {"every": "30s", "receivers": [HEARTBEAT_RECEIVER]}},
            ["heartbeat.every: must be at least 1m"],
        ),
        (
            {"trunks": [TRUNK], "heartbeat": {"receiver": "x", "receivers": [HEARTBEAT_RECEIVER]}},
            ["heartbeat.receiver: unknown key"],
        ),
        (
            {"trunks": [TRUNK], "receivers": [{"type": "topic"}, HEARTBEAT_RECEIVER, {"type": "topic"}]},
            ["receivers.2: the stack's topic is listed twice"],
        ),
        (
            {"trunks": [TRUNK], "receivers": [{"type": "topic", "enabled": False}]},
            ["receivers.0.enabled: the stack's topic is turned off and no other receiver is listed"],
        ),
        (
            {"trunks": [TRUNK], "heartbeat": {"receivers": [HEARTBEAT_RECEIVER, {"type": "topic"}]}},
            ["heartbeat.receivers.1: the heartbeat goes to a dead man's switch, never to the stack's topic"],
        ),
        ({"trunks": [TRUNK], "receivers": [{"type": "topic", "topic_arn": "x"}]}, ["receivers.0.topic_arn"]),
        ({"trunks": [{**TRUNK, "config": {"confirm": "yes"}}]}, ["confirm", "'off' or 'rerun'"]),
        ({"trunks": [{**TRUNK, "config": {"reruns_per_hour": 0}}]}, ["reruns_per_hour", "greater than"]),
        (
            {"trunks": [{**TRUNK, "github_token": {"env": "A", "ssm": "b"}}]},
            ["github_token", "exactly one of"],
        ),
    ],
)
def test_errors_name_the_key(document: dict[str, Any], words: list[str]) -> None:
    with pytest.raises(ConfigError) as err:
        load_deployment(document, RECEIVER_TYPES)
    for word in words:
        assert word in str(err.value)


def test_receivers() -> None:
    deployment = load_deployment(
        {
            "trunks": [TRUNK],
            "receivers": [
                {"type": "slack", "url": {"secret": "trunkwatch/slack"}, "matchers": ['priority="P1"']},
                {"type": "slack", "url": "https://hooks.example/x"},
                {
                    "type": "github_issues",
                    "repo": "pytorch/pytorch",
                    "labels": ["ci: sev"],
                    "token": {"ssm": "/trunkwatch/gh"},
                    "matchers": ['team=~"infra.*"'],
                },
                {"type": "github_culprit", "token": {"secret": "trunkwatch/gh"}},
            ],
        },
        RECEIVER_TYPES,
    )
    slack, plain, issues, culprit = deployment.receivers
    assert isinstance(slack, SlackReceiver) and slack.url == TokenRef(secret="trunkwatch/slack")
    assert slack.matchers == ('priority="P1"',)
    assert plain.url == "https://hooks.example/x" and plain.matchers == ()
    assert issues.api_url == "https://api.github.com" and issues.labels == ("ci: sev",)
    assert isinstance(issues, GitHubIssuesReceiver) and issues.token == TokenRef(ssm="/trunkwatch/gh")
    assert isinstance(culprit, GitHubCulpritReceiver) and culprit.api_url == "https://api.github.com"
    assert load_deployment({"trunks": [TRUNK]}).receivers == ()


def test_heartbeat_sends_every_5m_by_default_to_its_own_receivers() -> None:
    document = {"trunks": [TRUNK], "heartbeat": {"receivers": [HEARTBEAT_RECEIVER]}}
    deployment = load_deployment(document, RECEIVER_TYPES)
    assert deployment.heartbeat is not None and deployment.heartbeat.every == timedelta(minutes=5)
    (receiver,) = deployment.heartbeat.receivers
    assert isinstance(receiver, WebhookReceiver) and receiver.url == TokenRef(
        secret="trunkwatch/receivers/dead-mans-switch"
    )
    assert deployment.receivers == ()  # the alerts' receivers are others: it reaches none of them
    assert load_deployment({"trunks": [TRUNK]}).heartbeat is None
    every = load_deployment(
        {**document, "heartbeat": {**document["heartbeat"], "every": "1h30m"}}, RECEIVER_TYPES
    )
    assert every.heartbeat is not None and every.heartbeat.every == timedelta(minutes=90)


def test_a_bad_heartbeat_receiver_is_named_with_every_other_problem() -> None:
    document = {"trunks": [TRUNK], "heartbeat": {"every": "soon", "receivers": [{"type": "opsgenie"}]}}
    with pytest.raises(ConfigError) as err:
        load_deployment(document, RECEIVER_TYPES)
    message = str(err.value)
    assert "heartbeat.receivers.0.type: unknown receiver type 'opsgenie'" in message
    assert "heartbeat.every: invalid duration 'soon'" in message
    assert "List should have" not in message  # the receiver it names is there, only unreadable


def test_receivers_need_the_registry_to_be_read() -> None:
    document = {"trunks": [TRUNK], "receivers": [{"type": "slack", "url": "https://x"}]}
    with pytest.raises(
        ConfigError, match=r"receivers\.0\.type: unknown receiver type 'slack' \(known: none\)"
    ):
        load_deployment(document)


def test_to_json_round_trips() -> None:
    deployment = load_deployment(
        {
            "trunks": [{**TRUNK, "token": {"env": "T"}, "config": {"failures_to_open": 2}}],
            "defaults": {"repeat_interval": "2h"},
            "receivers": [
                {"type": "slack", "url": {"secret": "s"}},
                {"type": "github_issues", "repo": "a/b", "labels": ["x"]},
                {"type": "github_culprit", "matchers": ['team="infra"']},
                {"type": "webhook", "url": "https://hc-ping.example/uuid"},
            ],
            "heartbeat": {"every": "10m", "receivers": [HEARTBEAT_RECEIVER]},
        },
        RECEIVER_TYPES,
    )
    assert load_deployment(json.loads(to_json(deployment)), RECEIVER_TYPES) == deployment
    assert "null" not in to_json(deployment)
    assert TrunkConfig.from_dict(TRUNK).trunk_id == "pytorch/pytorch#main"


def test_retention_defaults_to_30_days_and_must_outlast_the_rule() -> None:
    assert rule_config({}).retention == timedelta(hours=720)
    assert rule_config({"retention": "25h"}).retention == timedelta(hours=25)
    with pytest.raises(ConfigError, match=r"config\.retention: must be longer than max_failure_age \(24h\)"):
        rule_config({"retention": "24h"})
    with pytest.raises(ConfigError, match=r"config\.retention: must be longer than max_failure_age \(200h\)"):
        rule_config({"retention": "190h", "max_failure_age": "200h"})
    with pytest.raises(ConfigError, match=r"trunks\.0\.config\.retention: invalid duration"):
        load_deployment({"trunks": [{**TRUNK, "config": {"retention": "30d"}}]})


def test_confirmation_by_reruns_is_off_unless_asked_and_takes_a_github_token() -> None:
    off = load_deployment({"trunks": [TRUNK]})
    assert not off.rule_for(off.trunks[0]).confirms
    on = load_deployment(
        {"trunks": [{**TRUNK, "github_token": {"env": "RERUN_TOKEN"}, "config": {"confirm": "rerun"}}]}
    )
    trunk = on.trunks[0]
    assert on.rule_for(trunk).confirms and on.rule_for(trunk).reruns_per_hour == 20
    assert trunk.github_token is not None and trunk.github_token.env == "RERUN_TOKEN"


def test_trunk_defaults_hold_trunk_keys_and_a_trunks_own_value_wins() -> None:
    deployment = load_deployment(
        {
            "trunk_defaults": {
                "source": "github",
                "token": {"secret": "gh"},
                "webhook": True,
                "poll_every": "5m",
            },
            "trunks": [
                {"repo": "acme/api"},
                {"repo": "acme/sdk", "webhook": False},  # polled every tick: no default poll_every
                {"repo": "acme/web", "source": "hud", "poll_every": "1m"},
            ],
        }
    )
    api, sdk, web = deployment.trunks
    assert (api.source, api.token, api.webhook, api.poll_every) == (
        "github",
        TokenRef(secret="gh"),
        True,
        timedelta(minutes=5),
    )
    assert (sdk.webhook, sdk.poll_every, sdk.poll_period) == (False, None, None)
    assert (web.source, web.poll_every) == ("hud", timedelta(minutes=1))
    assert load_deployment(json.loads(to_json(deployment))) == deployment


@pytest.mark.parametrize(
    ("trunk_defaults", "said"),
    [
        ({"repo": "a/b"}, "trunk_defaults.repo: unknown key"),
        ({"config": {}}, "trunk_defaults.config: unknown key"),
        ({"per_page": 0}, "trunk_defaults.per_page: Input should be greater than or equal to 1"),
        ({"token": {"env": "A", "ssm": "/b"}}, "trunk_defaults.token: give exactly one of env, ssm, secret"),
    ],
)
def test_a_bad_trunk_default_is_reported_once_under_trunk_defaults(
    trunk_defaults: dict[str, Any], said: str
) -> None:
    with pytest.raises(DocumentError) as raised:
        load_deployment({"trunk_defaults": trunk_defaults, "trunks": [TRUNK, {"repo": "acme/web"}]})
    (line,) = raised.value.lines()
    assert line.startswith(said)


def test_a_bad_default_is_reported_once_under_defaults() -> None:
    document = {
        "defaults": {"failures_to_opn": 2, "retention": "20h"},
        "trunks": [TRUNK, {"repo": "acme/web"}, {"repo": "acme/www", "config": {"retention": "800h"}}],
    }
    with pytest.raises(DocumentError) as raised:
        load_deployment(document)
    keys = [problem.key for problem in raised.value.problems]
    assert keys == ["defaults.failures_to_opn", "defaults.retention"]
    assert "did you mean 'failures_to_open'?" in raised.value.problems[0].message


def test_a_trunks_rule_keys_are_checked_beside_its_own_keys() -> None:
    document = {"trunks": [{"repo": "not a repo", "config": {"failures_to_open": 0, "teem": "x"}}]}
    with pytest.raises(DocumentError) as raised:
        load_deployment(document)
    assert sorted(problem.key for problem in raised.value.problems) == [
        "trunks.0.config.failures_to_open",
        "trunks.0.config.teem",
        "trunks.0.repo",
    ]


def test_a_file_names_each_problems_line() -> None:
    text = "defaults:\n  team: ''\ntrunks:\n  - repo: acme/api\n  - branch: dev\n"
    with pytest.raises(DocumentError) as raised:
        load_text(text, "org.yaml")
    assert raised.value.lines() == [
        "org.yaml:2: defaults.team: String should have at least 1 character",
        "org.yaml:5: trunks.1.repo: Field required",
    ]


def test_yaml_booleans_are_true_and_false_only_and_keys_once() -> None:
    deployment = load_text("trunks:\n  - repo: acme/api\n    config: {confirm: off, team: no}\n", "c.yaml")
    rule = deployment.rule_for(deployment.trunks[0])
    assert (rule.confirm, rule.team) == ("off", "no")
    with pytest.raises(DocumentError, match=r"c\.yaml:3: not valid YAML: key 'trunks' is given twice"):
        load_text("trunks:\n  - repo: acme/api\ntrunks: []\n", "c.yaml")


def test_yaml_merge_keys_carry_an_anchors_keys() -> None:
    text = "trunks:\n  - &base\n    repo: acme/a\n    source: github\n  - <<: *base\n    repo: acme/b\n"
    first, second = load_text(text, "c.yaml").trunks
    assert (second.repo, second.source) == ("acme/b", first.source)
