"""GitHub webhook deliveries for tests: the recorded payloads (tests/fixtures/webhooks/) with
the repository, branch, commit, job and outcome a test needs, signed like GitHub signs them."""

from __future__ import annotations

import copy
import hashlib
import hmac
import json
import random
from functools import cache
from typing import Any

from tests.support.paths import TESTS

FIXTURES = TESTS / "fixtures" / "webhooks"
REPO = "pytorch/pytorch"
BRANCH = "main"


@cache
def _fixture(name: str) -> dict[str, Any]:
    return json.loads((FIXTURES / f"{name}.json").read_text())


def _repository(payload: dict[str, Any], repo: str) -> None:
    payload["repository"]["full_name"] = repo
    payload["repository"]["name"] = repo.split("/", 1)[1]


def run_id_of(sha: str, workflow: str) -> int:
    """The id of `workflow`'s push run on commit `sha` (one run per commit and workflow)."""
    return int(hashlib.sha1(f"{sha}:{workflow}".encode(), usedforsecurity=False).hexdigest()[:8], 16)


def workflow_job(
    sha: str,
    name: str,
    workflow: str = "pull",
    conclusion: str | None = "success",
    status: str = "completed",
    attempt: int = 1,
    run_id: int | None = None,
    job_id: int = 9001,
    branch: str | None = BRANCH,
    repo: str = REPO,
    url: str | None = None,
) -> dict[str, Any]:
    payload = copy.deepcopy(_fixture(f"workflow_job.{status if status != 'waiting' else 'queued'}"))
    _repository(payload, repo)
    payload["action"] = status
    job = payload["workflow_job"]
    run_id = run_id_of(sha, workflow) if run_id is None else run_id
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
        html_url=url or f"https://github.com/{repo}/actions/runs/{run_id}/job/{job_id}",
    )
    return payload


def workflow_run(
    sha: str,
    workflow: str = "pull",
    conclusion: str | None = "success",
    status: str = "completed",
    event: str = "push",
    attempt: int = 1,
    run_id: int | None = None,
    branch: str = BRANCH,
    repo: str = REPO,
    title: str = "A commit (#123)",
    head_repo: str | None = None,
) -> dict[str, Any]:
    """A `workflow_run` delivery; `head_repo` is where its commit was pushed (a fork's, for a
    pull request from one), `repo` by default."""
    payload = copy.deepcopy(_fixture(f"workflow_run.{'completed' if status == 'completed' else 'requested'}"))
    _repository(payload, repo)
    payload["action"] = "completed" if status == "completed" else "requested"
    run = payload["workflow_run"]
    run["head_repository"]["full_name"] = head_repo or repo
    run["head_repository"]["name"] = (head_repo or repo).split("/", 1)[1]
    run.update(
        id=run_id_of(sha, workflow) if run_id is None else run_id,
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


def as_github_knows_it(lines: list[str]) -> list[str]:
    """A HUD-fed replay file with only what GitHub says about the history: no failure lines
    (neither GitHub's API nor its deliveries carry log lines; the HUD extracts them), and a
    merged pull request's number at the end of its commit's title, as in the commit message."""
    out = [lines[0]]
    for line in lines[1:]:
        event = json.loads(line)
        for row in event.get("hud", {}).get("shaGrid", []):
            if row.get("prNum"):
                row["commitTitle"] = f"{row.get('commitTitle') or ''} (#{row['prNum']})"
            for cell in row["jobs"]:
                cell.pop("failureLines", None)
        out.append(json.dumps(event))
    return out


def run_of(job: dict[str, Any], event: str = "push") -> dict[str, Any]:
    """The `workflow_run` delivery (requested) of a `workflow_job` delivery's run."""
    found = job["workflow_job"]
    return workflow_run(
        found["head_sha"],
        workflow=found["workflow_name"],
        status="requested",
        event=event,
        attempt=found["run_attempt"],
        run_id=found["run_id"],
        branch=found["head_branch"] or BRANCH,
        repo=job["repository"]["full_name"],
    )


def replay_as_deliveries(lines: list[str], branch: str = BRANCH) -> list[str]:
    """A HUD-fed replay file as the webhook deliveries GitHub would have sent for the same
    history: each snapshot's new commits as one push, then each new commit's runs (one per
    workflow), each cell that changed as its job's delivery (a running job as `queued`, a
    retried-to-green cell as a failed first attempt and a passing second), then the
    schedule's tick at the same instant (the sweep runs in either case)."""
    header = json.loads(lines[0])
    out = [json.dumps(header)]
    placed: set[str] = set()
    reported: dict[tuple[str, str], tuple[str, bool]] = {}
    job_ids: dict[tuple[str, str], int] = {}
    for line in lines[1:]:
        event = json.loads(line)
        if "hud" not in event:
            out.append(line)
            continue
        at, names, grid = event["at"], event["hud"]["jobNames"], event["hud"]["shaGrid"]
        new = [row for row in reversed(grid) if row["sha"] not in placed]
        if new:
            payload = push([r["sha"] for r in new], [r["time"] for r in new], branch, header["repo"])
            for commit, row in zip(payload["commits"], new, strict=True):
                title = row.get("commitTitle") or ""
                commit["message"] = f"{title} (#{row['prNum']})" if row.get("prNum") else title
                commit["author"]["username"] = row.get("author") or ""
            out.append(json.dumps({"at": at, "webhook": {"event": "push", "payload": payload}}))
            placed.update(r["sha"] for r in new)
            workflows = sorted({name.partition(" / ")[0] for name in names})
            for row in new:
                for workflow in workflows:
                    title = row.get("commitTitle") or ""
                    run = workflow_run(
                        row["sha"], workflow, status="requested", branch=branch, repo=header["repo"]
                    )
                    run["workflow_run"]["head_commit"]["timestamp"] = row["time"]
                    run["workflow_run"]["head_commit"]["message"] = (
                        f"{title} (#{row['prNum']})" if row.get("prNum") else title
                    )
                    out.append(json.dumps({"at": at, "webhook": {"event": "workflow_run", "payload": run}}))
        for row in grid:
            for name, cell in zip(names, row["jobs"], strict=True):
                if not cell:
                    continue
                status = cell.get("status") or "completed"
                # A job still running was announced by its `queued` delivery (`in_progress`
                # adds nothing and is not stored).
                status = "completed" if status == "completed" else "queued"
                outcome = (cell.get("conclusion") if status == "completed" else status) or status
                flaky = bool(cell.get("failedPreviousRun"))
                if reported.get((row["sha"], name)) == (outcome, flaky):
                    continue
                reported[(row["sha"], name)] = (outcome, flaky)
                job_id = job_ids.setdefault((row["sha"], name), 10_000 + len(job_ids))
                workflow, _, job = name.partition(" / ")
                attempts = [("failure", 1), (outcome, 2)] if flaky else [(outcome, 1)]
                for conclusion, attempt in attempts:
                    done = status == "completed"
                    payload = workflow_job(
                        row["sha"],
                        job,
                        workflow,
                        conclusion=conclusion if done else None,
                        status="completed" if done else status,
                        attempt=attempt,
                        job_id=job_id,
                        branch=branch,
                        repo=header["repo"],
                        url=cell.get("htmlUrl"),
                    )
                    delivery = {"event": "workflow_job", "payload": payload}
                    out.append(json.dumps({"at": at, "webhook": delivery}))
        out.append(json.dumps({"at": at, "tick": True}))
    return out


def shuffled(lines: list[str], rng: random.Random, redelivered: float = 1 / 3) -> list[str]:
    """A replay file's deliveries of each instant in another order, a `redelivered` share of
    them twice (GitHub's deliveries arrive out of order; a redelivery is a new request with
    the same body); its other events stay where they are."""
    out, instant = lines[:1], list[str]()
    for line in [*lines[1:], None]:
        event = json.loads(line) if line else None
        if event is not None and "webhook" in event and event["webhook"]["event"] != "push":
            instant.append(line)  # type: ignore[arg-type]  # not None: an event
            continue
        rng.shuffle(instant)
        out += instant + [line for line in instant if rng.random() < redelivered]
        instant = []
        if line:
            out.append(line)
    return out
