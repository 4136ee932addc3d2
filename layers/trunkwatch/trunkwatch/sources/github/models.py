"""The parts of GitHub's REST response shapes the source reads (API version 2022-11-28).

Unknown fields are ignored; a missing or mistyped field that is read is a validation error,
which the API client turns into a `malformed` SourceError naming the field.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict


class _Shape(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class GitActor(_Shape):
    name: str | None = None
    date: datetime


class GitCommit(_Shape):
    message: str
    author: GitActor | None = None
    committer: GitActor


class User(_Shape):
    login: str


class Parent(_Shape):
    sha: str


class CommitItem(_Shape):
    """One entry of `GET /repos/{owner}/{repo}/commits`."""

    sha: str
    html_url: str = ""
    commit: GitCommit
    # The GitHub account of the author; null when the email matches no account.
    author: User | None = None
    parents: list[Parent]


class WorkflowRun(_Shape):
    """One entry of `workflow_runs` in `GET /repos/{owner}/{repo}/actions/runs`."""

    id: int
    # Null or empty for some runs; a run that failed to start is named by its `path`.
    name: str | None = None
    path: str = ""
    workflow_id: int | None = None
    head_sha: str
    status: str | None = None
    conclusion: str | None = None
    run_attempt: int = 1
    created_at: datetime
    updated_at: datetime


class Workflow(_Shape):
    """`GET /repos/{owner}/{repo}/actions/workflows/{workflow_id}`."""

    id: int
    name: str | None = None
    path: str = ""


class RunList(_Shape):
    total_count: int
    workflow_runs: list[WorkflowRun]


class Job(_Shape):
    """One entry of `jobs` in `GET .../actions/runs/{run_id}[/attempts/{n}]/jobs`."""

    id: int
    run_id: int
    run_attempt: int = 1
    name: str
    status: str
    conclusion: str | None = None
    html_url: str | None = None


class JobList(_Shape):
    total_count: int
    jobs: list[Job]
