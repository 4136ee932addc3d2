"""Job alerts (TrunkJobFailing, design.md §3.3) as the evaluator derives and stores them."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from trunkwatch.domain.cells import StoredCell


@dataclass(frozen=True)
class AlertCommit:
    """A commit as an alert names it, with the job's run on it."""

    seq: int
    sha: str
    time: datetime
    title: str = ""
    author: str = ""
    pr: int | None = None
    url: str = ""
    job_url: str = ""

    @classmethod
    def of(cls, cell: StoredCell) -> AlertCommit:
        c = cell.commit
        return cls(cell.seq, c.sha, c.time, c.title, c.author, c.pr, c.url, cell.url)


@dataclass(frozen=True)
class JobAlert:
    """A TrunkJobFailing alert's state as the evaluator last derived it. `version` is the
    stored version it was read at (None: not stored yet); a save against a newer one raises
    `Conflict`."""

    job: str
    status: str  # firing | resolved
    starts_at: datetime
    streak: int
    first_fail: AlertCommit
    newest_fail: AlertCommit
    last_pass: AlertCommit | None = None
    ends_at: datetime | None = None
    failure_lines: tuple[str, ...] = ()
    failing_urls: tuple[str, ...] = ()
    # The culprit commit's `autoreverted_by` when the alert was last written: shown once the
    # commit item has expired (while it exists, it is read live: reverts land late).
    culprit_autoreverted_by: str | None = None
    # With `confirm: rerun`: the verdict on the culprit and why; None without confirmation.
    culprit_verdict: str | None = None
    verdict_reason: str = ""
    # The culprit reruns confirmed when the job did not run on it (a sibling job's reruns
    # name it, domain/verdict.confirming_sibling); None: the first failure is the culprit.
    confirmed_culprit: AlertCommit | None = None
    version: int | None = None

    @property
    def culprit(self) -> AlertCommit:
        """The commit the alert names as culprit (or suspect)."""
        return self.confirmed_culprit or self.first_fail
