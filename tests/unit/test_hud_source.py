"""The HUD source against a local HTTP server serving HUD-shaped responses."""

from __future__ import annotations

import gzip
import json
import time
from datetime import UTC, datetime
from typing import Any

import pytest
from pytest_httpserver import HTTPServer
from werkzeug import Request, Response

from tests.support.hud import PATH, grid
from trunkwatch.domain.config import load_deployment
from trunkwatch.net.http import HttpClient
from trunkwatch.sources.base import SourceError
from trunkwatch.sources.hud import HudSource

NOW = datetime(2026, 11, 18, 20, 0, tzinfo=UTC)


def source(server: HTTPServer, token: str | None = "bot-token", timeout: float = 5.0) -> HudSource:
    trunk = load_deployment(
        {"trunks": [{"repo": "pytorch/pytorch", "url": server.url_for("/").rstrip("/")}]}
    ).trunks[0]
    return HudSource(trunk, token, HttpClient(timeout_s=timeout))


def test_parses_grid_and_sends_bot_token(httpserver: HTTPServer) -> None:
    httpserver.expect_request(
        PATH, query_string="per_page=50", headers={"x-hud-internal-bot": "bot-token"}
    ).respond_with_json(grid())
    snapshot = source(httpserver).poll({}, NOW)
    assert [c.commit.sha for c in snapshot.commits] == ["bbb", "aaa"]
    newest = snapshot.commits[0]
    assert newest.commit.pr == 2 and newest.commit.title == "second" and newest.complete
    assert [r.name for r in newest.runs] == [
        "pull / b / test (default, 1, 2, r)",
        "pull / b / test (default, 2, 2, r)",
    ]
    assert newest.runs[0].failure_lines == ("FAILED t",)
    assert newest.runs[1].failed_before
    assert snapshot.commits[1].runs[0].conclusion in ("pending", "in_progress")
    assert snapshot.http_requests == 1


def test_gzip_body(httpserver: HTTPServer) -> None:
    body = gzip.compress(json.dumps(grid()).encode())
    httpserver.expect_request(PATH).respond_with_response(
        Response(body, headers={"Content-Encoding": "gzip", "Content-Type": "application/json"})
    )
    assert len(source(httpserver).poll({}, NOW).commits) == 2


@pytest.mark.parametrize(
    ("response", "kind", "words"),
    [
        (Response("oops", status=502), "http_5xx", "502"),
        (Response("slow down", status=429, headers={"Retry-After": "30"}), "rate_limited", "retry after 30"),
        (Response("no", status=403), "auth", "403"),
        (Response("bad token", status=401), "auth", "401"),
        (Response("slow", status=403, headers={"Retry-After": "7"}), "rate_limited", "retry after 7s"),
        (Response('{"message": "API rate limit exceeded"}', status=403), "rate_limited", "403"),
        (
            Response("later", status=429, headers={"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}),
            "rate_limited",
            "retry after 0s",
        ),
        (Response("gone", status=404), "http_4xx", "404"),
        (Response('{"jobNames": [', status=200), "malformed", "not valid JSON"),
        (Response("[]", status=200), "malformed", "not a JSON object"),
        (
            Response(gzip.compress(b'{"jobNames": []}')[:-6], headers={"Content-Encoding": "gzip"}),
            "malformed",
            "gzip",
        ),
    ],
)
def test_source_errors(httpserver: HTTPServer, response: Response, kind: str, words: str) -> None:
    httpserver.expect_request(PATH).respond_with_response(response)
    with pytest.raises(SourceError) as caught:
        source(httpserver).poll({}, NOW)
    assert caught.value.kind == kind
    assert words in str(caught.value)
    assert "bot-token" not in str(caught.value)


@pytest.mark.parametrize(
    ("mutate", "words"),
    [
        (lambda g: g["shaGrid"][0]["jobs"].pop(), "has 2 jobs for 3 jobNames"),
        (lambda g: g["shaGrid"][1].pop("sha"), "shaGrid[1] has no 'sha'"),
        (lambda g: g["shaGrid"][0].update(time="yesterday"), "invalid time"),
        (lambda g: g.pop("jobNames"), "jobNames"),
        (lambda g: g["shaGrid"][0]["jobs"].__setitem__(0, "failure"), "not an object"),
    ],
)
def test_malformed_grid(httpserver: HTTPServer, mutate: Any, words: str) -> None:
    body = grid()
    mutate(body)
    httpserver.expect_request(PATH).respond_with_json(body)
    with pytest.raises(SourceError) as caught:
        source(httpserver).poll({}, NOW)
    assert caught.value.kind == "malformed" and words in str(caught.value)


def test_timeout(httpserver: HTTPServer) -> None:
    def slow(request: Request) -> Response:
        time.sleep(1.0)
        return Response(json.dumps(grid()))

    httpserver.expect_request(PATH).respond_with_handler(slow)
    with pytest.raises(SourceError) as caught:
        source(httpserver, timeout=0.2).poll({}, NOW)
    assert caught.value.kind == "timeout"


def test_connection_refused() -> None:
    trunk = load_deployment({"trunks": [{"repo": "pytorch/pytorch", "url": "http://127.0.0.1:9"}]}).trunks[0]
    with pytest.raises(SourceError) as caught:
        HudSource(trunk, None).poll({}, NOW)
    assert caught.value.kind == "network"


def test_token_is_not_sent_to_another_host_on_redirect(httpserver: HTTPServer) -> None:
    other = HTTPServer(host="localhost")  # same machine, different host name
    other.start()
    try:
        other.expect_request(PATH).respond_with_json(grid())
        httpserver.expect_request(PATH).respond_with_response(
            Response(status=302, headers={"Location": other.url_for(PATH) + "?per_page=50"})
        )
        assert len(source(httpserver).poll({}, NOW).commits) == 2
        ((forwarded, _),) = other.log
        assert "x-hud-internal-bot" not in {name.lower() for name, _ in forwarded.headers.items()}
    finally:
        other.stop()


def recorded_row(sha: str, jobs: list[dict[str, Any]], **changes: Any) -> dict[str, Any]:
    """A shaGrid row with every field the HUD API sends (RowDataAPIResponse)."""
    row = {
        "sha": sha,
        "time": "2026-11-18T19:30:00Z",
        "prNum": 160001,
        "diffNum": None,
        "commitUrl": f"https://github.com/pytorch/pytorch/commit/{sha}",
        "commitTitle": "[inductor] change (#160001)",
        "commitMessageBody": "Summary.\n\nPull Request resolved: https://github.com/pytorch/pytorch/pull/160001",
        "author": "dev1",
        "authorUrl": "https://github.com/dev1",
        "jobs": jobs,
        "isForcedMerge": False,
        "isForcedMergeWithFailures": False,
        "isAutoreverted": False,
    }
    row.update(changes)
    return row


def recorded_job(job_id: int, conclusion: str, **changes: Any) -> dict[str, Any]:
    """A HUD cell as the API sends it (JobData with nulls and the name stripped)."""
    job = {
        "id": str(job_id),
        "workflowId": "19000000001",
        "time": "2026-11-18T19:35:00Z",
        "conclusion": conclusion,
        "status": "completed",
        "htmlUrl": f"https://github.com/pytorch/pytorch/actions/runs/19000000001/job/{job_id}",
        "logUrl": f"https://ossci-raw-job-status.s3.amazonaws.com/log/{job_id}",
        "durationS": 3120,
        "queueTimeS": 45,
        "runnerName": "i-0abc",
        "repo": "pytorch/pytorch",
        "failureLines": [],
        "failureLineNumbers": [],
        "failureCaptures": [],
    }
    job.update(changes)
    return job


def test_runner_fleet_variants_of_one_job_merge_into_one_key(httpserver: HTTPServer) -> None:
    from trunkwatch.domain.cells import CellState, build_cells

    names = [
        "trunk / linux-jammy-py3.10-gcc11 / test (default, 1, 2, linux.2xlarge)",
        "trunk / linux-jammy-py3.10-gcc11 / test (default, 1, 2, lf.linux.2xlarge)",
        "trunk / linux-jammy-py3.10-gcc11 / test (default, 2, 2, lf.ephemeral.linux.2xlarge)",
        "trunk / linux-jammy-py3.10-gcc11 / test (default, 2, 2, ephemeral.linux.2xlarge)",
        "trunk / win-vs2022-cpu-py3 / test (default, 1, 1, lf.windows.4xlarge.nonephemeral)",
        "trunk / linux-jammy-py3.10-gcc11 / test (default, 1, 1, linux.2xlarge.memory)",
    ]
    jobs = [
        recorded_job(1, "success"),
        {},
        recorded_job(3, "failure", failureLines=["FAILED test_ops.py::test_x"]),
        {},
        recorded_job(5, "success"),
        recorded_job(6, "success"),
    ]
    httpserver.expect_request(PATH).respond_with_json(
        {"jobNames": names, "shaGrid": [recorded_row("ccc", jobs)]}
    )
    (result,) = source(httpserver).poll({}, NOW).commits
    cells = build_cells(result.commit.sha, result.runs)
    assert sorted(cells) == [
        "trunk / linux-jammy-py3.10-gcc11 / test (default, linux.2xlarge)",
        "trunk / linux-jammy-py3.10-gcc11 / test (default, linux.2xlarge.memory)",
        "trunk / win-vs2022-cpu-py3 / test (default, windows.4xlarge.nonephemeral)",
    ]
    merged = cells["trunk / linux-jammy-py3.10-gcc11 / test (default, linux.2xlarge)"]
    assert merged.state == CellState.FAIL and merged.failure_lines == ("FAILED test_ops.py::test_x",)


def test_an_autoreverted_commit_carries_what_reverted_it(httpserver: HTTPServer) -> None:
    names = ["pull / linux-jammy-py3.10-gcc11 / test (default, 1, 1, linux.2xlarge)"]
    rows = [
        recorded_row(
            "ddd",
            [recorded_job(1, "failure")],
            isAutoreverted=True,
            autorevertWorkflows=["pull", "pull"],
            autorevertSignals=["test_ops.py::test_x", "pull / linux-jammy-py3.10-gcc11 / test"],
        ),
        recorded_row("ccc", [recorded_job(2, "success")], isAutoreverted=True),
        recorded_row("bbb", [recorded_job(3, "success")], autorevertWorkflows=None),
        # older HUD versions send no autorevert fields at all
        {k: v for k, v in recorded_row("aaa", [{}]).items() if k != "isAutoreverted"},
    ]
    httpserver.expect_request(PATH).respond_with_json({"jobNames": names, "shaGrid": rows})
    commits = [r.commit for r in source(httpserver).poll({}, NOW).commits]
    assert [c.autoreverted_by for c in commits] == [
        "autorevert (test_ops.py::test_x, pull / linux-jammy-py3.10-gcc11 / test)",
        "autorevert",
        None,
        None,
    ]
