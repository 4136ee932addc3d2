"""GitHub webhook deliveries (`push`, `workflow_run`, `workflow_job`) as the facts ingest stores.

Pure functions over the decoded payloads; nothing here reads the table. A delivery becomes:

- `push` to the trunk: the commits it places, oldest first, and `before`, the first one's
  parent (how a push delivered ahead of its parent's push keeps branch order:
  `app/ledger.py`). GitHub lists a push's commits (at most 20) oldest first; a merge push
  also lists the merged branch's commits, which were pushed before and so are not
  `distinct`: only distinct ones are placed. A forced push places only its head (what it
  rewrote is not first-parent history the push can describe; its parent is not told); the
  poll fixes what a push cannot know.
- `workflow_run`: the run, and whether it is one of the trunk's (`RunReport.of_trunk`: a
  push to the trunk's branch in the trunk's own repository, what the poll reads; a fork's
  pull request from a branch named like the trunk, a scheduled or dispatched run on a trunk
  commit are not); for a trunk run its head commit (placed if no push delivery did), and
  for a run that ended without starting any job (`startup_failure`, which sends no
  `workflow_job`) the failing shard of `<workflow> / (workflow)`, as the GitHub source
  names it.
- `workflow_job`: one shard report (one job, one attempt), a result (`completed`) or the
  sign that the job runs (`queued`, `waiting`: pending, as the poll records a job still
  running). `workflow_job` has no `event` field: whether it is a trunk result is known from
  its run (`run_id`), which the caller looks up.

`in_progress` deliveries are dropped before any table access: the job's `queued` delivery
already said it runs, and a result comes with `completed`. A shard's reports merge like the
poll's runs: the latest attempt decides, a success after a failed attempt is flaky; the
shards of a job are those reported (a shard that never reports did not run).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from trunkwatch.domain.cells import WORKFLOW_JOB, Commit, name_from_path
from trunkwatch.domain.clock import parse_time
from trunkwatch.domain.shards import ShardReport

EVENTS = frozenset({"push", "workflow_run", "workflow_job"})
_PR_SUFFIX = re.compile(r"\(#(\d+)\)\s*$")
MAX_TITLE_CHARS = 300
_FAILED_TO_START = "startup_failure"


class PayloadError(ValueError):
    """A delivery whose payload lacks a field ingest needs (answered 400, nothing written)."""


@dataclass(frozen=True)
class PushReport:
    branch: str
    commits: tuple[Commit, ...]  # oldest first, each the first parent of the next
    # The first one's first parent (`before`): None for a forced push, a new branch or a
    # push that lists no commit, whose head's parent the push does not say.
    parent: str | None = None


@dataclass(frozen=True)
class RunReport:
    run_id: int
    branch: str | None
    event: str
    head_repository: str  # `owner/name` the run's commit was pushed to (a fork's, for its PRs)
    commit: Commit
    # The `(workflow)` shard: a failure for a run that never started a job, else None (a
    # run that starts jobs reports its `(workflow)` pass with its first job).
    shard: ShardReport | None

    def of_trunk(self, repo: str, branch: str) -> bool:
        """Whether the run is a trunk run: a push to `branch` of `repo` itself (what the
        GitHub poll lists, `event=push` on the branch)."""
        return self.event == "push" and self.branch == branch and self.head_repository.lower() == repo.lower()


def repository(payload: dict[str, Any]) -> str:
    """`owner/name` of the delivery's repository ("" if the payload has none)."""
    repo = payload.get("repository")
    name = repo.get("full_name") if isinstance(repo, dict) else None
    return name if isinstance(name, str) else ""


def branch_of(event: str, payload: dict[str, Any]) -> str | None:
    """The branch a delivery is about, read without building anything (the cheap filter
    before any table access); None when the payload does not say (a job's `head_branch`
    is nullable)."""
    if event == "push":
        ref = payload.get("ref")
        heads = "refs/heads/"
        return ref.removeprefix(heads) if isinstance(ref, str) and ref.startswith(heads) else ""
    body = payload.get(event)
    branch = body.get("head_branch") if isinstance(body, dict) else None
    return branch if isinstance(branch, str) else None


def push(payload: dict[str, Any], repo_url: str) -> PushReport:
    ref = _text(payload, "ref")
    forced = bool(payload.get("forced"))
    listed = payload.get("commits")
    if not isinstance(listed, list):
        raise PayloadError("push: 'commits' must be a list")
    head = payload.get("head_commit")
    before = payload.get("before")
    parent = before if isinstance(before, str) and before.strip("0") else None
    if forced or not listed:
        chosen, parent = [head] if isinstance(head, dict) else [], None
    else:
        chosen = [c for c in listed if isinstance(c, dict) and c.get("distinct", True)]
    commits = tuple(_commit(c, repo_url) for c in chosen)
    return PushReport(ref.removeprefix("refs/heads/"), commits, parent if commits else None)


def workflow_run(payload: dict[str, Any], repo_url: str) -> RunReport:
    run = _object(payload, "workflow_run")
    head = _object(run, "head_commit")
    # Its head commit names the git author, not the GitHub login a push and the poll name:
    # left unknown until one of them says.
    commit = replace(_commit(head, repo_url), author="")
    shard = None
    if run.get("status") == "completed" and run.get("conclusion") == _FAILED_TO_START:
        shard = ShardReport(
            sha=commit.sha,
            name=f"{_workflow_name(run)} / {WORKFLOW_JOB}",
            run_id=_integer(run, "id"),
            attempt=_integer(run, "run_attempt", 1),
            completed=True,
            conclusion=_FAILED_TO_START,
            url=str(run.get("html_url") or ""),
        )
    branch = run.get("head_branch")
    head_repository = run.get("head_repository")
    pushed_to = head_repository.get("full_name") if isinstance(head_repository, dict) else None
    return RunReport(
        run_id=_integer(run, "id"),
        branch=branch if isinstance(branch, str) else None,
        event=str(run.get("event") or ""),
        head_repository=pushed_to if isinstance(pushed_to, str) else repository(payload),
        commit=commit,
        shard=shard,
    )


def workflow_job(payload: dict[str, Any]) -> list[ShardReport]:
    """The job's shard (pending while queued or waiting), and once the job has completed,
    its run's `(workflow)` pass (a run that starts jobs passes that job, as in the GitHub
    source). [] for a job without a workflow name (nothing to key it by; the poll records
    it)."""
    job = _object(payload, "workflow_job")
    workflow = job.get("workflow_name")
    if not isinstance(workflow, str) or not workflow.strip():
        return []
    status = _text(job, "status")
    completed = status == "completed"
    shard = ShardReport(
        sha=_text(job, "head_sha"),
        name=f"{workflow} / {_text(job, 'name')}",
        run_id=_integer(job, "run_id"),
        attempt=_integer(job, "run_attempt", 1),
        completed=completed,
        conclusion=str(job.get("conclusion") or "") if completed else status,
        url=str(job.get("html_url") or ""),
    )
    if not completed:
        return [shard]
    started = ShardReport(
        sha=shard.sha,
        name=f"{workflow} / {WORKFLOW_JOB}",
        run_id=shard.run_id,
        attempt=shard.attempt,
        completed=True,
        conclusion="success",
        url=_run_url(str(job.get("html_url") or ""), shard.run_id),
    )
    return [shard, started]


# A job's statuses that are stored: its result, or that it is waiting to run (pending).
STORED_JOB_STATUSES = frozenset({"completed", "queued", "waiting"})


def stored(event: str, payload: dict[str, Any]) -> bool:
    """False for a job delivery that tells nothing new (`in_progress`: its `queued`
    delivery said the job runs), dropped before the table."""
    if event != "workflow_job":
        return True
    job = payload.get("workflow_job")
    return isinstance(job, dict) and job.get("status") in STORED_JOB_STATUSES


def _workflow_name(run: dict[str, Any]) -> str:
    """The run's workflow name; a run that failed to start is named by its file's path,
    which the GitHub source turns into the file's name too."""
    name = str(run.get("name") or "").strip()
    path = str(run.get("path") or "")
    return name if name and name != path else name_from_path(path)


def _run_url(job_url: str, run_id: int) -> str:
    """`https://github.com/o/r/actions/runs/<run>/job/<id>` or `.../runs/<job id>` -> the run's page."""
    base, found, _ = job_url.partition("/actions/runs/")
    if not found:
        base, found, _ = job_url.partition("/runs/")
    return f"{base}/actions/runs/{run_id}" if found else ""


def _commit(data: dict[str, Any], repo_url: str) -> Commit:
    sha = _text(data, "id")
    title = str(data.get("message") or "").split("\n", 1)[0].strip()[:MAX_TITLE_CHARS]
    found = data.get("author")
    author: dict[str, Any] = found if isinstance(found, dict) else {}
    pr = _PR_SUFFIX.search(title)
    try:
        time: datetime = parse_time(_text(data, "timestamp"))
    except ValueError:
        raise PayloadError(f"commit {sha}: 'timestamp' is not an RFC 3339 time") from None
    return Commit(
        sha=sha,
        time=time,
        title=title,
        author=str(author.get("username") or author.get("name") or ""),
        pr=int(pr.group(1)) if pr else None,
        url=str(data.get("url") or f"{repo_url}/commit/{sha}"),
    )


def _object(data: dict[str, Any], key: str) -> dict[str, Any]:
    value = data.get(key)
    if not isinstance(value, dict):
        raise PayloadError(f"'{key}' must be an object")
    return value


def _text(data: dict[str, Any], key: str) -> str:
    value = data.get(key)
    if not isinstance(value, str) or not value:
        raise PayloadError(f"'{key}' must be a non-empty string")
    return value


def _integer(data: dict[str, Any], key: str, default: int | None = None) -> int:
    value = data.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise PayloadError(f"'{key}' must be an integer")
    return value
