"""The reruns a job alert's episode asks for, as they are recorded (design.md §3.6)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True)
class RerunRecord:
    """A rerun one job alert's episode asked for (domain/verdict.py): of `job` on `sha` in
    the `role` of the suspect (`culprit_sha`, `last_pass_sha`) it was planned for. `status`
    is a `RerunStatus`; `requested_at` None: not requested yet (or its last request failed,
    `reason` says why, `tries` counts the requests made). `job_id` and `shard` name the
    attempt it re-ran, whose replacement by a newer attempt brings the result."""

    job: str
    episode: datetime  # the alert's starts_at: one episode's reruns
    role: str
    sha: str
    culprit_sha: str
    last_pass_sha: str | None
    planned_at: datetime
    status: str = "pending"
    requested_at: datetime | None = None
    job_id: int | str | None = None  # GitHub's (a number) or Buildkite's (a UUID)
    shard: str = ""
    reason: str = ""
    tries: int = 0
