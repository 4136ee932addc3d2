"""The parts of GitHub's REST response shapes the source reads (API version 2022-11-28), read
by `Shape` (`sources/shape.py`): unknown fields are ignored; a missing or mistyped field that
is read is a validation error, which the source turns into a `malformed` SourceError naming
the field.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True)
class GitActor:
    date: datetime
    name: str | None = None


@dataclass(frozen=True)
class GitCommit:
    message: str
    committer: GitActor
    author: GitActor | None = None


@dataclass(frozen=True)
class User:
    login: str


@dataclass(frozen=True)
class Parent:
    sha: str


@dataclass(frozen=True)
class CommitListEntry:
    """One entry of `GET /repos/{owner}/{repo}/commits`."""

    sha: str
    commit: GitCommit
    parents: list[Parent]
    html_url: str = ""
    # The GitHub account of the author; null when the email matches no account.
    author: User | None = None


@dataclass(frozen=True)
class WorkflowRun:
    """One entry of `workflow_runs` in `GET /repos/{owner}/{repo}/actions/runs`."""

    id: int
    head_sha: str
    created_at: datetime
    updated_at: datetime
    # Null or empty for some runs; a run that failed to start is named by its `path`.
    name: str | None = None
    path: str = ""
    workflow_id: int | None = None
    status: str | None = None
    conclusion: str | None = None
    run_attempt: int = 1


@dataclass(frozen=True)
class Workflow:
    """`GET /repos/{owner}/{repo}/actions/workflows/{workflow_id}`."""

    id: int
    name: str | None = None
    path: str = ""


@dataclass(frozen=True)
class RunList:
    total_count: int
    workflow_runs: list[WorkflowRun]


@dataclass(frozen=True)
class Job:
    """One entry of `jobs` in `GET .../actions/runs/{run_id}[/attempts/{n}]/jobs`."""

    id: int
    run_id: int
    name: str
    status: str
    run_attempt: int = 1
    conclusion: str | None = None
    html_url: str | None = None


@dataclass(frozen=True)
class JobList:
    total_count: int
    jobs: list[Job]
