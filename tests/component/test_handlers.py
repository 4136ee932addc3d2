"""Each handler on its sample event from events/ (the shapes Lambda delivers)."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime, timedelta
from types import ModuleType
from typing import Any

import boto3
import pytest
from pytest_httpserver import HTTPServer

from tests.support.aws import TABLE, running_stack, set_clock, table_items
from tests.support.hud import grid
from tests.support.paths import ROOT
from trunkwatch.domain.cells import Cell, CellState, CellWrite, Commit
from trunkwatch.storage import keys
from trunkwatch.storage.dynamodb import open_table
from trunkwatch_local.runtime import LambdaContext


def handler(name: str) -> ModuleType:
    """functions/<name>/app.py loaded anew (a new container) by the `aws` fixture's stack."""
    stack = running_stack()
    assert stack is not None, "the handler tests run on the aws fixture's stack"
    return stack.handler(name, cold=True)


def sample(name: str) -> dict[str, Any]:
    return json.loads((ROOT / "events" / f"{name}.json").read_text())


def context(name: str) -> LambdaContext:
    return LambdaContext(function_name=name, aws_request_id="req-1")


@pytest.fixture
def configured(aws: dict[str, Any], httpserver: HTTPServer, monkeypatch: pytest.MonkeyPatch) -> HTTPServer:
    stack = running_stack()
    assert stack is not None
    config = {"trunks": [{"repo": "pytorch/pytorch", "url": httpserver.url_for("/").rstrip("/")}]}
    stack.configure(json.dumps(config))  # where CONFIG_FILE names it, as the ConfigLayer puts it
    monkeypatch.setenv("RULE_DEFAULTS", '{"failures_to_open": 3}')
    return httpserver


def test_every_function_has_a_sample_event() -> None:
    names = {p.parent.name for p in (ROOT / "functions").glob("*/app.py")}
    samples = {p.stem.split("_", 1)[0] for p in (ROOT / "events").glob("*.json")}
    assert names <= samples


def poll_queue() -> str:
    """The URL of the stack's poll queue (the dispatcher's POLL_QUEUE_URL)."""
    import os

    return os.environ["POLL_QUEUE_URL"]


def test_dispatcher_on_schedule_event_sends_one_message_per_due_trunk(configured: HTTPServer) -> None:
    result = handler("dispatcher").lambda_handler(sample("dispatcher_schedule"), context("dispatcher"))
    assert result == {"sent": ["pytorch/pytorch#main"], "failed": []}
    received = boto3.client("sqs").receive_message(QueueUrl=poll_queue(), MaxNumberOfMessages=10)
    (message,) = received["Messages"]
    assert json.loads(message["Body"]) == {"trunk": "pytorch/pytorch#main"}


def test_ingest_on_poll_queue_event(configured: HTTPServer) -> None:
    configured.expect_request("/api/hud/pytorch/pytorch/main/1").respond_with_json(grid())
    # Half an hour after the grid's newest commit: well within the cells' retention.
    set_clock(datetime(2026, 11, 18, 20, 0, tzinfo=UTC))
    result = handler("ingest").lambda_handler(sample("ingest_poll_queue"), context("ingest"))
    assert result["errors"] == [] and result["polled"][0]["cells_written"] == 3
    assert result["batchItemFailures"] == []
    assert len(table_items("cell")) == 3


def test_ingest_reports_a_failing_source_without_raising(configured: HTTPServer) -> None:
    configured.expect_request("/api/hud/pytorch/pytorch/main/1").respond_with_data("oops", status=503)
    result = handler("ingest").lambda_handler(sample("ingest_poll_queue"), context("ingest"))
    assert result["polled"] == [] and result["errors"][0]["cause"] == "http_5xx"
    # The failure is the trunk's, recorded for SourceDown: the message is not retried.
    assert result["batchItemFailures"] == []
    # Nothing of the poll is written; only the failure is recorded, for SourceDown.
    (state,) = table_items()
    assert state["kind"] == {"S": "trunk"} and state["poll_error_cause"] == {"S": "http_5xx"}


# The sample stream batch: job SAMPLE_JOB's cells 42 (pending, now failed) and 43 (failed),
# written by poll SAMPLE_POLL of 2024-05-01 12:00:12; the sample tick settles that poll.
SAMPLE_JOB = "pull / linux-jammy-py3.10-gcc11 / test (default, linux.2xlarge)"
SAMPLE_POLL = "20240501T120012-3f9c2a1b"
TRUNK = "pytorch/pytorch#main"
SAMPLE_NOW = datetime(2024, 5, 1, 12, 0, 14, tzinfo=UTC)


def store_the_sample_batchs_history() -> None:
    """The table as the sample batch found it: cells 40 (pass) and 41 (fail) of SAMPLE_JOB
    before it, the batch's own failed cells 42 and 43, and its poll's open tick. (Written by
    storage: the sample's images carry `failure_lines` as a list, not as storage writes it.)"""
    storage = open_table(TABLE, "us-east-1")
    for seq, state, minute in ((40, "pass", 20), (41, "fail", 30), (42, "fail", 42), (43, "fail", 51)):
        commit = Commit(sha=f"{seq:040x}", time=datetime(2024, 5, 1, 11, minute, tzinfo=UTC))
        cell = Cell(job=SAMPLE_JOB, sha=commit.sha, state=CellState(state), url=f"https://ci.example/{seq}")
        poll = SAMPLE_POLL if seq > 41 else "20240501T115912-a07d4e6c"
        storage.cells.save_all(TRUNK, [CellWrite(cell, commit, seq, poll)], timedelta(days=30))
    storage.ticks.open_poll(TRUNK, SAMPLE_POLL, 2, SAMPLE_NOW)


def evaluate_the_sample_batch() -> dict[str, Any]:
    set_clock(SAMPLE_NOW)
    return handler("evaluator").lambda_handler(sample("evaluator_stream"), context("evaluator"))


def published(queue: str) -> list[dict[str, Any]]:
    """The notifications the alerts topic got (each SNS envelope's message)."""
    sqs = boto3.client("sqs")
    answer = sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10, WaitTimeSeconds=0)
    messages = answer.get("Messages", [])
    for message in messages:  # taken: a later call sees only what was published since
        sqs.delete_message(QueueUrl=queue, ReceiptHandle=message["ReceiptHandle"])
    return [json.loads(json.loads(m["Body"])["Message"]) for m in messages]


def test_evaluator_on_stream_batch(configured: HTTPServer, aws: dict[str, Any]) -> None:
    store_the_sample_batchs_history()
    assert evaluate_the_sample_batch() == {"batchItemFailures": []}
    # The batch's two failures after the one before it: the job's alert opens (3 to open)...
    (alert,) = table_items("alert")
    assert alert["job"] == {"S": SAMPLE_JOB} and alert["streak"] == {"N": "3"}
    assert (alert["first_fail"]["M"]["seq"], alert["last_pass"]["M"]["seq"]) == ({"N": "41"}, {"N": "40"})
    assert alert["newest_fail"]["M"]["seq"] == {"N": "43"}
    # ... both cells are counted towards their poll's tick, which settles.
    (tick,) = table_items("tick")
    assert tick["sk"] == {"S": SAMPLE_POLL}
    assert (tick["evaluated"], tick["settled"]) == ({"N": "2"}, {"BOOL": True})
    assert published(aws["queue"]) == []  # the notifier publishes, on the settled tick


def test_evaluator_reports_bad_record_as_item_failure(configured: HTTPServer) -> None:
    event = sample("evaluator_stream")
    del event["Records"][1]["dynamodb"]["NewImage"]["job"]  # a cell item without its job
    response = handler("evaluator").lambda_handler(event, context("evaluator"))
    assert response == {
        "batchItemFailures": [{"itemIdentifier": event["Records"][1]["dynamodb"]["SequenceNumber"]}]
    }


def test_evaluator_reports_the_first_bad_record_with_every_record_after_it(configured: HTTPServer) -> None:
    # Lambda resumes a stream from the lowest failed sequence number: the records after it
    # come again, so they are neither evaluated now nor counted towards the poll's tick.
    event = sample("evaluator_stream")
    del event["Records"][0]["dynamodb"]["NewImage"]["job"]
    response = handler("evaluator").lambda_handler(event, context("evaluator"))
    assert response == {
        "batchItemFailures": [{"itemIdentifier": r["dynamodb"]["SequenceNumber"]} for r in event["Records"]]
    }
    assert table_items("tick") == []


def test_evaluator_sweeps_on_the_schedule_and_settles_a_tick(configured: HTTPServer) -> None:
    assert handler("evaluator").lambda_handler(sample("evaluator_schedule"), context("evaluator")) == {
        "rejudged": 0,
        "waiting": [],
    }
    (tick,) = table_items("tick")
    assert tick["settled"] == {"BOOL": True} and tick["trunk"] == {"S": "pytorch/pytorch#main"}


def test_notifier_on_a_settled_tick(configured: HTTPServer, aws: dict[str, Any]) -> None:
    store_the_sample_batchs_history()
    assert evaluate_the_sample_batch() == {"batchItemFailures": []}
    notifier = handler("notifier")
    set_clock(SAMPLE_NOW + timedelta(seconds=1))
    answer = notifier.lambda_handler(sample("notifier_stream"), context("notifier"))
    assert answer == {"batchItemFailures": []}
    # The job's new alert, and the trunk-level one it raises, each in its own group.
    notifications = {n["groupLabels"]["alertname"]: n for n in published(aws["queue"])}
    assert sorted(notifications) == ["TrunkBroken", "TrunkJobFailing"]
    assert all(n["status"] == "firing" for n in notifications.values())
    (job_alert,) = notifications["TrunkJobFailing"]["alerts"]
    assert job_alert["labels"]["job"] == SAMPLE_JOB and job_alert["annotations"]["streak"] == "3"
    runs = job_alert["annotations"]["failing_runs"].split()
    assert runs == [f"https://ci.example/{n}" for n in (43, 42, 41)]
    (alert,) = table_items("alert")
    assert alert["job"] == {"S": SAMPLE_JOB}
    # Published once: the same tick delivered again (a retried batch) sends nothing more.
    set_clock(SAMPLE_NOW + timedelta(seconds=2))
    assert notifier.lambda_handler(sample("notifier_stream"), context("notifier")) == {
        "batchItemFailures": []
    }
    assert published(aws["queue"]) == []


def test_notifier_reports_a_failing_tick_with_every_record_after_it(configured: HTTPServer) -> None:
    event = sample("notifier_stream")
    (tick,) = event["Records"]
    broken = copy.deepcopy(tick)
    del broken["dynamodb"]["NewImage"]["trunk"]
    broken["dynamodb"]["SequenceNumber"] = str(int(tick["dynamodb"]["SequenceNumber"]) - 1)
    event["Records"] = [broken, tick]
    assert handler("notifier").lambda_handler(event, context("notifier")) == {
        "batchItemFailures": [{"itemIdentifier": r["dynamodb"]["SequenceNumber"]} for r in (broken, tick)]
    }


def test_a_bad_receiver_in_the_deployed_configuration_fails_at_load_naming_the_key(
    configured: HTTPServer, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    from trunkwatch.app import settings
    from trunkwatch.channels.slack import SlackReceiver
    from trunkwatch.domain.config import ConfigError

    stack = running_stack()
    assert stack is not None
    trunks = [{"repo": "pytorch/pytorch", "url": configured.url_for("/").rstrip("/")}]
    good = {"trunks": trunks, "receivers": [{"type": "slack", "url": {"secret": "trunkwatch/receivers/s"}}]}
    bad = {**good, "receivers": [*good["receivers"], {"type": "opsgenie", "key": "x"}]}
    stack.configure(json.dumps(good))
    edge = settings.Edge.from_environ(settings.NOTIFIER)
    (receiver,) = edge.deployment().receivers
    assert isinstance(receiver, SlackReceiver)

    stack.configure(json.dumps(bad))  # read again: the file's text changed
    known = "github_culprit, github_issues, pagerduty, slack, sns, topic, webhook"
    said = f"receivers.1.type: unknown receiver type 'opsgenie' (known: {known})"
    with pytest.raises(ConfigError) as raised:
        edge.deployment()
    assert str(raised.value) == f"{stack.config_file}:1: {said}"
    event = sample("notifier_stream")  # the tick is reported failed and comes again: nothing lost
    assert handler("notifier").lambda_handler(event, context("notifier")) == {
        "batchItemFailures": [{"itemIdentifier": event["Records"][0]["dynamodb"]["SequenceNumber"]}]
    }
    # The logged error names the key (Powertools prints it, or hands it to logging's
    # handlers when an earlier local runtime in the process has set them up).
    assert said in capsys.readouterr().out + caplog.text


def emf(output: str) -> list[tuple[str, tuple[str, ...], dict[str, Any]]]:
    """(metric, dimension names, record) of each EMF record printed (Powertools' format)."""
    found = []
    for line in output.splitlines():
        if not line.startswith("{") or '"_aws"' not in line:
            continue
        record = json.loads(line)
        for directive in record["_aws"]["CloudWatchMetrics"]:
            for dimensions in directive["Dimensions"]:
                found += [(m["Name"], tuple(sorted(dimensions)), record) for m in directive["Metrics"]]
    return found


@pytest.fixture
def metrics_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "false")  # a local runtime may have set it


def configure(config: dict[str, Any]) -> None:
    """The deployed configuration file (CONFIG_FILE) says `config`."""
    stack = running_stack()
    assert stack is not None
    stack.configure(json.dumps(config))


def test_a_failed_stream_record_counts_in_stream_records_failed(
    configured: HTTPServer, metrics_on: None, capsys: pytest.CaptureFixture[str]
) -> None:
    # Reported as a partial batch failure, not a Lambda error: the error alarms never see it.
    for function, field in (("evaluator", "job"), ("notifier", "trunk")):
        event = sample(f"{function}_stream")
        del event["Records"][0]["dynamodb"]["NewImage"][field]
        answer = handler(function).lambda_handler(event, context(function))
        assert answer["batchItemFailures"]
        counted = [r for name, _, r in emf(capsys.readouterr().out) if name == "StreamRecordsFailed"]
        assert [r["StreamRecordsFailed"] for r in counted] == [[1.0]]  # the one record that raised
        assert counted[0]["service"] == "trunkwatch"


def test_a_failing_and_a_refusing_receiver_count_service_wide_and_per_receiver(
    configured: HTTPServer, metrics_on: None, capsys: pytest.CaptureFixture[str]
) -> None:
    from trunkwatch_local.receiver_servers import SlackServer

    slack = SlackServer()
    try:
        trunks = [{"repo": "pytorch/pytorch", "url": configured.url_for("/").rstrip("/")}]
        configure(
            {"trunks": trunks, "receivers": [{"type": "slack", "url": {"secret": "trunkwatch/receivers/s"}}]}
        )
        boto3.client("secretsmanager").create_secret(
            Name="trunkwatch/receivers/s", SecretString=slack.url + "/x"
        )
        store_the_sample_batchs_history()
        evaluate_the_sample_batch()
        capsys.readouterr()
        notifier = handler("notifier")
        counts = {}
        for failure, second in ((503, 1), (400, 2)):  # retried; then refused for good
            slack.fail_next(1, failure)
            set_clock(SAMPLE_NOW + timedelta(seconds=second))
            assert notifier.lambda_handler(sample("notifier_stream"), context("notifier")) == {
                "batchItemFailures": []
            }
            counts[failure] = [
                (n, d, r.get("receiver")) for n, d, r in emf(capsys.readouterr().out) if "Notification" in n
            ]
    finally:
        slack.stop()
    receiver = "slack:trunkwatch/receivers/s"
    assert counts[503] == [
        ("NotificationErrors", ("receiver", "service"), receiver),
        ("NotificationsSent", ("service",), None),  # the topic took its two messages
        ("NotificationErrors", ("service",), None),
    ]
    assert ("NotificationsRejected", ("receiver", "service"), receiver) in counts[400]
    assert ("NotificationsRejected", ("service",), None) in counts[400]
    assert not [c for c in counts[400] if c[0] == "NotificationErrors"]


def test_the_notifier_sends_the_heartbeat_at_a_sweeps_tick_only(configured: HTTPServer) -> None:
    from trunkwatch_local.receiver_servers import WebhookServer

    hook = WebhookServer()
    try:
        trunks = [{"repo": "pytorch/pytorch", "url": configured.url_for("/").rstrip("/")}]
        ping = {"type": "webhook", "url": hook.url + "/ping"}
        configure({"trunks": trunks, "heartbeat": {"every": "5m", "receivers": [ping]}})
        notifier = handler("notifier")
        poll_tick = sample("notifier_stream")  # a poll's tick: no beat
        sweep_tick = copy.deepcopy(poll_tick)
        for image in ("NewImage", "OldImage"):
            for key in ("sk", "poll"):
                sweep_tick["Records"][0]["dynamodb"][image][key] = {"S": "sweep-20240501T120012-3f9c2a1b"}
        sent = []
        for minute, tick in (
            (0, poll_tick),
            (0, sweep_tick),
            (4, sweep_tick),
            (5, poll_tick),
            (5, sweep_tick),
        ):
            set_clock(SAMPLE_NOW + timedelta(minutes=minute))
            assert notifier.lambda_handler(tick, context("notifier")) == {"batchItemFailures": []}
            sent += [(minute, body["notification_reason"]) for _, body in hook.posts[len(sent) :]]
    finally:
        hook.stop()
    assert sent == [(0, "firing"), (5, "reminder")]
    assert {body["alerts"][0]["labels"]["alertname"] for _, body in hook.posts} == {"Watchdog"}


def test_webhook_on_function_url_events(configured: HTTPServer, monkeypatch: pytest.MonkeyPatch) -> None:
    from aws_lambda_powertools.utilities import parameters

    from tests.support import webhooks
    from trunkwatch_local.runtime import function_url_event

    stack = running_stack()
    assert stack is not None
    stack.configure(
        json.dumps({"trunks": [{"repo": "pytorch/pytorch", "source": "github", "webhook": True}]})
    )
    # The sample is signed with GitHub's documented test-vector secret.
    boto3.client("ssm").put_parameter(
        Name="/trunkwatch/webhook", Type="SecureString", Value="It's a Secret to Everybody"
    )
    monkeypatch.setenv("WEBHOOK_SECRET_PARAMETER", "/trunkwatch/webhook")
    monkeypatch.setenv("BUILDKITE_WEBHOOK_TOKEN_PARAMETER", "/trunkwatch/buildkite-webhook")  # none
    parameters.clear_caches()
    webhook = handler("webhook")
    event = sample("webhook_function_url")
    sha = json.loads(event["body"])["workflow_job"]["head_sha"]
    # The commit's push and the job's run come first (a job of a run not known is held).
    run = webhooks.run_of(json.loads(event["body"]))
    for name, payload in (("push", webhooks.push([sha])), ("workflow_run", run)):
        body = json.dumps(payload).encode()
        headers = {
            "X-GitHub-Event": name,
            "X-GitHub-Delivery": f"{name}-1",
            "X-Hub-Signature-256": webhooks.sign(body, "It's a Secret to Everybody"),
        }
        answer = webhook.lambda_handler(function_url_event("POST", "/", headers, body), context("webhook"))
        assert answer["statusCode"] == 200
    answer = webhook.lambda_handler(event, context("webhook"))
    assert (answer["statusCode"], json.loads(answer["body"])) == (200, {"message": "stored"})
    states = {i["job"]["S"]: i["state"]["S"] for i in table_items("cell")}
    assert states == {
        "pull / linux-jammy-py3.10-gcc11 / test (default, linux.2xlarge)": "fail",
        "pull / (workflow)": "pass",
    }


def test_buildkite_deliveries_are_checked_against_the_buildkite_token_parameter_alone(
    configured: HTTPServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from aws_lambda_powertools.utilities import parameters

    from tests.support.buildkite import PIPELINE, build, job
    from trunkwatch_local.runtime import function_url_event

    stack = running_stack()
    assert stack is not None
    trunk = {"repo": "acme/engine", "source": "buildkite", "pipeline": PIPELINE, "webhook": True}
    stack.configure(json.dumps({"trunks": [trunk]}))
    github_secret, token = "gh-secret-made-up-0123", "bk-token-made-up-4567"  # made-up values
    ssm = boto3.client("ssm")
    ssm.put_parameter(Name="/trunkwatch/github-webhook", Type="SecureString", Value=github_secret)
    monkeypatch.setenv("WEBHOOK_SECRET_PARAMETER", "/trunkwatch/github-webhook")
    monkeypatch.setenv("BUILDKITE_WEBHOOK_TOKEN_PARAMETER", "/trunkwatch/buildkite-webhook")
    parameters.clear_caches()
    webhook = handler("webhook")
    built = build(1, "5d41402abc4b2a76b9719d911017c592aa3b2c1d", datetime(2026, 11, 18, 11, tzinfo=UTC))
    del built["jobs"]
    org, slug = PIPELINE.split("/")
    pipeline = {"slug": slug, "url": f"https://api.buildkite.com/v2/organizations/{org}/pipelines/{slug}"}
    body = json.dumps(
        {"event": "job.finished", "job": job(1, "Unit tests", "failed"), "build": built, "pipeline": pipeline}
    ).encode()

    def deliver(sent_token: str) -> tuple[int, str]:
        headers = {"X-Buildkite-Event": "job.finished", "X-Buildkite-Token": sent_token}
        answer = webhook.lambda_handler(function_url_event("POST", "/", headers, body), context("webhook"))
        return answer["statusCode"], json.loads(answer["body"])["message"]

    # No Buildkite token parameter (a stack fed by GitHub alone): refused, not an error.
    assert deliver(github_secret) == (401, "no webhook token is configured")
    ssm.put_parameter(Name="/trunkwatch/buildkite-webhook", Type="SecureString", Value=token)
    parameters.clear_caches()
    assert deliver(github_secret) == (401, "bad X-Buildkite-Token")  # GitHub's secret is not it
    assert deliver(token) == (200, "stored")
    assert {i["job"]["S"] for i in table_items("cell")} == {"Unit tests"}


def test_a_webhook_fed_trunk_is_polled_only_every_poll_every(configured: HTTPServer) -> None:
    from datetime import UTC, datetime, timedelta

    stack = running_stack()
    assert stack is not None
    url = configured.url_for("/").rstrip("/")
    stack.configure(
        json.dumps(
            {"trunks": [{"repo": "pytorch/pytorch", "url": url, "webhook": True, "poll_every": "10m"}]}
        )
    )
    configured.expect_request("/api/hud/pytorch/pytorch/main/1").respond_with_json(grid())
    dispatcher, ingest = handler("dispatcher"), handler("ingest")
    start = datetime(2026, 11, 18, 12, 0, tzinfo=UTC)
    polled = []
    for minutes in (0, 1, 9, 10, 11):
        set_clock(start + timedelta(minutes=minutes))
        sent = dispatcher.lambda_handler(sample("dispatcher_schedule"), context("dispatcher"))["sent"]
        if sent:
            result = ingest.lambda_handler(sample("ingest_poll_queue"), context("ingest"))
            assert result["polled"]
        polled.append(len(sent))
    assert polled == [1, 0, 0, 1, 0]
    # The first poll found results that no delivery (none ever came) had brought.
    assert len(table_items("cell")) == 3
    (state,) = [item for item in table_items("trunk") if item["sk"]["S"] == "STATE"]
    assert state["deliveries_missing_since"]["S"].startswith("2026-11-18T12:00:00")


JOB = "pull / linux-jammy-py3.10-gcc11 / test (default, linux.2xlarge)"
TRUNK_ID = "pytorch/pytorch#main"


def cell_record(seq: int, state: str, event_name: str = "INSERT") -> dict[str, Any]:
    """The stream record of job JOB's cell at `seq`, as it is stored now (written first)."""
    commit = Commit(sha=f"{seq:040x}", time=datetime(2026, 11, 18, tzinfo=UTC) + timedelta(hours=seq))
    cell = Cell(job=JOB, sha=commit.sha, state=CellState(state), url=f"https://ci.example/{seq}")
    storage = open_table(TABLE, "us-east-1")
    storage.cells.save_all(TRUNK_ID, [CellWrite(cell, commit, seq, "poll-1")], timedelta(days=30))
    key = {"pk": {"S": keys.cells(TRUNK_ID, JOB)}, "sk": {"S": keys.seq_key(seq)}}
    image = boto3.client("dynamodb").get_item(TableName=TABLE, Key=key)["Item"]
    return {
        "eventID": f"e{seq}{state}",
        "eventName": event_name,
        "eventSource": "aws:dynamodb",
        "dynamodb": {"Keys": key, "NewImage": image, "SequenceNumber": f"{seq:021d}{len(state)}"},
    }


def job_alert() -> dict[str, Any]:
    (alert,) = [a for a in table_items("alert") if a["job"]["S"] == JOB]
    return {
        "streak": int(alert["streak"]["N"]),
        "first_fail": int(alert["first_fail"]["M"]["seq"]["N"]),
        "last_pass": int(alert["last_pass"]["M"]["seq"]["N"]),
        "newest_fail": int(alert["newest_fail"]["M"]["seq"]["N"]),
    }


def test_a_firing_job_is_read_only_down_to_its_alerts_newest_failure(configured: HTTPServer) -> None:
    """A batch whose cells of a firing job are all newer than its alert's newest failure
    reads the job only down to that failure: a cell below it that changed without a record
    (here written behind the stream's back) is not seen. A batch with a record at or below
    it, anywhere in the batch, walks the whole run again."""
    evaluator = handler("evaluator")

    def evaluate(*records: dict[str, Any]) -> None:
        set_clock(datetime(2026, 11, 18, 10, tzinfo=UTC))
        response = evaluator.lambda_handler({"Records": list(records)}, context("evaluator"))
        assert response == {"batchItemFailures": []}

    cell_record(1, "pass")
    evaluate(*(cell_record(seq, "fail") for seq in range(2, 7)))
    assert job_alert() == {"streak": 5, "first_fail": 2, "last_pass": 1, "newest_fail": 6}
    hidden = cell_record(3, "pass", "MODIFY")  # the table changes; the record is held back
    evaluate(cell_record(7, "fail"))
    assert job_alert() == {"streak": 6, "first_fail": 2, "last_pass": 1, "newest_fail": 7}
    evaluate(cell_record(8, "fail"), hidden)
    assert job_alert() == {"streak": 5, "first_fail": 4, "last_pass": 3, "newest_fail": 8}
