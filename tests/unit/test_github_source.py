"""The `github` source against the GitHub stand-in on 127.0.0.1 (`trunkwatch_local.github_server`).

It serves full GitHub objects (tests/fixtures/github/*.json) with what GitHub sends with them:
weak ETags answered with 304 on If-None-Match, `Link` pagination on `/repositories/{id}/...`
URLs, and `X-RateLimit-*` headers.
"""

from __future__ import annotations

import copy
import gzip
import hashlib
import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.support.paths import TESTS
from trunkwatch.domain.cells import CellState, build_cells
from trunkwatch.domain.clock import format_time, parse_time
from trunkwatch.domain.config import TrunkConfig
from trunkwatch.net.http import HttpClient
from trunkwatch.sources.base import Snapshot, SourceError
from trunkwatch.sources.github import GitHubSource
from trunkwatch_local.github_server import GitHubServer
from trunkwatch_local.stand_in import Request

FIXTURES = TESTS / "fixtures" / "github"
REPO = "octo-org/widgets"
REPO_ID = 700000001
TOKEN = "test-token-0123456789"  # a made-up value the tests look for in state and messages
T0 = datetime(2024, 5, 1, 10, 0, tzinfo=UTC)  # time of the oldest commit
WORKFLOWS = ("pull", "trunk", "lint", "docs", "inductor", "periodic", "slow", "rocm", "xpu", "nightly")
WINDOW = 12
N_COMMITS = 30


def _template(name: str) -> dict[str, Any]:
    return json.loads((FIXTURES / f"{name}.json").read_text())


_COMMIT, _RUN, _JOB = _template("commit"), _template("workflow_run"), _template("job")


def sha_of(n: int) -> str:
    return hashlib.sha1(f"commit {n}".encode()).hexdigest()  # noqa: S324 - a made-up commit id


def commit_obj(n: int, parents: list[str], at: datetime, message: str, login: str | None = "ada") -> dict:
    obj = copy.deepcopy(_COMMIT)
    sha = sha_of(n)
    obj.update(
        sha=sha,
        url=f"https://api.github.com/repos/{REPO}/commits/{sha}",
        html_url=f"https://github.com/{REPO}/commit/{sha}",
        parents=[
            {
                "sha": p,
                "url": f"https://api.github.com/repos/{REPO}/commits/{p}",
                "html_url": f"https://github.com/{REPO}/commit/{p}",
            }
            for p in parents
        ],
    )
    obj["commit"]["message"] = message
    obj["commit"]["author"]["date"] = obj["commit"]["committer"]["date"] = format_time(at)
    if login is None:
        obj["author"] = None
    else:
        obj["author"]["login"] = login
    return obj


def workflow_id(workflow: str) -> int:
    return 5_000_000 + (WORKFLOWS.index(workflow) if workflow in WORKFLOWS else 99)


def run_obj(run_id: int, workflow: str, sha: str, created: datetime, **changes: Any) -> dict:
    obj = copy.deepcopy(_RUN)
    obj.update(
        id=run_id,
        name=workflow,
        workflow_id=workflow_id(workflow),
        workflow_url=f"https://api.github.com/repos/{REPO}/actions/workflows/{workflow_id(workflow)}",
        head_sha=sha,
        path=f".github/workflows/{workflow}.yml",
        created_at=format_time(created),
        run_started_at=format_time(created),
        updated_at=format_time(created + timedelta(minutes=30)),
        url=f"https://api.github.com/repos/{REPO}/actions/runs/{run_id}",
        html_url=f"https://github.com/{REPO}/actions/runs/{run_id}",
        jobs_url=f"https://api.github.com/repos/{REPO}/actions/runs/{run_id}/jobs",
    )
    obj["head_commit"]["id"] = sha
    obj.update(changes)
    return obj


def job_obj(run: dict, index: int, name: str, conclusion: str | None = "success", attempt: int = 1) -> dict:
    obj = copy.deepcopy(_JOB)
    job_id = run["id"] * 1000 + attempt * 200 + index
    status = "completed" if conclusion else "in_progress"
    obj.update(
        id=job_id,
        run_id=run["id"],
        run_attempt=attempt,
        workflow_name=run["name"],
        head_sha=run["head_sha"],
        name=name,
        status=status,
        conclusion=conclusion,
        url=f"https://api.github.com/repos/{REPO}/actions/jobs/{job_id}",
        html_url=f"https://github.com/{REPO}/actions/runs/{run['id']}/job/{job_id}",
        run_url=run["url"],
        completed_at=obj["completed_at"] if conclusion else None,
    )
    return obj


def standard_jobs(workflow: str) -> list[str]:
    if workflow == "pull":
        return [
            "linux-jammy-py3.10-gcc11 / build",
            "linux-jammy-py3.10-gcc11 / test (default, 1, 2, linux.2xlarge)",
            "linux-jammy-py3.10-gcc11 / test (default, 2, 2, linux.2xlarge)",
        ]
    return ["build", "test"]


def workflow_obj(workflow: str) -> dict:
    number = WORKFLOWS.index(workflow)
    file = f".github/workflows/{workflow}.yml"
    return {
        "id": workflow_id(workflow),
        "node_id": f"W_kwDOABCDEF84A{number:04d}",
        "name": workflow,
        "path": file,
        "state": "active",
        "created_at": "2023-01-05T10:00:00.000Z",
        "updated_at": "2024-04-30T09:00:00.000Z",
        "url": f"https://api.github.com/repos/{REPO}/actions/workflows/{workflow_id(workflow)}",
        "html_url": f"https://github.com/{REPO}/blob/main/{file}",
        "badge_url": f"https://github.com/{REPO}/workflows/{workflow}/badge.svg",
    }


def repository() -> GitHubServer:
    """The GitHub stand-in serving the repository's workflows, and no commit yet."""
    server = GitHubServer(REPO, REPO_ID)
    server.reset = T0 + timedelta(days=1)
    server.workflows = {workflow_id(w): workflow_obj(w) for w in WORKFLOWS}
    return server


def push(
    gh: GitHubServer, n: int, message: str | None = None, login: str | None = "ada", jobs: bool = True
) -> str:
    """Commit n lands on the branch, with a push run of every workflow (unless not `jobs`)."""
    at = T0 + timedelta(minutes=10 * n)
    parents = [gh.commits[0]["sha"]] if gh.commits else [sha_of(-1)]
    gh.commits.insert(0, commit_obj(n, parents, at, message or f"Fix widget {n} (#{1000 + n})", login))
    sha = sha_of(n)
    if jobs:
        for w, workflow in reversed(list(enumerate(WORKFLOWS))):
            run = run_obj(9_000_000_000 + n * 100 + w, workflow, sha, at + timedelta(minutes=1, seconds=w))
            gh.runs.insert(0, run)
            gh.attempts[run["id"]] = {
                1: [job_obj(run, i, name) for i, name in enumerate(standard_jobs(workflow))]
            }
    return sha


def run_of(gh: GitHubServer, n: int, workflow: str) -> dict:
    return next(r for r in gh.runs if r["head_sha"] == sha_of(n) and r["name"] == workflow)


def rerun(gh: GitHubServer, run: dict, attempt: int, jobs: list[dict], conclusion: str = "success") -> None:
    """A new attempt that re-ran `jobs`; the others keep their earlier result."""
    gh.attempts[run["id"]][attempt] = jobs
    run.update(
        run_attempt=attempt,
        conclusion=conclusion,
        updated_at=format_time(parse_time(run["updated_at"]) + timedelta(hours=attempt)),
        previous_attempt_url=f"{run['url']}/attempts/{attempt - 1}",
    )


def kinds(requests: list[Request]) -> list[str]:
    """commits / runs:<page> / jobs:<run id> / attempt:<run id>:<n> per request."""
    out = []
    for r in requests:
        path = r.path
        if path.endswith("/commits"):
            out.append("commits")
        elif path.endswith("/actions/runs"):
            out.append(f"runs:{r.query.get('page', '1')}")
        elif m := re.search(r"/runs/(\d+)/attempts/(\d+)/jobs$", path):
            out.append(f"attempt:{m[1]}:{m[2]}")
        elif m := re.search(r"/runs/(\d+)/jobs$", path):
            out.append(f"jobs:{m[1]}")
        elif m := re.search(r"/actions/workflows/(\d+)$", path):
            out.append(f"workflow:{m[1]}")
    return out


@pytest.fixture
def bare() -> Iterator[GitHubServer]:
    server = repository()
    yield server
    server.stop()
    assert server.unanswered == []  # the source asked for nothing GitHub would not answer


@pytest.fixture
def gh(bare: GitHubServer) -> GitHubServer:
    for n in range(N_COMMITS):
        push(bare, n)
    return bare


def trunk_at(url: str | None) -> TrunkConfig:
    return TrunkConfig.from_dict({"repo": REPO, "branch": "main", "source": "github", "url": url})


def source(gh: GitHubServer, token: str | None = TOKEN, timeout_s: float = 5.0) -> GitHubSource:
    trunk = trunk_at(gh.url)
    return GitHubSource(trunk, token, HttpClient(timeout_s=timeout_s), window=WINDOW)


def at(minutes_after_head: float) -> datetime:
    return T0 + timedelta(minutes=10 * (N_COMMITS - 1) + minutes_after_head)


def job_runs(snapshot: Snapshot) -> dict[str, dict[str, Any]]:
    """sha -> job name -> JobRun, over every commit of the snapshot."""
    return {c.commit.sha: {r.name: r for r in c.runs} for c in snapshot.commits if c.runs}


def roundtrip(state: dict[str, Any]) -> dict[str, Any]:
    """What the caller stores and reads back (a JSON attribute)."""
    return json.loads(json.dumps(state))


# --- first and steady polls ----------------------------------------------------------------


def test_first_poll_reads_window_commits_runs_and_every_job(gh: GitHubServer) -> None:
    src = source(gh)
    snap = src.poll({}, at(60))
    requests = gh.take()

    assert [c.commit.sha for c in snap.commits] == [sha_of(n) for n in range(29, 17, -1)]
    head = snap.commits[0].commit
    assert head.time == T0 + timedelta(minutes=290)
    assert (head.title, head.author, head.pr) == ("Fix widget 29 (#1029)", "ada", 1029)
    assert head.url == f"https://github.com/{REPO}/commit/{sha_of(29)}"
    assert all(not c.complete for c in snap.commits)

    # Every job of every run of the window, named "workflow / job" with shards kept.
    runs = job_runs(snap)
    assert set(runs) == {sha_of(n) for n in range(18, 30)}
    on_20 = runs[sha_of(20)]
    shard = on_20["pull / linux-jammy-py3.10-gcc11 / test (default, 2, 2, linux.2xlarge)"]
    assert (shard.conclusion, shard.attempt, shard.failed_before, shard.failure_lines) == (
        "success",
        1,
        False,
        (),
    )
    assert re.fullmatch(rf"https://github.com/{REPO}/actions/runs/\d+/job/\d+", shard.url)
    # Every job, plus one `(workflow)` job per run that started its jobs.
    assert len(on_20) == len(WORKFLOWS) * 3 + 1
    assert on_20["pull / (workflow)"].conclusion == "success"
    assert "lint / test" in on_20

    # 120 runs in the window: two pages of runs, then stop (pages 3 and 4 are older).
    assert kinds(requests)[:3] == ["commits", "runs:1", "runs:2"]
    assert sorted(k for k in kinds(requests) if k.startswith("jobs:")) == sorted(
        f"jobs:{r['id']}" for r in gh.runs if r["head_sha"] in runs
    )
    assert snap.http_requests == len(requests) == 1 + 2 + WINDOW * len(WORKFLOWS)
    assert src.rate_limited is None


def test_every_request_carries_the_api_headers_and_the_token_as_bearer(gh: GitHubServer) -> None:
    source(gh).poll({}, at(60))
    requests = gh.take()
    assert requests
    for r in requests:
        assert r.headers["Accept"] == "application/vnd.github+json"
        assert r.headers["X-Github-Api-Version"] == "2022-11-28"
        assert r.headers["Authorization"] == f"Bearer {TOKEN}"


def test_without_a_token_no_authorization_header_is_sent(gh: GitHubServer) -> None:
    source(gh, token=None).poll({}, at(60))
    assert all("Authorization" not in r.headers for r in gh.take())


def test_steady_poll_is_conditional_reads_no_jobs_and_keeps_the_state(gh: GitHubServer) -> None:
    src = source(gh)
    first = src.poll({}, at(60))
    gh.take()

    steady = src.poll(roundtrip(first.state), at(61))
    requests = gh.take()

    assert kinds(requests) == ["commits", "runs:1", "runs:2"]
    etags = [r.headers.get("If-None-Match") for r in requests]
    assert all(tag and tag.startswith('W/"') for tag in etags)
    assert steady.http_requests == 3
    assert steady.state == first.state
    assert [c.commit for c in steady.commits] == [c.commit for c in first.commits]
    assert all(c.runs == () for c in steady.commits)
    # 304s spend no rate limit.
    assert gh.remaining == 5000 - first.http_requests


def test_state_stays_small_for_a_50_commit_window(bare: GitHubServer) -> None:
    for n in range(55):
        push(bare, n)
        for extra in range(5):  # 15 runs per commit
            run = run_obj(
                9_100_000_000 + n * 10 + extra,
                f"extra-{extra}",
                sha_of(n),
                T0 + timedelta(minutes=10 * n + 2, seconds=extra),
            )
            bare.runs.insert(0, run)
            bare.attempts[run["id"]] = {1: [job_obj(run, 0, "build")]}
    bare.runs.sort(key=lambda r: r["created_at"], reverse=True)
    trunk = trunk_at(bare.url)
    snap = GitHubSource(trunk, TOKEN, window=50).poll({}, T0 + timedelta(hours=10))
    assert len(snap.commits) == 50
    # each run's jobs and its `(workflow)` job
    assert sum(len(c.runs) for c in snap.commits) == 50 * (len(WORKFLOWS) * 3 + 1 + 5 * 2)
    assert len(json.dumps(snap.state)) < 100_000


# --- changes -------------------------------------------------------------------------------


def test_a_changed_run_is_the_only_one_whose_jobs_are_read(gh: GitHubServer) -> None:
    src = source(gh)
    state = src.poll({}, at(60)).state
    gh.take()

    run = run_of(gh, 27, "trunk")
    run.update(conclusion="failure", updated_at=format_time(at(90)))
    gh.attempts[run["id"]][1][1].update(conclusion="failure")
    snap = src.poll(roundtrip(state), at(91))

    assert kinds(gh.take()) == ["commits", "runs:1", "runs:2", f"jobs:{run['id']}"]
    assert list(job_runs(snap)) == [sha_of(27)]
    assert {name: r.conclusion for name, r in job_runs(snap)[sha_of(27)].items()} == {
        "trunk / build": "success",
        "trunk / test": "failure",
        "trunk / (workflow)": "success",
    }
    # Delivered now: the next poll is steady again.
    again = src.poll(roundtrip(snap.state), at(92))
    assert kinds(gh.take()) == ["commits", "runs:1", "runs:2"]
    assert again.state == snap.state


def test_a_new_commit_reads_only_the_new_runs_even_when_pages_shift(gh: GitHubServer) -> None:
    src = source(gh)
    state = src.poll({}, at(60)).state
    gh.take()

    new_sha = push(gh, 30)
    snap = src.poll(roundtrip(state), at(70))
    requests = kinds(gh.take())

    assert snap.commits[0].commit.sha == new_sha
    assert len(snap.commits) == WINDOW
    assert requests[:3] == ["commits", "runs:1", "runs:2"]
    assert sorted(k for k in requests[3:]) == sorted(f"jobs:{r['id']}" for r in gh.runs[: len(WORKFLOWS)])
    assert list(job_runs(snap)) == [new_sha]


def test_pending_jobs_report_their_status_and_are_read_again_when_done(gh: GitHubServer) -> None:
    run = run_of(gh, 29, "pull")
    run.update(status="in_progress", conclusion=None)
    gh.attempts[run["id"]][1][1].update(status="in_progress", conclusion=None)
    gh.attempts[run["id"]][1][2].update(status="queued", conclusion=None)
    src = source(gh)
    first = src.poll({}, at(5))
    pull = job_runs(first)[sha_of(29)]
    assert (
        pull["pull / linux-jammy-py3.10-gcc11 / test (default, 1, 2, linux.2xlarge)"].conclusion
        == "in_progress"
    )
    assert (
        pull["pull / linux-jammy-py3.10-gcc11 / test (default, 2, 2, linux.2xlarge)"].conclusion == "queued"
    )
    gh.take()

    run.update(status="completed", conclusion="failure", updated_at=format_time(at(40)))
    gh.attempts[run["id"]][1][1].update(status="completed", conclusion="failure")
    gh.attempts[run["id"]][1][2].update(status="completed", conclusion="success")
    snap = src.poll(roundtrip(first.state), at(41))
    assert kinds(gh.take())[3:] == [f"jobs:{run['id']}"]
    cells = build_cells(sha_of(29), job_runs(snap)[sha_of(29)].values())
    assert cells["pull / linux-jammy-py3.10-gcc11 / test (default, linux.2xlarge)"].state == CellState.FAIL


def test_jobs_of_a_large_run_are_read_across_pages(gh: GitHubServer) -> None:
    run = run_of(gh, 28, "trunk")
    gh.attempts[run["id"]][1] = [
        job_obj(run, i, f"test (default, {i + 1}, 130, linux.4xlarge)") for i in range(130)
    ]
    snap = source(gh).poll({}, at(60))
    assert kinds(gh.take()).count(f"jobs:{run['id']}") == 2
    names = {n for n in job_runs(snap)[sha_of(28)] if n.startswith("trunk / test (default")}
    assert len(names) == 130


def test_merged_branch_commits_are_left_out_of_the_first_parent_window(bare: GitHubServer) -> None:
    for n in range(5):
        push(bare, n)
    base = bare.commits[0]["sha"]
    side = commit_obj(50, [base], T0 + timedelta(minutes=45), "Side branch work")
    merge = commit_obj(
        5, [base, side["sha"]], T0 + timedelta(minutes=50), "Merge pull request #7 from ada/side"
    )
    bare.commits[:0] = [merge, side]
    trunk = trunk_at(bare.url)
    snap = GitHubSource(trunk, TOKEN, window=10).poll({}, T0 + timedelta(hours=2))
    assert [c.commit.sha for c in snap.commits] == [sha_of(5)] + [sha_of(n) for n in range(4, -1, -1)]


def test_commit_without_github_account_or_pr_number(gh: GitHubServer) -> None:
    push(gh, 30, message="Bump version\n\nNo PR here (#12) in the body", login=None, jobs=False)
    snap = source(gh).poll({}, at(100))
    head = snap.commits[0]
    assert (head.commit.title, head.commit.author, head.commit.pr) == ("Bump version", "Ada Lovelace", None)
    assert head.runs == ()


# --- retries and flakiness -------------------------------------------------------------------


def test_a_job_that_failed_then_passed_on_a_rerun_is_flaky(gh: GitHubServer) -> None:
    run = run_of(gh, 25, "pull")
    first = gh.attempts[run["id"]][1]
    first[1].update(conclusion="failure")
    rerun(gh, run, 2, [job_obj(run, 1, first[1]["name"], "success", attempt=2)])
    # Another run retried a failing job that failed again: its history is not needed.
    other = run_of(gh, 24, "lint")
    gh.attempts[other["id"]][1][1].update(conclusion="failure")
    rerun(gh, other, 2, [job_obj(other, 1, "test", "failure", attempt=2)], conclusion="failure")

    snap = source(gh).poll({}, at(60))
    requests = kinds(gh.take())

    pull = job_runs(snap)[sha_of(25)]
    retried = pull["pull / linux-jammy-py3.10-gcc11 / test (default, 1, 2, linux.2xlarge)"]
    kept = pull["pull / linux-jammy-py3.10-gcc11 / test (default, 2, 2, linux.2xlarge)"]
    assert (retried.attempt, retried.failed_before, retried.conclusion) == (2, True, "success")
    assert (kept.attempt, kept.failed_before) == (1, False)
    cells = build_cells(sha_of(25), pull.values())
    assert cells["pull / linux-jammy-py3.10-gcc11 / test (default, linux.2xlarge)"].state == CellState.FLAKY
    assert job_runs(snap)[sha_of(24)]["lint / test"].conclusion == "failure"
    assert [k for k in requests if k.startswith("attempt:")] == [f"attempt:{run['id']}:1"]


def test_earlier_attempts_are_walked_back_until_the_retried_job_is_found(gh: GitHubServer) -> None:
    run = run_of(gh, 26, "trunk")
    gh.attempts[run["id"]][1][0].update(conclusion="failure")  # build fails on attempt 1
    gh.attempts[run["id"]][1][1].update(conclusion="failure")  # test fails on attempt 1
    rerun(gh, run, 2, [job_obj(run, 1, "test", "success", attempt=2)])  # test passes on 2
    rerun(gh, run, 3, [job_obj(run, 0, "build", "success", attempt=3)])  # build passes on 3
    snap = source(gh).poll({}, at(60))
    trunk = job_runs(snap)[sha_of(26)]
    assert (trunk["trunk / build"].attempt, trunk["trunk / build"].failed_before) == (3, True)
    assert (trunk["trunk / test"].attempt, trunk["trunk / test"].failed_before) == (2, True)
    assert [k for k in kinds(gh.take()) if k.startswith("attempt:")] == [
        f"attempt:{run['id']}:2",
        f"attempt:{run['id']}:1",
    ]


def test_a_job_rerun_after_passing_is_not_flaky(gh: GitHubServer) -> None:
    run = run_of(gh, 26, "docs")
    rerun(
        gh, run, 2, [job_obj(run, i, name, "success", attempt=2) for i, name in enumerate(["build", "test"])]
    )
    snap = source(gh).poll({}, at(60))
    docs = [r for name, r in job_runs(snap)[sha_of(26)].items() if name.startswith("docs / ")]
    assert len(docs) == 3  # build, test and (workflow)
    assert all(r.attempt == 2 and not r.failed_before for r in docs)


# --- rate limits ---------------------------------------------------------------------------


def test_primary_rate_limit_403_stops_waits_for_reset_and_catches_up(gh: GitHubServer) -> None:
    src = source(gh)
    gh.remaining = 0
    gh.reset = at(90)
    snap = src.poll({"earlier": "state"}, at(60))

    assert kinds(gh.take()) == ["commits"]
    assert snap.commits == []
    assert snap.state == {"earlier": "state", "not_before": format_time(at(90))}
    assert src.rate_limited is not None and src.rate_limited.kind == "rate_limited"
    assert "API rate limit exceeded" in str(src.rate_limited)

    held = src.poll(roundtrip(snap.state), at(89))
    assert (gh.take(), held.commits, held.http_requests, held.state) == ([], [], 0, snap.state)
    assert src.rate_limited is not None

    gh.remaining = 5000
    resumed = src.poll(roundtrip(held.state), at(90))
    assert "not_before" not in resumed.state
    assert src.rate_limited is None
    assert len(job_runs(resumed)) == WINDOW


def test_last_request_of_the_window_is_used_then_the_poll_stops(gh: GitHubServer) -> None:
    src = source(gh)
    gh.remaining = 5  # commits, 2 run pages, 2 jobs: the 5th answer says 0 remaining
    gh.reset = at(75)
    snap = src.poll({}, at(60))

    assert len(gh.take()) == 5
    assert snap.http_requests == 5
    assert snap.state["not_before"] == format_time(at(75))
    assert sum(len(c.runs) for c in snap.commits) > 0
    delivered = [r for page in snap.state["runs"] for rs in page["runs"].values() for r in rs if r[4]]
    assert len(delivered) == 2


def test_secondary_rate_limit_429_mid_jobs_keeps_what_was_read_and_resumes(gh: GitHubServer) -> None:
    expected = job_runs(source(gh).poll({}, at(60)))
    gh.take()

    src = source(gh)
    gh.budget = 3 + 40  # listings and 40 runs' jobs, then a secondary limit
    gh.limit_answer = (
        429,
        {"Retry-After": "120", "Content-Type": "application/json; charset=utf-8"},
        {
            "message": "You have exceeded a secondary rate limit. Please wait a few minutes "
            "before you try again.",
            "documentation_url": "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api",
        },
    )
    partial = src.poll({}, at(60))
    assert len(gh.take()) == 3 + 41  # the limited request, then none
    assert partial.state["not_before"] == format_time(at(62))
    assert sum(len(c.runs) for c in partial.commits) == sum(
        len(gh.attempts[r["id"]][1]) + 1 for r in gh.runs[:40]
    )
    assert src.rate_limited is not None and src.rate_limited.retry_after_s == 120

    assert src.poll(roundtrip(partial.state), at(61)).http_requests == 0
    gh.budget = None
    rest = src.poll(roundtrip(partial.state), at(62))
    requests = kinds(gh.take())
    assert requests[:3] == ["commits", "runs:1", "runs:2"]
    assert len(requests) == 3 + WINDOW * len(WORKFLOWS) - 40

    combined: dict[str, dict[str, Any]] = {}
    for snap in (partial, rest):
        for sha, runs in job_runs(snap).items():
            combined.setdefault(sha, {}).update(runs)
    assert combined == expected
    assert src.poll(roundtrip(rest.state), at(63)).state == rest.state


def test_secondary_rate_limit_403_without_headers_waits_a_minute(gh: GitHubServer) -> None:
    gh.budget = 1
    gh.limit_answer = (403, {}, {"message": "You have exceeded a secondary rate limit."})
    src = source(gh)
    snap = src.poll({}, at(60))
    assert snap.commits == [] and snap.state == {"not_before": format_time(at(61))}


def test_forbidden_without_rate_limit_is_an_auth_error(gh: GitHubServer) -> None:
    gh.broken[f"/repos/{REPO}/commits"] = (
        403,
        {"Content-Type": "application/json", "X-RateLimit-Remaining": "4999"},
        b'{"message": "Resource not accessible by personal access token"}',
    )
    with pytest.raises(SourceError) as err:
        source(gh).poll({}, at(60))
    assert err.value.kind == "auth"
    assert f"/repos/{REPO}/commits" in str(err.value)
    assert "Resource not accessible" in str(err.value)


# --- errors --------------------------------------------------------------------------------


@pytest.fixture
def steady_state(gh: GitHubServer) -> dict[str, Any]:
    state = source(gh).poll({}, at(60)).state
    push(gh, 30)  # something to fetch next time
    gh.take()
    return roundtrip(state)


def _fails(gh: GitHubServer, state: dict[str, Any], kind: str, timeout_s: float = 5.0) -> str:
    before = copy.deepcopy(state)
    with pytest.raises(SourceError) as err:
        source(gh, timeout_s=timeout_s).poll(state, at(70))
    assert err.value.kind == kind
    assert state == before  # the caller keeps (and the source did not touch) the old state
    assert TOKEN not in str(err.value)
    return str(err.value)


def test_server_error_on_the_runs_listing(gh: GitHubServer, steady_state: dict[str, Any]) -> None:
    gh.broken[f"/repos/{REPO}/actions/runs"] = (502, {}, b"<html>Bad gateway</html>")
    message = _fails(gh, steady_state, "http_5xx")
    assert message.startswith(f"GET /repos/{REPO}/actions/runs?branch=main&event=push")
    assert "HTTP 502" in message


def test_server_error_on_one_runs_jobs_fails_the_whole_poll(
    gh: GitHubServer, steady_state: dict[str, Any]
) -> None:
    run = gh.runs[3]
    gh.broken[f"/repos/{REPO}/actions/runs/{run['id']}/jobs"] = (
        500,
        {"Content-Type": "application/json"},
        b'{"message": "Server Error"}',
    )
    message = _fails(gh, steady_state, "http_5xx")
    assert f"/actions/runs/{run['id']}/jobs" in message and "Server Error" in message


def test_timeout(gh: GitHubServer, steady_state: dict[str, Any]) -> None:
    gh.delay_s = 1.0  # every answer after the source's 0.2 s
    message = _fails(gh, steady_state, "timeout", timeout_s=0.2)
    assert f"/repos/{REPO}/commits" in message


def test_malformed_json(gh: GitHubServer, steady_state: dict[str, Any]) -> None:
    gh.broken[f"/repos/{REPO}/commits"] = (200, {"Content-Type": "application/json"}, b'[{"sha": "abc", ')
    message = _fails(gh, steady_state, "malformed")
    assert message.startswith(
        f"GET /repos/{REPO}/commits?sha=main&per_page={WINDOW}: response is not valid JSON"
    )


def test_truncated_gzip_body(gh: GitHubServer, steady_state: dict[str, Any]) -> None:
    body = gzip.compress(json.dumps({"total_count": 0, "workflow_runs": []}).encode())
    gh.broken[f"/repos/{REPO}/actions/runs"] = (200, {"Content-Encoding": "gzip"}, body[:-12])
    message = _fails(gh, steady_state, "malformed")
    assert f"/repos/{REPO}/actions/runs" in message and "gzip" in message


def test_run_without_head_sha(gh: GitHubServer, steady_state: dict[str, Any]) -> None:
    del gh.runs[0]["head_sha"]
    message = _fails(gh, steady_state, "malformed")
    assert f"/repos/{REPO}/actions/runs" in message
    assert "workflow_runs.0.head_sha: Field required" in message


def test_job_with_a_mistyped_field(gh: GitHubServer, steady_state: dict[str, Any]) -> None:
    run = gh.runs[0]
    gh.attempts[run["id"]][1][0]["status"] = None
    message = _fails(gh, steady_state, "malformed")
    assert f"/actions/runs/{run['id']}/jobs" in message and "jobs.0.status" in message


def test_commit_without_committer_date(gh: GitHubServer, steady_state: dict[str, Any]) -> None:
    del gh.commits[0]["commit"]["committer"]["date"]
    assert "0.commit.committer.date: Field required" in _fails(gh, steady_state, "malformed")


def test_unknown_branch_is_an_http_4xx_error(gh: GitHubServer) -> None:
    gh.broken[f"/repos/{REPO}/commits"] = (
        404,
        {"Content-Type": "application/json"},
        b'{"message": "No commit found for SHA: main", "status": "404"}',
    )
    assert "No commit found for SHA: main" in _fails(gh, {}, "http_4xx")


def test_a_next_link_off_the_api_host_is_not_followed(gh: GitHubServer, steady_state: dict[str, Any]) -> None:
    page = json.dumps({"total_count": 1000, "workflow_runs": gh.runs[:100]}).encode()
    gh.broken[f"/repos/{REPO}/actions/runs"] = (
        200,
        {"Link": '<https://elsewhere.example/repos/x/actions/runs?page=2>; rel="next"'},
        page,
    )
    message = _fails(gh, steady_state, "malformed")
    assert "Link rel=next points outside" in message
    assert kinds(gh.take()) == ["commits", "runs:1"]


def test_the_token_stays_out_of_state_and_repr(gh: GitHubServer) -> None:
    src = source(gh)
    snap = src.poll({}, at(60))
    assert TOKEN not in json.dumps(snap.state)
    assert TOKEN not in repr(src)


def test_window_outside_one_page_is_rejected() -> None:
    trunk = trunk_at(None)
    with pytest.raises(ValueError, match=r"window must be 1\.\.100"):
        GitHubSource(trunk, None, window=101)


# --- runs that never started, nameless runs ----------------------------------------------------


def test_a_run_that_failed_to_start_is_a_failing_workflow_cell(gh: GitHubServer) -> None:
    # GitHub's shape for a workflow file it cannot run: named by its path, no job at all.
    broken = {n: run_of(gh, n, "trunk") for n in (27, 28, 29)}
    for run in broken.values():
        run.update(
            name=".github/workflows/trunk.yml",
            display_title=".github/workflows/trunk.yml",
            status="completed",
            conclusion="startup_failure",
            run_started_at=run["created_at"],
            updated_at=run["created_at"],
        )
        gh.attempts[run["id"]] = {1: []}
    snap = source(gh).poll({}, at(60))
    requests = kinds(gh.take())

    runs = job_runs(snap)
    for n in (27, 28, 29):
        trunk = {name: r for name, r in runs[sha_of(n)].items() if name.startswith("trunk")}
        assert list(trunk) == ["trunk / (workflow)"]  # keyed by the name, not the path
        assert trunk["trunk / (workflow)"].conclusion == "startup_failure"
        cells = build_cells(sha_of(n), runs[sha_of(n)].values())
        assert cells["trunk / (workflow)"].state == CellState.FAIL
        assert cells["trunk / (workflow)"].url.endswith(f"/{REPO}/actions/runs/{broken[n]['id']}")
        assert f"jobs:{broken[n]['id']}" not in requests  # it has no job to read
    # The runs before it started their jobs: a passing (workflow) cell, so the alert resolves.
    assert build_cells(sha_of(26), runs[sha_of(26)].values())["trunk / (workflow)"].state == CellState.PASS
    assert not any(k.startswith("workflow:") for k in requests)  # other runs carried the name


def test_a_failed_run_without_jobs_is_a_failing_workflow_cell(gh: GitHubServer) -> None:
    run = run_of(gh, 29, "lint")
    run.update(conclusion="failure")
    gh.attempts[run["id"]] = {1: []}
    snap = source(gh).poll({}, at(60))
    assert f"jobs:{run['id']}" in kinds(gh.take())
    lint = {name: r.conclusion for name, r in job_runs(snap)[sha_of(29)].items() if name.startswith("lint")}
    assert lint == {"lint / (workflow)": "failure"}


def test_a_run_still_queued_without_jobs_has_no_workflow_cell(gh: GitHubServer) -> None:
    run = run_of(gh, 29, "lint")
    run.update(status="queued", conclusion=None)
    gh.attempts[run["id"]] = {1: []}
    snap = source(gh).poll({}, at(60))
    assert not any(name.startswith("lint") for name in job_runs(snap)[sha_of(29)])


def test_nameless_runs_take_the_workflows_name_read_once(gh: GitHubServer) -> None:
    for run in gh.runs:
        if run["name"] == "lint":
            run["name"] = None
    src = source(gh)
    snap = src.poll({}, at(60))
    requests = kinds(gh.take())
    assert requests.count(f"workflow:{workflow_id('lint')}") == 1
    assert {"lint / build", "lint / test", "lint / (workflow)"} <= set(job_runs(snap)[sha_of(29)])
    assert snap.state["workflows"] == {str(workflow_id("lint")): "lint"}

    # A new commit's nameless run: the name comes from the state, no request.
    push(gh, 30)
    for run in gh.runs:
        if run["name"] == "lint":
            run["name"] = ""
    again = src.poll(roundtrip(snap.state), at(70))
    assert not any(k.startswith("workflow:") for k in kinds(gh.take()))
    assert "lint / build" in job_runs(again)[sha_of(30)]


@pytest.mark.parametrize("answer", ["path", "404"])
def test_nameless_runs_of_a_workflow_without_a_name_use_the_file_name(gh: GitHubServer, answer: str) -> None:
    for run in gh.runs:
        if run["name"] == "lint":
            run["name"] = run["path"]
    if answer == "path":
        gh.workflows[workflow_id("lint")]["name"] = ".github/workflows/lint.yml"
    else:
        gh.broken[f"/repos/{REPO}/actions/workflows/{workflow_id('lint')}"] = (
            404,
            {"Content-Type": "application/json"},
            b'{"message": "Not Found", "documentation_url": "https://docs.github.com/rest"}',
        )
    snap = source(gh).poll({}, at(60))
    assert {"lint / build", "lint / test"} <= set(job_runs(snap)[sha_of(29)])
