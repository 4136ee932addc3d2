"""A job's episodes: those that paged and the breakages fixed before they could page, the
history the status page and the daily digest read after the cells have expired."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from trunkwatch.domain.cells import line_ids
from trunkwatch.domain.job_alerts import AlertCommit, JobAlert

# How long a resolved episode is kept after it ended: the status page's 30-day history, plus
# a day so an episode that ended just inside the window is never expired under it.
HISTORY_DAYS = 30
EPISODE_RETENTION = timedelta(days=HISTORY_DAYS + 1)


@dataclass(frozen=True)
class Episode:
    """One TrunkJobFailing episode of a job, from its start (the culprit commit's time) to its
    resolution (None while firing): the history the status page draws, kept after the cells
    and commits that showed it have expired. Written with its alert when it fires and when it
    resolves."""

    job: str
    starts_at: datetime
    ends_at: datetime | None
    culprit: AlertCommit
    verdict: str | None = None  # the alert's culprit_verdict when it was written (confirm: rerun)
    failure_line_ids: tuple[str, ...] = ()  # the alert's failure lines' (`line_ids`) then

    @classmethod
    def of(cls, alert: JobAlert) -> Episode:
        return cls(
            alert.job,
            alert.starts_at,
            alert.ends_at,
            alert.culprit,
            alert.culprit_verdict,
            tuple(sorted(line_ids(alert.failure_lines))),
        )


@dataclass(frozen=True)
class FixedEpisode:
    """A breakage of one job fixed before it could page (design.md §3.7): its run of
    `failed_commits` failing commits from the culprit (the first) to the fix (the first
    commit that passed after them), when the evaluator first recorded it (`detected_at`),
    the pass before the run (None: not known) and the failure lines its failures share. One
    per job and culprit, kept EPISODE_RETENTION after it was detected: the status page's
    history and the daily digest (§4.4) read them."""

    job: str
    culprit: AlertCommit
    fix: AlertCommit
    failed_commits: int
    detected_at: datetime
    last_pass: AlertCommit | None = None
    failure_lines: tuple[str, ...] = ()
