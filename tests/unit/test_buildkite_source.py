"""The `buildkite` source against the Buildkite stand-in on 127.0.0.1
(`trunkwatch_local.buildkite_server`): builds as the builds listing returns them
(tests/fixtures/buildkite/*.json), `Link` paging, weak ETags answered 304, and the
`RateLimit-*` headers with 429 over the limit."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.support.buildkite import PIPELINE, build, job, retried_green, waiter
from trunkwatch.domain.cells import AGENT_FAILURE, CellState, build_cells
from trunkwatch.domain.clock import format_time, parse_time
from trunkwatch.domain.config import TrunkConfig
from trunkwatch.net.http import HttpClient
from trunkwatch.sources.base import Snapshot, SourceError
from trunkwatch.sources.buildkite import BuildkiteSource
from trunkwatch_local.buildkite_server import BuildkiteServer

TOKEN = "bk-test-token-0123456789"  # a made-up value the tests look for in state and messages
T0 = datetime(2026, 6, 1, 10, 0, tzinfo=UTC)
NOW = T0 + timedelta(days=1)
WINDOW = 6


def sha_of(n: int) -> str:
    return hashlib.sha1(f"commit {n}".encode()).hexdigest()  # noqa: S324 - a made-up commit id


@pytest.fixture
def server() -> Iterator[BuildkiteServer]:
    server = BuildkiteServer(PIPELINE, token=TOKEN)
    yield server
    server.stop()


def source(server: BuildkiteServer, window: int = WINDOW, per_page: int = 4) -> BuildkiteSource:
    trunk = TrunkConfig.from_dict(
        {
            "repo": "acme/engine",
            "source": "buildkite",
            "pipeline": PIPELINE,
            "url": server.url,
            "per_page": window,
        }
    )
    return BuildkiteSource(trunk, TOKEN, HttpClient(), builds_per_page=per_page)


def finished_builds(count: int, jobs: Any = None) -> list[dict[str, Any]]:
    """`count` passing builds, one per commit, newest first, each 20 minutes after the last."""
    builds = []
    for n in range(1, count + 1):
        made = jobs(n) if jobs else [job(n, "Basic Correctness Test"), job(n, "Lint")]
        at = T0 + timedelta(minutes=20 * n)
        builds.append(build(n, sha_of(n), at, made, finished=at + timedelta(minutes=15)))
    return builds[::-1]


def cells(snapshot: Snapshot) -> dict[str, dict[str, CellState]]:
    return {
        r.commit.sha: {key: cell.state for key, cell in build_cells(r.commit.sha, r.runs).items()}
        for r in snapshot.commits
    }


def test_the_first_poll_pages_until_it_has_the_window(server: BuildkiteServer) -> None:
    server.serve(finished_builds(15))
    snapshot = source(server).poll({}, NOW)
    assert [r.commit.sha for r in snapshot.commits] == [sha_of(n) for n in range(15, 15 - WINDOW, -1)]
    requests = server.take()
    assert len(requests) == 2  # 4 builds a page: the second page completes the window of 6
    assert requests[0].query == {
        "branch": "main",
        "include_retried_jobs": "true",
        "per_page": "4",
    }
    assert requests[1].query["page"] == "2"  # the Link header's next page
    assert all(r.headers["Authorization"] == f"Bearer {TOKEN}" for r in requests)
    assert TOKEN not in str(snapshot.state)
    newest = snapshot.commits[0].commit
    assert (newest.title, newest.author, newest.pr) == ("Speed up the tokenizer (#101)", "ada", 101)
    assert newest.url == f"https://github.com/acme/engine/commit/{sha_of(15)}"
    assert newest.time == T0 + timedelta(minutes=300)
    assert cells(snapshot)[sha_of(15)] == {"Basic Correctness Test": CellState.PASS, "Lint": CellState.PASS}


def test_jobs_map_to_cells_as_the_source_says(server: BuildkiteServer) -> None:
    jobs = [
        waiter(1),
        job(1, "Block deploy", "blocked", type="manual"),
        job(1, "Trigger docs", "passed", type="trigger"),
        job(1, "Soft", "failed", soft_failed=True),
        job(1, "Broken test", "failed"),
        *retried_green(1, "Flaky test"),
        job(1, "Agent lost", "failed", signal_reason="agent_stop", exit_status=-1),
        job(1, "Never picked up", "expired"),
        job(1, "Too slow", "timed_out"),
        job(1, "Canceled", "canceled"),
        job(1, "Skipped", "broken"),
        job(1, "Still running", "running"),
        job(1, "Waiting", "scheduled"),
        job(1, "test (default, 1, 2, gpu)", "passed"),
        job(1, "test (default, 2, 2, gpu)", "failed"),
        job(1, "Distributed 1/3", "passed", parallel_group_index=0, parallel_group_total=3),
        job(1, "Distributed 2/3", "failed", parallel_group_index=1, parallel_group_total=3),
        job(1, "Distributed 3/3", "passed", parallel_group_index=2, parallel_group_total=3),
    ]
    server.serve([build(1, sha_of(1), T0, jobs)])
    snapshot = source(server).poll({}, NOW)
    assert cells(snapshot)[sha_of(1)] == {
        "Soft": CellState.PASS,
        "Broken test": CellState.FAIL,
        "Flaky test": CellState.FLAKY,
        "Agent lost": CellState.FAIL,
        "Never picked up": CellState.FAIL,
        "Too slow": CellState.FAIL,
        "Canceled": CellState.NODATA,
        "Skipped": CellState.NODATA,
        "Still running": CellState.PENDING,
        "Waiting": CellState.PENDING,
        "test (default, gpu)": CellState.FAIL,
        "Distributed": CellState.FAIL,
    }
    built = build_cells(sha_of(1), snapshot.commits[0].runs)
    assert built["Agent lost"].failure_lines == (f"{AGENT_FAILURE}agent_stop",)
    assert built["Never picked up"].failure_lines[0].startswith(AGENT_FAILURE)
    assert built["Broken test"].failure_lines == ()
    assert built["Flaky test"].attempt == 2


def test_an_agent_failure_retried_green_is_a_pass_and_not_flaky(server: BuildkiteServer) -> None:
    passed = job(1, "Agent lost once", "passed", attempt=2)
    lost = job(
        1,
        "Agent lost once",
        "failed",
        retried=True,
        retried_in_job_id=passed["id"],
        signal_reason="agent_stop",
    )
    server.serve([build(1, sha_of(1), T0, [lost, passed])])
    assert cells(source(server).poll({}, NOW))[sha_of(1)] == {"Agent lost once": CellState.PASS}


def test_a_job_run_names_the_newest_job_and_its_build_for_a_retry(server: BuildkiteServer) -> None:
    again = job(7, "Broken twice", "failed", attempt=2)
    broken = job(7, "Broken twice", "failed", retried=True, retried_in_job_id=again["id"])
    flaky = retried_green(7, "Flaky")
    server.serve([build(7, sha_of(7), T0, [broken, again, *flaky, job(7, "Lint")])])
    runs = {run.name: run for run in source(server).poll({}, NOW).commits[0].runs}
    assert {name: (run.job_id, run.build) for name, run in runs.items()} == {
        "Broken twice": (again["id"], 7),
        "Flaky": (flaky[1]["id"], 7),
        "Lint": (job(7, "Lint")["id"], 7),
    }
    # A failure after a failed attempt is a failed retry already (no rerun confirms it again).
    assert runs["Broken twice"].failed_before and runs["Flaky"].failed_before
    assert not runs["Lint"].failed_before


def test_commits_builds_of_other_kinds_and_rebuilds(server: BuildkiteServer) -> None:
    builds = finished_builds(3)
    rebuild = build(
        9,
        sha_of(2),
        T0 + timedelta(hours=5),
        [job(9, "Basic Correctness Test", "failed")],
        finished=T0 + timedelta(hours=6),
        rebuilt_from={"id": builds[1]["id"], "number": 2, "url": builds[1]["url"]},
    )
    old_rebuild = build(
        10, sha_of(99), T0 + timedelta(hours=5), [job(10, "Lint")], rebuilt_from={"number": 0}
    )
    nightly = build(11, sha_of(3), T0 + timedelta(hours=6), [job(11, "Nightly")], source="schedule")
    unresolved = build(12, "HEAD", T0 + timedelta(hours=6), [job(12, "Lint")])
    from_message = build(
        4, sha_of(4), T0 + timedelta(hours=2), [], message="Fix (#7)\n\nbody", pull_request=None
    )
    server.serve([unresolved, nightly, old_rebuild, rebuild, from_message, *builds])
    snapshot = source(server, per_page=20).poll({}, NOW)
    assert [r.commit.sha for r in snapshot.commits] == [sha_of(4), sha_of(3), sha_of(2), sha_of(1)]
    assert snapshot.commits[0].commit.pr == 7
    found = cells(snapshot)
    assert found[sha_of(2)] == {"Basic Correctness Test": CellState.FAIL, "Lint": CellState.PASS}
    assert "Nightly" not in found[sha_of(3)]


def test_an_unchanged_pipeline_costs_conditional_requests_only(server: BuildkiteServer) -> None:
    server.serve(finished_builds(8))
    bk = source(server)
    first = bk.poll({}, NOW)
    second = bk.poll(first.state, NOW + timedelta(minutes=1))  # its own listings, read once
    assert all(not r.runs for r in second.commits)
    server.take()
    third = bk.poll(second.state, NOW + timedelta(minutes=2))
    assert third.unchanged and third.state == second.state
    requests = server.take()
    assert [r.query.get("created_from") or r.query.get("finished_from") for r in requests] == [
        first.state["open_from"],
        first.state["since"],
    ]
    assert all("If-None-Match" in r.headers for r in requests)


def test_later_polls_read_running_builds_and_builds_finished_again(server: BuildkiteServer) -> None:
    builds = finished_builds(8)
    running_at = T0 + timedelta(hours=4)
    running = build(9, sha_of(9), running_at, [job(9, "Lint", "running"), job(9, "Basic Correctness Test")])
    server.serve([running, *builds])
    bk = source(server)
    first = bk.poll({}, NOW)
    assert first.state["open_from"] == format_time(running_at)
    assert cells(first)[sha_of(9)]["Lint"] == CellState.PENDING

    # Build 9's job fails; build 5 (long finished) gets a job retried green and finishes again.
    later = NOW + timedelta(minutes=5)
    running = {**running, "jobs": [job(9, "Lint", "failed"), job(9, "Basic Correctness Test")]}
    retried = {
        **builds[3],
        "jobs": [*retried_green(5, "Lint"), job(5, "Basic Correctness Test")],
        "finished_at": format_time(later),
    }
    server.serve([running, *builds[:3], retried, *builds[4:]])
    server.take()
    snapshot = bk.poll(first.state, later)
    assert not snapshot.unchanged
    found = {sha: states for sha, states in cells(snapshot).items() if states}
    assert found == {
        sha_of(9): {"Lint": CellState.FAIL, "Basic Correctness Test": CellState.PASS},
        sha_of(5): {"Lint": CellState.FLAKY, "Basic Correctness Test": CellState.PASS},
    }
    assert all(not r.complete for r in snapshot.commits)
    assert len(snapshot.commits) == WINDOW  # the window, from the state
    assert snapshot.state["since"] == format_time(later)


def test_a_new_build_joins_the_window_and_the_oldest_leaves(server: BuildkiteServer) -> None:
    builds = finished_builds(8)
    server.serve(builds)
    bk = source(server)
    first = bk.poll({}, NOW)
    new = build(9, sha_of(9), T0 + timedelta(hours=5), [job(9, "Lint", "running")])
    server.serve([new, *builds])
    snapshot = bk.poll(first.state, NOW + timedelta(minutes=1))
    assert [r.commit.sha for r in snapshot.commits] == [sha_of(n) for n in range(9, 9 - WINDOW, -1)]
    assert cells(snapshot)[sha_of(9)] == {"Lint": CellState.PENDING}


def test_a_rate_limit_holds_every_request_until_it_resets(server: BuildkiteServer) -> None:
    server.serve(finished_builds(15))
    server.limit = 1  # the first page is the last request of the window
    bk = source(server)
    snapshot = bk.poll({}, NOW)
    assert snapshot.commits == [] and snapshot.rate_limited is not None
    assert snapshot.rate_limited.kind == "rate_limited"
    assert parse_time(snapshot.state["not_before"]) == NOW + timedelta(seconds=60)
    assert len(server.take()) == 1  # the answer saying none is left ends the poll
    held = bk.poll(snapshot.state, NOW + timedelta(seconds=30))
    assert held.commits == [] and held.rate_limited is not None and server.take() == []
    server.used = 0
    server.limit = 200
    resumed = bk.poll(snapshot.state, NOW + timedelta(seconds=61))
    assert len(resumed.commits) == WINDOW


def test_a_429_is_a_rate_limit_with_its_reset(server: BuildkiteServer) -> None:
    server.serve(finished_builds(3))
    server.limit = 0
    snapshot = source(server).poll({}, NOW)
    assert snapshot.rate_limited is not None
    assert "429" in str(snapshot.rate_limited)
    assert "not_before" in snapshot.state


def test_a_wrong_token_is_an_auth_error_that_names_no_token(server: BuildkiteServer) -> None:
    server.token = "another-token"
    with pytest.raises(SourceError) as raised:
        source(server).poll({}, NOW)
    assert raised.value.kind == "auth"
    assert "401" in str(raised.value) and TOKEN not in str(raised.value)


def test_a_malformed_build_is_refused_naming_the_field(server: BuildkiteServer) -> None:
    broken = build(1, sha_of(1), T0, [job(1, "Lint")])
    del broken["created_at"]
    server.serve([broken])
    with pytest.raises(SourceError) as raised:
        source(server).poll({}, NOW)
    assert raised.value.kind == "malformed"
    assert "0.created_at: Field required" in str(raised.value)
