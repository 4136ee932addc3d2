"""Buildkite webhook deliveries (`job.scheduled`, `job.finished`, `build.finished`) as the facts
ingest stores.

Pure functions over the decoded payloads (`{"event", "build", "pipeline", "sender"}`, a job
delivery with its `job` too); nothing here reads the table. The build, job and pipeline are
the REST API's objects, read as the `buildkite` source reads them (`sources/buildkite.py`),
so a delivery says what the poll says of the same job:

- `build.finished` (its build has no jobs): the build's commit, placed on the trunk.
- `job.finished`: the build's commit, and one shard report of the job (its attempt: the
  job's `retries_count` + 1, so a pass after a failed attempt is flaky, as the poll's retry
  chains say).
- `job.scheduled`: the same report, queued. The job is pending on the commit, as GitHub's
  `queued` and the poll's running jobs say, so a job slower than its commit's others is
  not stale while it runs (with `job.finished` alone, a commit whose job has not ended has
  no cell to keep the job in the staleness window), and a commit is placed when its build
  schedules its jobs, not when its first job ends. A retry scheduled keeps the result it
  retries (a result never goes back to pending).

Neither job event reports (the poll, the trunk's backstop, records them): a `waiter`,
`manual` or `trigger` step (no job); a parallel step's job (its step's jobs merge into one
cell, which the webhook's one-job-at-a-time shards cannot key); an agent failure
(`signal_reason`, `expired`), whose cell carries the line `agent failure: <reason>` that
only the poll's cells carry, so that no commit is ever blamed for it.

A delivery is about a trunk when its pipeline (`organizations/{org}/pipelines/{slug}` of the
pipeline's `url`) is the trunk's `pipeline` and its build is on the trunk's branch, a push
of a commit (not `source: schedule`, not `HEAD`) (`about`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, TypeVar

from trunkwatch.domain.cells import Commit
from trunkwatch.domain.shards import ShardReport
from trunkwatch.sources.buildkite import (
    GITHUB_URL,
    Build,
    Job,
    commit_of,
    commit_record,
    job_name,
    job_result,
    of_trunk,
)
from trunkwatch.sources.shape import Shape, ShapeError
from trunkwatch.sources.webhook import PayloadError

T = TypeVar("T")
EVENTS = frozenset({"job.scheduled", "job.finished", "build.finished"})
_JOB_EVENTS = frozenset({"job.scheduled", "job.finished"})
_PIPELINE = re.compile(r"/organizations/([^/]+)/pipelines/([^/?#]+)")
_BUILD: Shape[Build] = Shape(Build)
_JOB: Shape[Job] = Shape(Job)


@dataclass(frozen=True)
class BuildkiteReport:
    """What one delivery says: the build's commit, and the job's shard report (None: a build
    delivery, or a job only the poll records; `skipped` says why)."""

    commit: Commit
    shard: ShardReport | None = None
    skipped: str = ""


def pipeline_of(payload: dict[str, Any]) -> str:
    """`org/slug` of the delivery's pipeline ("" when the payload does not say)."""
    pipeline = payload.get("pipeline")
    url = pipeline.get("url") if isinstance(pipeline, dict) else None
    found = _PIPELINE.search(url) if isinstance(url, str) else None
    return f"{found[1]}/{found[2]}" if found else ""


def branch_of(payload: dict[str, Any]) -> str | None:
    """The branch of the delivery's build (None when it does not say)."""
    build = payload.get("build")
    branch = build.get("branch") if isinstance(build, dict) else None
    return branch if isinstance(branch, str) else None


def report(event: str, payload: dict[str, Any], repo: str) -> BuildkiteReport | None:
    """The delivery's facts about a trunk of `repo` (its commits' links); None for a build
    that is not a push of a commit (scheduled, `HEAD`). PayloadError names a field the
    delivery lacks or has wrong."""
    build = _parsed(_BUILD, payload.get("build"), "build")
    if not of_trunk(build):
        return None
    commit = commit_of(commit_record(build, f"{GITHUB_URL}/{repo}"))
    if event not in _JOB_EVENTS:
        return BuildkiteReport(commit)
    job = _parsed(_JOB, payload.get("job"), "job")
    skipped = _skipped(job)
    if skipped:
        return BuildkiteReport(commit, skipped=skipped)
    finished = event == "job.finished"
    conclusion = job_result(job)[0] if finished else "queued"
    attempt = payload["job"].get("retries_count")
    shard = ShardReport(
        sha=build.commit,
        name=job_name(job),
        run_id=build.number,
        attempt=(attempt if isinstance(attempt, int) and not isinstance(attempt, bool) else 0) + 1,
        completed=finished,
        conclusion=conclusion,
        url=job.web_url or build.web_url,
    )
    return BuildkiteReport(commit, shard)


def _skipped(job: Job) -> str:
    if job.type != "script":
        return f"a {job.type} step, not a job"
    if job.parallel_group_total:
        return "a parallel step's job (its step's cell is the poll's)"
    if job.signal_reason or job.state == "expired":
        return "an agent failure (its cell, with the reason, is the poll's)"
    return ""


def _parsed(shape: Shape[T], data: Any, what: str) -> T:
    if not isinstance(data, dict):
        raise PayloadError(f"'{what}' must be an object")
    try:
        return shape.parse(data)
    except ShapeError as err:
        problems = "; ".join(f"{where or '(body)'}: {problem}" for where, problem in err.problems[:3])
        raise PayloadError(f"'{what}': {problems}") from None
