"""A synthetic trunk (`scenario.Trunk`) as GitHub's objects, served by the GitHub stand-in
(`trunkwatch_local.github_server`) as they are at a moment (`serve_at`).

One push run per workflow and commit (newest first), with its jobs: a job column
`<workflow> / <rest>` is job `<rest>` of that workflow's run. A flaky cell is a job that
failed on attempt 1 and passed on a re-run (attempt 2); a job still running is
`in_progress` in a run that is `in_progress`.
"""

from __future__ import annotations

import hashlib
from datetime import datetime, timedelta
from typing import Any

from trunkwatch.domain.clock import format_time
from trunkwatch_local.github_server import GitHubServer
from trunkwatch_local.scenario import Trunk

RUN_ID_BASE = 11_000_000_000
LIMIT = 15_000  # the rate limit the stand-in starts with: far more than a benchmark asks


def serve_at(server: GitHubServer, trunk: Trunk, now: datetime) -> None:
    """Serve the trunk as it is at `now`: landed commits, their runs and jobs."""
    workflows = sorted({job.split(" / ", 1)[0] for job in trunk.jobs})
    landed = int((now - trunk.start) / trunk.commit_every) + 1 if now >= trunk.start else 0
    commits: list[dict[str, Any]] = []
    runs: list[tuple[dict[str, Any], dict[int, list[dict[str, Any]]]]] = []
    for index in range(landed - 1, -1, -1):
        at = trunk.start + index * trunk.commit_every
        commits.append(_commit(server.repo, trunk, index, at))
        done = now >= at + trunk.job_duration
        runs += [
            _run(server.repo, trunk, index, at, done, w, workflow) for w, workflow in enumerate(workflows)
        ]
    runs.sort(key=lambda r: r[0]["created_at"], reverse=True)
    with server.lock:
        server.commits = commits
        server.runs = [run for run, _ in runs]
        server.attempts = {run["id"]: attempts for run, attempts in runs}


def _commit(repo: str, trunk: Trunk, index: int, at: datetime) -> dict[str, Any]:
    sha = trunk.sha(index)
    parent = trunk.sha(index - 1)
    author = {
        "name": f"Developer {index % 4}",
        "email": f"dev{index % 4}@example.com",
        "date": format_time(at),
    }
    return {
        "sha": sha,
        "node_id": f"C_{sha[:20]}",
        "url": f"https://api.github.com/repos/{repo}/commits/{sha}",
        "html_url": f"https://github.com/{repo}/commit/{sha}",
        "commit": {
            "message": f"[bench] change number {index} (#{160000 + index})\n\nSummary of the change.",
            "author": author,
            "committer": {**author, "name": "pytorchmergebot"},
            "tree": {"sha": hashlib.sha1(sha.encode()).hexdigest()},  # noqa: S324 - an id
            "comment_count": 0,
        },
        "author": {"login": f"dev{index % 4}", "id": 1000 + index % 4, "type": "User"},
        "committer": {"login": "pytorchmergebot", "id": 97764156, "type": "User"},
        "parents": [{"sha": parent, "url": f"https://api.github.com/repos/{repo}/commits/{parent}"}],
    }


def _run(
    repo: str, trunk: Trunk, index: int, at: datetime, done: bool, w: int, workflow: str
) -> tuple[dict[str, Any], dict[int, list[dict[str, Any]]]]:
    """A workflow run, and the jobs of each of its attempts (a re-run holds only its jobs)."""
    run_id = RUN_ID_BASE + index * 100 + w
    created = at + timedelta(minutes=1, seconds=w)

    def job_json(i: int, attempt: int, name: str, conclusion: str | None) -> dict[str, Any]:
        job_id = (run_id * 2 + attempt - 1) * 1000 + i
        started = created + timedelta(minutes=2)
        return {
            "id": job_id,
            "run_id": run_id,
            "run_attempt": attempt,
            "node_id": f"CR_{job_id}",
            "head_branch": "main",
            "url": f"https://api.github.com/repos/{repo}/actions/jobs/{job_id}",
            "html_url": f"https://github.com/{repo}/actions/runs/{run_id}/job/{job_id}",
            "status": "completed" if conclusion else "in_progress",
            "conclusion": conclusion,
            "created_at": format_time(created),
            "started_at": format_time(started),
            "completed_at": format_time(started + trunk.job_duration) if conclusion else None,
            "name": name,
            "steps": [
                {"name": step, "status": "completed", "conclusion": "success", "number": n}
                for n, step in enumerate(("Set up job", "Checkout", "Build", "Test", "Complete job"), start=1)
            ],
            "labels": [name.rsplit(", ", 1)[-1].rstrip(")")],
            "runner_name": f"i-{job_id % 100000:05d}",
            "runner_group_name": "Default",
        }

    first: list[dict[str, Any]] = []
    rerun: list[dict[str, Any]] = []
    columns = [job for job in trunk.jobs if job.split(" / ", 1)[0] == workflow]
    for i, column in enumerate(columns):
        name = column.split(" / ", 1)[1]
        outcome = trunk.outcome(column, index) if done else None
        if outcome == "flaky":
            first.append(job_json(i, 1, name, "failure"))
            rerun.append(job_json(i, 2, name, "success"))
        else:
            first.append(job_json(i, 1, name, outcome))
    attempt = 2 if rerun else 1
    failed = any(job["conclusion"] == "failure" for job in first + rerun if job["run_attempt"] == attempt)
    finished = created + trunk.job_duration + timedelta(minutes=10 * (attempt - 1))
    run = {
        "id": run_id,
        "name": workflow,
        "node_id": f"WFR_{run_id}",
        "head_branch": "main",
        "head_sha": trunk.sha(index),
        "path": f".github/workflows/{workflow}.yml",
        "display_title": f"[bench] change number {index}",
        "run_number": 90000 + index,
        "event": "push",
        "status": "completed" if done else "in_progress",
        "conclusion": ("failure" if failed else "success") if done else None,
        "workflow_id": 1_000_000 + w,
        "url": f"https://api.github.com/repos/{repo}/actions/runs/{run_id}",
        "html_url": f"https://github.com/{repo}/actions/runs/{run_id}",
        "created_at": format_time(created),
        "updated_at": format_time(finished if done else created),
        "run_attempt": attempt,
        "run_started_at": format_time(created),
        "jobs_url": f"https://api.github.com/repos/{repo}/actions/runs/{run_id}/jobs",
        "logs_url": f"https://api.github.com/repos/{repo}/actions/runs/{run_id}/logs",
        "head_commit": {"id": trunk.sha(index), "message": f"[bench] change number {index}"},
        "repository": {"full_name": repo},
    }
    return run, {1: first, 2: rerun} if rerun else {1: first}
