"""The records the stores take and return: plain domain values, whichever implementation
stores them (DynamoDB items in `dynamodb.py`, dicts in `memory.py`)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from trunkwatch.domain.cells import Cell, Commit, StoredCell, line_ids

# Tick barriers and webhook groups (see `ticks.py` for the protocol they follow).
TICK_TTL = timedelta(days=2)
GROUP_WINDOW = timedelta(milliseconds=500)
# Long enough for any re-run of a commit's jobs (GitHub re-runs within 30 days).
SHARD_TTL = timedelta(days=30)
TITLE_MAX = 200
ERROR_MAX = 500
# A steady good poll rewrites its time only this often.
LAST_OK_PRECISION = timedelta(minutes=5)
# A delivery that opens no group records its time (WebhooksDown's `last_delivery_at`) only
# this often: a steady stream of passes writes the trunk's state once per period, not once
# per delivery.
LAST_DELIVERY_PRECISION = timedelta(minutes=5)
# How long a resolved episode is kept after it ended: the status page's 30-day history, plus
# a day so an episode that ended just inside the window is never expired under it.
HISTORY_DAYS = 30
EPISODE_RETENTION = timedelta(days=HISTORY_DAYS + 1)


@dataclass
class TrunkState:
    """Per-trunk counters the evaluator and notifier share (an empty one before the first poll)."""

    # Jobs with a firing TrunkJobFailing: K of design.md §3.3.
    failing: set[str] = field(default_factory=set)
    # Jobs whose newest failures (two or more commits, one breakage) have not paged: a pass
    # on one is judged, to find the breakage it fixed (design.md §3.7).
    unpaged: set[str] = field(default_factory=set)
    # Seqs of the newest commits that ran any job (for staleness), newest first.
    recent_seqs: list[int] = field(default_factory=list)
    # Polls (and webhook groups) whose ticks have not settled yet, with when each opened: a
    # sweep waits for a young one (tick barrier) and settles one left open too long.
    unsettled: dict[str, datetime] = field(default_factory=dict)
    # The source's health (SourceDown): the last good poll, and since when polls fail.
    last_poll_ok_at: datetime | None = None
    polls_failing_since: datetime | None = None
    poll_error_cause: str | None = None
    poll_error: str | None = None
    # When a webhook-fed trunk was last polled (it is polled only every `poll_every`).
    last_polled_at: datetime | None = None
    # The last second a delivery wrote cells, and since when the poll finds results without
    # deliveries (WebhooksDown).
    last_delivery_at: datetime | None = None
    deliveries_missing_since: datetime | None = None


@dataclass(frozen=True)
class RunRecord:
    """A workflow run a webhook delivery told of: whether it is one of the trunk's (a push
    to its branch in its own repository: `sources.webhook.RunReport.of_trunk`), and its
    commit."""

    run_id: int
    sha: str
    of_trunk: bool


@dataclass(frozen=True)
class StoredCommit:
    """A trunk commit at its position `seq`, with one CellState code per job column ('-' =
    no cell): what ingest compares a snapshot against."""

    seq: int
    commit: Commit
    states: str = ""


@dataclass(frozen=True)
class Pointer:
    """A commit's by-sha pointer: its `seq` once placed, and `child`, the seq of its child
    when that was placed first (a push delivered before its parent's push)."""

    seq: int | None = None
    child: int | None = None


@dataclass(frozen=True)
class CommitMark:
    """What a stored commit item says about its revert (it exists: it has not expired)."""

    autoreverted_by: str | None


@dataclass(frozen=True)
class CellWrite:
    """A cell to store on commit `seq`, written by `poll` (its tick counts it); `prior_seq` is
    the job's newest cell before that poll, if known."""

    cell: Cell
    commit: Commit
    seq: int
    poll: str
    prior_seq: int | None = None


@dataclass(frozen=True)
class CommitRef:
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
    def of(cls, cell: StoredCell) -> CommitRef:
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
    first_fail: CommitRef
    newest_fail: CommitRef
    last_pass: CommitRef | None = None
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
    confirmed_culprit: CommitRef | None = None
    version: int | None = None

    @property
    def culprit(self) -> CommitRef:
        """The commit the alert names as culprit (or suspect)."""
        return self.confirmed_culprit or self.first_fail


@dataclass(frozen=True)
class Episode:
    """One TrunkJobFailing episode of a job, from its start (the culprit commit's time) to its
    resolution (None while firing): the history the status page draws, kept after the cells
    and commits that showed it have expired. Written with its alert when it fires and when it
    resolves."""

    job: str
    starts_at: datetime
    ends_at: datetime | None
    culprit: CommitRef
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
    culprit: CommitRef
    fix: CommitRef
    failed_commits: int
    detected_at: datetime
    last_pass: CommitRef | None = None
    failure_lines: tuple[str, ...] = ()


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


@dataclass(frozen=True)
class Lease:
    """A delivery's claim on a log entry: one invocation's, by its id, until `until` (the
    delivery's time budget after the claim). One that has passed may be taken over."""

    claim_id: str
    until: datetime

    def live(self, now: datetime) -> bool:
        return now < self.until


@dataclass
class LogEntry:
    """What was last sent for one alert fingerprint to one receiver (Alertmanager's
    notification log: each receiver keeps its own), and the lease of a delivery under way.
    The entry is the delivery's claim: a delivery starts by leasing it at the `seq` it read,
    and ends by advancing it under that lease (design.md §4)."""

    receiver: str
    fingerprint: str
    alertname: str
    job: str | None = None
    seq: int = 0  # transitions sent so far; a claim holds only at the seq it read
    last_status: str | None = None  # firing | resolved | None (never sent)
    last_sent_at: datetime | None = None
    starts_at: datetime | None = None
    # Trunk-level: the jobs of the last message as stored, each with its streak and culprit
    # ({job: FailingJob.as_data()}); the job names alone in entries written before.
    jobs: dict[str, Any] | list[str] | None = None
    held_by: list[str] | None = None  # silences/inhibitions holding it now
    labels: dict[str, str] | None = None  # as last sent: a trunk-level alert resolves from these
    annotations: dict[str, str] | None = None
    acknowledged: str | None = None  # the acknowledgement last told (Acknowledgement.key)
    lease: Lease | None = None  # the delivery under way, if any (live or not)


@dataclass(frozen=True)
class Rejection:
    """A message a receiver refused for good (not retried), kept in the trunk's notification
    log beside the receiver's entry for the alert: which alert (`alertname`, `job`,
    `fingerprint`), which transition (`status`, and `reason` as notification_reason), when,
    and what the receiver answered (its status and error, never a URL or a credential)."""

    receiver: str
    fingerprint: str
    alertname: str
    job: str | None
    status: str
    reason: str
    at: datetime
    answer: str


# A sweep's tick id starts with this (storage keeps it as the tick's `poll`): the notifier
# sends the heartbeat on sweeps' ticks, which come every schedule period.
SWEEP_TICK_PREFIX = "sweep-"


def sweep_tick_id(at: datetime) -> str:
    return f"{SWEEP_TICK_PREFIX}{at.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:8]}"


def is_sweep_tick(tick_id: str) -> bool:
    return tick_id.startswith(SWEEP_TICK_PREFIX)


@dataclass(frozen=True)
class Group:
    """A webhook group tick: the deliveries of one GROUP_WINDOW bucket settle together."""

    id: str
    closes_at: datetime
    opened: bool  # this delivery opened it: it waits for `closes_at`, then settles it


def group_bucket(at: datetime) -> tuple[str, datetime]:
    """The bucket (end - GROUP_WINDOW, end] holding `at`: its id and its end. A delivery at a
    bucket's end closes it at once (the evaluator settles it at its last cell)."""
    step = GROUP_WINDOW.total_seconds()
    end = datetime.fromtimestamp(-(-at.timestamp() // step) * step, UTC)
    return f"hook-{end.strftime('%Y%m%dT%H%M%S')}.{end.microsecond // 1000:03d}", end


@dataclass(frozen=True)
class StoredMatcher:
    name: str
    value: str
    is_regex: bool
    is_equal: bool


@dataclass(frozen=True)
class SilenceRecord:
    """A silence as stored; `version` as in JobAlert. It is gone once `expires_at` passed."""

    id: str
    matchers: tuple[StoredMatcher, ...]
    starts_at: datetime
    ends_at: datetime
    updated_at: datetime
    created_by: str
    comment: str
    expires_at: datetime
    version: int | None = None


@dataclass(frozen=True)
class SilenceAudit:
    """One create/update/expire of a silence, with the silence before and after (API form)."""

    silence_id: str
    action: str
    who: str
    at: datetime
    before: dict[str, Any] | None
    after: dict[str, Any]
    expires_at: datetime
