"""GitHub webhook deliveries for tests: the recorded payloads (tests/fixtures/webhooks/) with
the repository, branch, commit, job and outcome a test needs, signed like GitHub signs them."""

from __future__ import annotations

import copy
import hashlib
import hmac
import json
from functools import cache
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).parent / "fixtures" / "webhooks"
REPO = "pytorch/pytorch"
BRANCH = "main"


@cache
def _fixture(name: str) -> dict[str, Any]:
    return json.loads((FIXTURES / f"{name}.json").read_text())


def _repository(payload: dict[str, Any], repo: str) -> None:
    payload["repository"]["full_name"] = repo
    payload["repository"]["name"] = repo.split("/", 1)[1]


def workflow_job(
    sha: str,
    name: str,
    workflow: str = "pull",
    conclusion: str | None = "success",
    status: str = "completed",
    attempt: int = 1,
    run_id: int = 7001,
    job_id: int = 9001,
    branch: str | None = BRANCH,
    repo: str = REPO,
) -> dict[str, Any]:
    payload = copy.deepcopy(_fixture(f"workflow_job.{status if status != 'waiting' else 'queued'}"))
    _repository(payload, repo)
    payload["action"] = status
    job = payload["workflow_job"]
    job.update(
        id=job_id,
        run_id=run_id,
        run_attempt=attempt,
        head_sha=sha,
        head_branch=branch,
        name=name,
        workflow_name=workflow,
        status=status,
        conclusion=conclusion if status == "completed" else None,
        html_url=f"https://github.com/{repo}/actions/runs/{run_id}/job/{job_id}",
    )
    return payload


def workflow_run(
    sha: str,
    workflow: str = "pull",
    conclusion: str | None = "success",
    status: str = "completed",
    event: str = "push",
    attempt: int = 1,
    run_id: int = 7001,
    branch: str = BRANCH,
    repo: str = REPO,
    title: str = "A commit (#123)",
) -> dict[str, Any]:
    payload = copy.deepcopy(_fixture(f"workflow_run.{'completed' if status == 'completed' else 'requested'}"))
    _repository(payload, repo)
    payload["action"] = "completed" if status == "completed" else "requested"
    run = payload["workflow_run"]
    run.update(
        id=run_id,
        name=workflow,
        run_attempt=attempt,
        head_sha=sha,
        head_branch=branch,
        event=event,
        status=status,
        conclusion=conclusion if status == "completed" else None,
        html_url=f"https://github.com/{repo}/actions/runs/{run_id}",
    )
    run["head_commit"].update(id=sha, message=f"{title}\n\nbody")
    return payload


def push(
    shas: list[str],
    times: list[str] | None = None,
    branch: str = BRANCH,
    repo: str = REPO,
    forced: bool = False,
    before: str = "0" * 40,
) -> dict[str, Any]:
    """A push of `shas` (oldest first), shaped as GitHub documents the `push` event."""
    times = times or [f"2026-11-18T15:{i:02d}:00Z" for i in range(len(shas))]
    commits = [
        {
            "id": sha,
            "tree_id": "f" * 40,
            "distinct": True,
            "message": f"Commit {sha[:7]} (#{100 + i})",
            "timestamp": time,
            "url": f"https://github.com/{repo}/commit/{sha}",
            "author": {"name": "A Author", "email": "a@example.invalid", "username": "author"},
            "committer": {"name": "GitHub", "email": "noreply@github.com", "username": "web-flow"},
            "added": [],
            "removed": [],
            "modified": ["README.md"],
        }
        for i, (sha, time) in enumerate(zip(shas, times, strict=True))
    ]
    return {
        "ref": f"refs/heads/{branch}",
        "before": before,
        "after": shas[-1],
        "created": False,
        "deleted": False,
        "forced": forced,
        "base_ref": None,
        "compare": f"https://github.com/{repo}/compare/{before[:12]}...{shas[-1][:12]}",
        "commits": commits,
        "head_commit": commits[-1],
        "repository": {
            "full_name": repo,
            "name": repo.split("/", 1)[1],
            "html_url": f"https://github.com/{repo}",
        },
        "pusher": {"name": "author", "email": "a@example.invalid"},
        "sender": {"login": "author", "id": 1, "type": "User"},
    }


def sign(body: bytes, secret: str) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
