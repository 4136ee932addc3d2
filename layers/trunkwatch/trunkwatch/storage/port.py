"""The storage port: one small interface per aggregate, taking and returning the domain's
records (`domain/`), and the `Storage` bundle a function's edge builds once and passes down.

Conditional writes that lose a race are part of the contract: a compare-and-set returns
False (the caller reads again), a version-checked save raises `errors.Conflict`. The job
index, commit placement and commit state strings change only by compare-and-set (the
ledger both ingest paths share: `app/ledger.py`). Every
implementation (DynamoDB, in memory) passes the same contract tests."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

from trunkwatch.domain.acks import Acknowledgement
from trunkwatch.domain.cells import CellWrite, Commit, JobRun, StoredCell
from trunkwatch.domain.commits import RevertMark, ShaPointer, StoredCommit
from trunkwatch.domain.episodes import Episode, FixedEpisode
from trunkwatch.domain.job_alerts import JobAlert
from trunkwatch.domain.notification_log import Lease, LogEntry, Rejection
from trunkwatch.domain.reruns import RerunRecord
from trunkwatch.domain.runs import RunRecord
from trunkwatch.domain.shards import ShardReport
from trunkwatch.domain.silences import SilenceAudit, SilenceRecord
from trunkwatch.domain.ticks import Group
from trunkwatch.domain.trunk_state import TrunkState


class Trunks(Protocol):
    """A trunk's own small items: its state, its job index and its source's state.
    `save_recent_seqs` and `add_job_names` are compare-and-sets on the value read."""

    def state(self, trunk_id: str, consistent: bool = False) -> TrunkState: ...
    def save_recent_seqs(self, trunk_id: str, old: list[int], new: list[int]) -> bool: ...
    def record_polled(self, trunk_id: str, at: datetime, missing_since: datetime | None = None) -> None: ...
    def record_poll_failure(self, trunk_id: str, at: datetime, cause: str, error: str) -> None: ...
    def record_poll_success(self, trunk_id: str, at: datetime, current: TrunkState) -> int: ...
    def record_delivery(self, trunk_id: str, at: datetime) -> None: ...
    def mark_unpaged(self, trunk_id: str, job: str, unpaged: bool) -> None: ...
    def job_names(self, trunk_id: str) -> list[str]: ...
    def add_job_names(self, trunk_id: str, known: list[str], names: list[str]) -> bool: ...
    def source_state(self, trunk_id: str) -> dict[str, Any]: ...
    def save_source_state(self, trunk_id: str, value: dict[str, Any]) -> None: ...


class Commits(Protocol):
    """A trunk's commits by seq, and their seqs by sha (how webhook deliveries find them).

    `place` stores a new commit item and its pointer in one conditional write: False when the
    seq is taken, or the commit's pointer is no longer `seen` (None: absent), or, with
    `parent` (its sha and pointer as read, unplaced and without a child), the parent's
    pointer changed; otherwise the parent's pointer records the commit as its `child`.
    `save_states` replaces a commit's state string (and, with `commit`, its title, author,
    PR, URL and revert mark) only if it is still `old`."""

    def newest(self, trunk_id: str, limit: int) -> list[StoredCommit]: ...
    def get(self, trunk_id: str, seq: int) -> StoredCommit | None: ...
    def mark(self, trunk_id: str, seq: int) -> RevertMark | None: ...
    def autoreverted(self, trunk_id: str, seqs: Iterable[int]) -> dict[int, str]: ...
    def place(
        self,
        trunk_id: str,
        commit: StoredCommit,
        retention: timedelta,
        seen: ShaPointer | None,
        parent: tuple[str, ShaPointer | None] | None = None,
    ) -> bool: ...
    def save_states(
        self, trunk_id: str, seq: int, old: str, new: str, commit: Commit | None = None
    ) -> bool: ...
    def pointers(self, trunk_id: str, shas: Iterable[str]) -> dict[str, ShaPointer]: ...
    def seqs_of(self, trunk_id: str, shas: Iterable[str]) -> dict[str, int]: ...


class Cells(Protocol):
    """Job cells, one partition per (trunk, job)."""

    def save_all(self, trunk_id: str, writes: Iterable[CellWrite], retention: timedelta) -> None:
        """Write the cells; a pending cell never replaces a stored result. Its writer merged
        it onto a state string read before another writer's result landed: the state string
        keeps that result (the ledger's compare-and-set), and so must the cell item."""

    def newest_seq(self, trunk_id: str, job: str) -> int | None: ...
    def newest_first(self, trunk_id: str, job: str, limit: int, page_size: int) -> Iterator[StoredCell]: ...


class Alerts(Protocol):
    """Job alerts and the trunk's failing set, written together; an alert that starts firing
    or resolves (`now_firing` not None) writes its `Episode` with them. Beside them, the
    breakages fixed before they could page: `save_fixed` writes one (replacing the one of its
    job and culprit) and removes those it `supersedes`, in one write."""

    def job_alert(self, trunk_id: str, job: str) -> JobAlert | None: ...
    def of_trunk(self, trunk_id: str, firing_only: bool = False) -> list[JobAlert]: ...
    def save_with_failing_set(self, trunk_id: str, alert: JobAlert, now_firing: bool | None) -> JobAlert: ...
    def episodes(self, trunk_id: str, since: datetime) -> list[Episode]: ...
    def fixed(self, trunk_id: str) -> list[FixedEpisode]: ...  # by culprit sha, then job
    def save_fixed(
        self, trunk_id: str, episode: FixedEpisode, supersedes: Sequence[FixedEpisode] = ()
    ) -> None: ...


class Ticks(Protocol):
    """Tick barriers of polls, webhook groups and sweeps."""

    def open_poll(self, trunk_id: str, poll: str, expected: int, now: datetime) -> None: ...
    def count(self, trunk_id: str, poll: str, sequences: Sequence[str], now: datetime) -> bool: ...
    def settle(self, trunk_id: str, poll: str, now: datetime) -> bool: ...
    def force_settle(self, trunk_id: str, poll: str, opened_at: datetime) -> bool: ...
    def join_group(self, trunk_id: str, cells: int, now: datetime) -> Group: ...
    def settle_sweep(self, trunk_id: str, sweep: str, now: datetime) -> None: ...


class Shards(Protocol):
    """A job's shards on one commit as webhook deliveries reported them. `report` is True
    when the stored shard is now the report's (written, or the same report stored before:
    a redelivery, or the retry of an invocation that died after it), False when the stored
    shard is newer, so a repeated delivery redoes what its first try may not have finished."""

    def report(self, trunk_id: str, shard: ShardReport, now: datetime) -> bool: ...
    def runs(self, trunk_id: str, sha: str, job: str) -> list[JobRun]: ...


class Runs(Protocol):
    """Workflow runs as webhook deliveries told of them, and the job reports held until
    their run is known (`workflow_job` does not say what triggered its run). `hold` and
    `release` are idempotent: a redelivery holds the same item, a released one is gone.
    `get` may miss a run saved just before unless `consistent`."""

    def get(self, trunk_id: str, run_id: int, consistent: bool = False) -> RunRecord | None: ...
    def save(self, trunk_id: str, run: RunRecord, now: datetime) -> None: ...
    def hold(self, trunk_id: str, report: ShardReport, now: datetime) -> None: ...
    def held(self, trunk_id: str, run_id: int) -> list[ShardReport]: ...
    def release(self, trunk_id: str, reports: Iterable[ShardReport]) -> None: ...


class Logs(Protocol):
    """Notification logs: per trunk, receiver and alert fingerprint, what was last sent.

    An entry is also the claim on its next delivery. `claim` leases it (`lease`, with the
    delivery's id and end) only if it is still at `entry.seq` (an entry never stored: 0) and
    holds no lease live at `now` (one that has passed is taken over): False otherwise, and
    nothing changes. `advance` writes `entry` (the delivery recorded, its seq one more) and
    clears the lease only while `lease` holds it (False: it was taken over); `release` clears
    it, the entry otherwise unchanged, on the same condition. A claimed entry never stored
    before expires `retention` after the claim unless advanced.

    Beside them, the alerts' acknowledgements, one per fingerprint: `add_ack` stores one
    unless a live one is there (False: the first stands), `end_ack` ends the live one read
    (`ack`, by its time) unless it changed since; an ended one expires after `retention`."""

    def of_receiver(self, trunk_id: str, receiver: str) -> dict[str, LogEntry]: ...
    def entry(self, trunk_id: str, receiver: str, fingerprint: str) -> LogEntry | None: ...
    def save(self, trunk_id: str, entry: LogEntry, now: datetime, retention: timedelta) -> None: ...
    def claim(
        self, trunk_id: str, entry: LogEntry, lease: Lease, now: datetime, retention: timedelta
    ) -> bool: ...
    def advance(
        self, trunk_id: str, entry: LogEntry, lease: Lease, now: datetime, retention: timedelta
    ) -> bool: ...
    def release(self, trunk_id: str, entry: LogEntry, lease: Lease) -> None: ...
    # Messages receivers refused for good: the latest per receiver and alert, for `retention`.
    def rejected(self, trunk_id: str) -> list[Rejection]: ...  # by receiver, then fingerprint
    def save_rejection(self, trunk_id: str, rejection: Rejection, retention: timedelta) -> None: ...
    def acks(self, trunk_id: str) -> list[Acknowledgement]: ...  # by fingerprint
    def add_ack(self, trunk_id: str, ack: Acknowledgement) -> bool: ...
    def end_ack(
        self, trunk_id: str, ack: Acknowledgement, ended_at: datetime, retention: timedelta
    ) -> None: ...


class Reruns(Protocol):
    """The reruns job alerts asked for, per trunk. `add` stores a new one (False if that
    episode's role is already stored); `update` replaces a stored one. `open` returns the
    trunk's reruns without a result planned since `planned_since`, and those requested
    since `requested_since` (for the hourly cap)."""

    def of_episode(self, trunk_id: str, job: str, episode: datetime) -> list[RerunRecord]: ...
    def open(
        self, trunk_id: str, planned_since: datetime, requested_since: datetime
    ) -> list[RerunRecord]: ...
    def add(self, trunk_id: str, record: RerunRecord, retention: timedelta) -> bool: ...
    def update(self, trunk_id: str, record: RerunRecord, retention: timedelta) -> None: ...


class Silences(Protocol):
    """Silences and their audit trail; a change is one all-or-nothing write."""

    def get(self, silence_id: str) -> SilenceRecord | None: ...
    def listable(self, now: datetime) -> list[SilenceRecord]: ...
    def audit(self) -> list[SilenceAudit]: ...
    def commit(self, silences: list[SilenceRecord], audits: list[SilenceAudit]) -> None: ...


@dataclass(frozen=True)
class Storage:
    """Every store of one deployment's table, built at the function's edge."""

    trunks: Trunks
    commits: Commits
    cells: Cells
    alerts: Alerts
    ticks: Ticks
    shards: Shards
    runs: Runs
    logs: Logs
    silences: Silences
    reruns: Reruns
