"""The benchmarks: a tiny run writes every summary figure, and their instruments are right."""

from __future__ import annotations

import contextvars
import json
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from botocore.exceptions import ClientError

from benchmarks.__main__ import main
from benchmarks.budgets import BUDGETS, ORG_BUDGETS
from benchmarks.docs import render as render_page
from benchmarks.end_to_end import Call, time_invocations
from benchmarks.github_trunk import serve_at
from benchmarks.push import StoreCalls
from benchmarks.trunk import DAY_START, Day
from benchmarks.usage import Meter
from tests.support import webhooks
from tests.support.aws import PLAIN_TABLE, padded_item
from trunkwatch.domain.cells import build_cells
from trunkwatch.domain.config import TrunkConfig, load_deployment
from trunkwatch.net.http import HttpClient
from trunkwatch.sources.github import GitHubSource
from trunkwatch.sources.hud import parse_grid
from trunkwatch_local.github_server import GitHubServer
from trunkwatch_local.runtime import LocalRuntime

# The figures every summary has (design.md §8: the workloads' dataclasses), all numbers.
POLL_KEYS = [
    "http_requests",
    "http_unconditional_requests",
    "ddb_write_requests",
    "items_written",
    "items_read",
    "wall_s",
    "peak_mb",
]
SPEC_KEYS = {
    "ingest_hud.first_poll": POLL_KEYS,
    "ingest_hud.steady_poll": POLL_KEYS,
    "ingest_github.first_poll": POLL_KEYS,
    "ingest_github.steady_poll": POLL_KEYS,
    "evaluator": ["queries_per_changed_cell", "scans", "writes_per_changed_cell", "cells_per_s"],
    "end_to_end": [
        "commits",
        "job_columns",
        "notifications",
        "detection_delay_s_p50",
        "detection_delay_s_max",
        "schedule_period_s",
    ],
    "push": ["detection_delay_s_p50", "detection_delay_s_p95", "detection_delay_s_max", "usd_per_month"],
    "cold_start": ["boto3_import_s", "layer_mb", "api_layer_mb"],
    "cold_start.handler_import_ratio": ["ingest", "evaluator", "notifier", "authorizer", "api"],
    "cost": ["usd_per_month", "usd_per_month_all_in", "commits_per_day", "job_columns"],
    "cost.items": [
        "dashboard",
        "kms",
        "alarms",
        "metrics",
        "xray",
        "logs",
        "secrets",
        "dynamodb",
        "lambda",
        "sns",
        "api",
    ],
}


def _at(summary: dict[str, Any], path: str) -> Any:
    for part in path.split("."):
        summary = summary[part]
    return summary


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


@pytest.mark.long(minutes=4)
def test_quick_run_writes_every_summary_figure(tmp_path: Path) -> None:
    assert main(["--quick", "--out", str(tmp_path)]) == 0

    summary = json.loads((tmp_path / "summary.json").read_text())
    missing = [
        f"{section}.{key}"
        for section, keys in SPEC_KEYS.items()
        for key in keys
        if not _is_number(_at(summary, section).get(key))
    ]
    assert missing == []
    prices = summary["cost"]["prices"]
    assert prices and all(_is_number(v) for v in prices.values())
    assert set(summary["budgets"]) == {budget.name for budget in BUDGETS}
    for budget in summary["budgets"].values():
        assert isinstance(budget["pass"], bool) and _is_number(budget["limit"])
        assert budget["pass"] == (budget["measured"] <= budget["limit"])
    # What the figures say about the code, independent of speed.
    assert summary["ingest_hud"]["first_poll"]["items_written"] > 0
    assert summary["ingest_github"]["steady_poll"]["http_unconditional_requests"] == 0
    assert summary["evaluator"]["changed_cells"] > 0
    # The day's delays count every invocation on the path: the dispatcher's, each trunk's
    # ingest from the queue, the stream's.
    path = {"DispatcherFunction", "IngestFunction", "EvaluatorFunction", "NotifierFunction"}
    assert path <= set(summary["end_to_end"]["invocations"])
    assert summary["cost"]["usd_per_month"] > 0
    # Storage is the steady state of every kind, each kept as long as its TTL keeps it.
    storage = summary["cost"]["storage"]
    assert storage["retention_days"] == 30
    assert all(storage["gb_by_part"][part] > 0 for part in ("cells_and_commits", "ticks", "silences"))
    assert storage["gb"] == pytest.approx(sum(storage["gb_by_part"].values()), abs=1e-3)
    price = summary["cost"]["prices"]
    monthly = storage["gb"] * (price["dynamodb_storage_gb_month"] + price["dynamodb_pitr_gb_month"])
    assert summary["cost"]["items_detail"]["dynamodb"]["storage"] == pytest.approx(monthly, abs=1e-4)
    assert summary["push"]["notifications"] > 0 and summary["push"]["deliveries"] > 0
    # Both push runs paged on the in-memory store, metered on moto over the first 0.05 days.
    for pushed in (summary["push"], summary["push"]["buildkite"]):
        assert pushed["metered_days"] == 0.05 and pushed["trunk_jobs"] > pushed["metered_trunk_jobs"] > 0
    page = render_page(summary)
    assert "## Budgets" in page and "projected usage cost at PyTorch scale" in page
    assert "The table's steady-state size" in page
    assert "The messages, pages and delays come from the in-memory store over all 0.3 days" in page
    # The push section, checked on this run: `push --quick` would run the same one again.
    assert_push_pages_by_buildkite_deliveries_as_github(summary)


def test_meter_counts_requests_items_and_request_units(plain_table: Any) -> None:
    with Meter() as meter, meter.as_("code") as usage:
        plain_table.put_item(
            TableName=PLAIN_TABLE, Item=padded_item("A", "big", 1500)
        )  # 2 KB started: 2 units
        plain_table.put_item(TableName=PLAIN_TABLE, Item=padded_item("A", "small", 10))  # 1 unit
        # Shrinking an item costs its larger (old) size: 2 units.
        plain_table.update_item(
            TableName=PLAIN_TABLE,
            Key={"pk": {"S": "A"}, "sk": {"S": "big"}},
            UpdateExpression="SET #pad = :p",
            ExpressionAttributeNames={"#pad": "pad"},
            ExpressionAttributeValues={":p": {"S": "y"}},
        )
        with pytest.raises(ClientError):  # a failed conditional write: 1 unit, nothing written
            plain_table.put_item(
                TableName=PLAIN_TABLE,
                Item=padded_item("A", "small", 10),
                ConditionExpression="attribute_not_exists(pk)",
            )
        plain_table.batch_write_item(
            RequestItems={
                PLAIN_TABLE: [{"PutRequest": {"Item": padded_item("B", f"i{n}", 5000)}} for n in range(3)]
            }
        )  # 3 items of 5 KB: 15 units
        plain_table.transact_write_items(
            TransactItems=[{"Put": {"TableName": PLAIN_TABLE, "Item": padded_item("C", "t", 10)}}]
        )  # transactional: 2 units
        plain_table.get_item(
            TableName=PLAIN_TABLE, Key={"pk": {"S": "B"}, "sk": {"S": "i0"}}
        )  # 5 KB, eventual: 1
        plain_table.get_item(
            TableName=PLAIN_TABLE, Key={"pk": {"S": "B"}, "sk": {"S": "i0"}}, ConsistentRead=True
        )  # 2
        plain_table.get_item(
            TableName=PLAIN_TABLE, Key={"pk": {"S": "B"}, "sk": {"S": "none"}}
        )  # missing: 0.5
        plain_table.query(  # 3 x 5 KB read as one 15 KB result, eventually consistent: 2
            TableName=PLAIN_TABLE,
            KeyConditionExpression="pk = :p",
            ExpressionAttributeValues={":p": {"S": "B"}},
        )
        plain_table.query(  # filtered to nothing: the 3 items it evaluated still cost 2
            TableName=PLAIN_TABLE,
            KeyConditionExpression="pk = :p",
            FilterExpression="#pad = :none",
            ExpressionAttributeNames={"#pad": "pad"},
            ExpressionAttributeValues={":p": {"S": "B"}, ":none": {"S": "none"}},
        )
        plain_table.query(  # filtered to one of A's two small items: both evaluated, 0.5
            TableName=PLAIN_TABLE,
            KeyConditionExpression="pk = :p",
            FilterExpression="#pad = :y",
            ExpressionAttributeNames={"#pad": "pad"},
            ExpressionAttributeValues={":p": {"S": "A"}, ":y": {"S": "y"}},
        )
        plain_table.query(  # filtered, every item kept: 2
            TableName=PLAIN_TABLE,
            KeyConditionExpression="pk = :p",
            FilterExpression="#pad <> :none",
            ExpressionAttributeNames={"#pad": "pad"},
            ExpressionAttributeValues={":p": {"S": "B"}, ":none": {"S": "none"}},
        )
    plain_table.get_item(
        TableName=PLAIN_TABLE, Key={"pk": {"S": "B"}, "sk": {"S": "i0"}}
    )  # after: not counted

    assert usage.calls["dynamodb.PutItem"] == 3
    assert usage.ddb_write_requests == 6
    assert (usage.items_written, usage.write_units) == (1 + 1 + 1 + 0 + 3 + 1, 2 + 1 + 2 + 1 + 15 + 2)
    assert usage.ddb("GetItem", "Query") == 7
    assert (usage.items_read, usage.read_units) == (
        1 + 1 + 0 + 3 + 3 + 2 + 3,
        1 + 2 + 0.5 + 2 + 2 + 0.5 + 2,
    )


def test_meter_counts_the_requests_of_the_code_s_threads(plain_table: Any) -> None:
    """Requests sent from the code's own threads, in a copy of its context (as the cells'
    conditional puts are), count under its label, each once."""

    def put(n: int) -> None:
        plain_table.put_item(TableName=PLAIN_TABLE, Item=padded_item("A", f"i{n}", 1500))  # 2 units

    with Meter() as meter, meter.as_("code") as usage, ThreadPoolExecutor(4) as pool:
        for sent in [pool.submit(contextvars.copy_context().run, put, n) for n in range(40)]:
            sent.result()
    assert (usage.calls["dynamodb.PutItem"], usage.items_written, usage.write_units) == (40, 40, 80)


def test_an_invocation_on_the_memory_store_waits_for_its_store_calls() -> None:
    """The in-memory store answers in the process: on the deployed timeline each call the
    invocation made through the storage port adds its network wait to its time."""
    counted = StoreCalls()
    trunk = {"repo": webhooks.REPO, "source": "github", "webhook": True, "poll_every": "0"}
    runtime = LocalRuntime(store="memory", wrap_storage=counted.wrap)
    with mock.patch.dict(os.environ):
        runtime.start(load_deployment({"trunks": [trunk]}))
        try:
            calls: list[Call] = []
            time_invocations(runtime, calls, lambda: counted.count * 1000.0)
            before = counted.count
            answer = runtime.deliver("push", json.dumps(webhooks.push(["a" * 40])).encode(), DAY_START)
            made = counted.count - before
        finally:
            runtime.stop()
    assert answer["statusCode"] == 200 and made > 0
    webhook = [call for call in calls if call.function == "WebhookFunction"]
    assert len(webhook) == 1 and webhook[0].seconds >= 1000.0 * made


def test_github_stand_in_serves_the_hud_trunk() -> None:
    """Both sources see the same cells of the same trunk at the same moment."""
    day = Day(environments=2, window=8, tests=6)
    at = DAY_START + day.trunk.job_duration / 2  # some commits finished, some still running
    github = GitHubServer()
    try:
        serve_at(github, day.trunk, at)
        trunk = TrunkConfig.from_dict(
            {"repo": "pytorch/pytorch", "source": "github", "url": github.url, "per_page": day.window}
        )
        snapshot = GitHubSource(trunk, "token", HttpClient(), window=day.window).poll({}, at)
    finally:
        github.stop()
    from_github = {
        (r.commit.sha, key): cell.state
        for r in snapshot.commits
        for key, cell in build_cells(r.commit.sha, r.runs).items()
    }
    from_hud = {
        (r.commit.sha, key): cell.state
        for r in parse_grid(day.trunk.snapshot(at))
        for key, cell in build_cells(r.commit.sha, r.runs).items()
    }
    # GitHub alone knows whether a workflow run started its jobs: its `(workflow)` cells.
    workflow_cells = {k: v for k, v in from_github.items() if k[1].endswith(" / (workflow)")}
    assert workflow_cells and {state.value for state in workflow_cells.values()} == {"pass"}
    assert {k: v for k, v in from_github.items() if k not in workflow_cells} == from_hud
    assert {state.value for state in from_hud.values()} >= {"pass", "pending", "flaky"}


@pytest.mark.long(minutes=2)
def test_org_quick_polls_every_trunk_on_every_tick(tmp_path: Path) -> None:
    """`python -m benchmarks org --quick`: every trunk polled once a tick through the
    dispatcher, both detection delays measured, and the organization's budgets checked."""
    assert main(["org", "--quick", "--out", str(tmp_path)]) == 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    org = summary["org"]
    assert org["trunks"] == 4 and org["every_trunk_polled_each_tick"] is True and org["polls_missed"] == 0
    assert org["invocations_per_tick"] == {"dispatcher": 1, "ingest": 4}
    assert org["detections"] > 0 and org["false_alarms"] == 0
    assert org["poll_detection_delay_s_p95"] > 0 and org["push_detection_delay_s_p95"] > 0
    by_size = org["per_trunk_usd_per_month_by_size"]
    assert by_size["small"] > 0 and org["added_usd_per_month"]["10"] > 0
    assert {name for name in summary["budgets"] if name.startswith("organization")} == {
        budget.name for budget in ORG_BUDGETS
    }
    assert "## An organization on one deployment" in render_page(summary)


def test_buildkite_poll_at_vllms_volume_is_two_conditional_requests_when_quiet(tmp_path: Path) -> None:
    """`python -m benchmarks buildkite_poll`: a quiet poll of a vLLM-sized Buildkite trunk is
    two conditional requests writing nothing; a build finishing or landing writes one
    commit's cells; the month is priced and rendered."""
    assert main(["buildkite_poll", "--out", str(tmp_path)]) == 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    polled = summary["buildkite_poll"]
    polls = polled["polls"]
    quiet = polls["quiet_poll"]
    assert (quiet["http_requests"], quiet["http_unconditional_requests"], quiet["cells_written"]) == (2, 0, 0)
    first = polls["first_poll"]["cells_written"]
    assert 0 < polls["finishing_poll"]["cells_written"] == polls["landing_poll"]["cells_written"] < first
    assert (polled["commits_per_day"], polled["jobs"]) == (64, 266)
    assert polled["buildkite_requests_per_day"] < 3 * polled["polls_per_day"]
    assert polled["usd_per_month"] == pytest.approx(sum(polled["usd_per_month_by_item"].values()), abs=1e-3)
    assert "A Buildkite trunk at vLLM's volume" in render_page(summary)


def assert_push_pages_by_buildkite_deliveries_as_github(summary: dict[str, Any]) -> None:
    """The push section (`python -m benchmarks push --quick` makes the same one alone): the
    red trunk as Buildkite delivers it (signed `job.scheduled`, `job.finished` and
    `build.finished`) through the webhook function has the GitHub run's figures, pages as the
    GitHub run does, is compared with its polled Buildkite form, is priced at vLLM's volume,
    checked against its budgets and rendered."""
    pushed = summary["push"]["buildkite"]
    figures = [*SPEC_KEYS["push"], "deliveries", "notifications", "ddb_write_units_per_trunk_job"]
    assert [key for key in figures if not _is_number(pushed.get(key))] == []
    kinds = pushed["deliveries_by_kind"]
    assert set(kinds) == {"job.scheduled", "job.finished", "build.finished"} and kinds["build.finished"] > 0
    assert kinds["job.scheduled"] >= kinds["job.finished"]  # every attempt scheduled, some still running
    assert kinds["job.finished"] == pushed["trunk_jobs"] > pushed["metered_trunk_jobs"] > 0
    # Either CI's run paged on the in-memory store, metered on moto over the quick run's
    # first 0.05 days, where the storage port's calls were counted beside DynamoDB's requests.
    github = summary["push"]
    for run in (github, pushed):
        assert run["metered_days"] == 0.05 and "in-memory store" in run["basis"]
        assert run["per_trunk_job"]["store_calls"] > 0 and run["per_trunk_job"]["ddb_requests"] > 0
    completed = github["deliveries_by_kind"]["completed"]
    assert completed == github["trunk_jobs"] > github["metered_trunk_jobs"] > 0
    assert pushed["paging"]["job_pages"] > 0 and pushed["detection_delay_s_p50"] > 0
    # Either CI's deliveries of the same trunk page alike.
    assert pushed["same_pages_as_github"] is True
    assert [page[1:] for page in pushed["pages"]] == [page[1:] for page in summary["push"]["pages"]]
    polled = pushed["against_poll"]
    assert polled["polled_pages"] > 0 and polled["same_pages"] == (
        polled["only_pushed"] == polled["only_polled"] == []
    )
    assert pushed["trunk_jobs_per_day"] == 64 * 266
    assert pushed["usd_per_month"] == pytest.approx(sum(pushed["usd_per_month_items"].values()), abs=0.05)
    checked = {
        name: result for name, result in summary["budgets"].items() if name.startswith("Buildkite push")
    }
    assert set(checked) == {budget.name for budget in BUDGETS if budget.path.startswith("push.buildkite.")}
    assert all(isinstance(result["pass"], bool) for result in checked.values())
    page = render_page(summary)
    assert "as Buildkite delivers them to a webhook" in page
    assert "on moto over its first 0.05 days" in page
    assert "| pages against the GitHub deliveries' | the same, in the same order |" in page
