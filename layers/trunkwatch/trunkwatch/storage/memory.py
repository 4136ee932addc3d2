"""The in-memory storage: the port's contract (the same contract tests as the DynamoDB one,
conditional writes included) on dicts, for use-case tests that need no AWS emulation.

Records are copied in and out, as a table would: a caller changing what it read changes
nothing stored. Nothing expires: DynamoDB's TTL deletes late, and nothing reads through
an expired item but silences, which check their expiry themselves."""

from __future__ import annotations

import copy
import uuid
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from trunkwatch.domain.acks import Acknowledgement
from trunkwatch.domain.cells import CellState, CellWrite, Commit, JobRun, StoredCell, job_key
from trunkwatch.domain.clock import format_time
from trunkwatch.domain.commits import RevertMark, ShaPointer, StoredCommit
from trunkwatch.domain.episodes import Episode, FixedEpisode
from trunkwatch.domain.job_alerts import JobAlert
from trunkwatch.domain.notification_log import Lease, LogEntry, Rejection
from trunkwatch.domain.reruns import RerunRecord
from trunkwatch.domain.runs import RunRecord
from trunkwatch.domain.shards import Shard, ShardReport, merge
from trunkwatch.domain.silences import SilenceAudit, SilenceRecord
from trunkwatch.domain.ticks import Group, group_bucket
from trunkwatch.domain.trunk_state import TrunkState
from trunkwatch.storage.errors import Conflict
from trunkwatch.storage.limits import ERROR_MAX, LAST_OK_PRECISION, TITLE_MAX
from trunkwatch.storage.port import Storage


@dataclass
class _Tick:
    expected: int
    at: datetime
    evaluated: int | None = None
    counted: set[str] = field(default_factory=set)  # the stream records' sequence numbers
    settled: bool = False
    closes_at: datetime | None = None
    opened_by: str | None = None


class MemoryTrunks:
    def __init__(self) -> None:
        self._states: dict[str, TrunkState] = {}
        self._job_names: dict[str, list[str]] = {}
        self._source_states: dict[str, dict[str, Any]] = {}

    def state(self, trunk_id: str, consistent: bool = False) -> TrunkState:
        return copy.deepcopy(self._states.get(trunk_id) or TrunkState())

    def stored_state(self, trunk_id: str) -> TrunkState:
        """The stored state itself (the stores sharing it change it in place)."""
        return self._states.setdefault(trunk_id, TrunkState())

    def save_recent_seqs(self, trunk_id: str, old: list[int], new: list[int]) -> bool:
        state = self.stored_state(trunk_id)
        if state.recent_seqs != old:
            return False
        state.recent_seqs = list(new)
        return True

    def record_polled(self, trunk_id: str, at: datetime, missing_since: datetime | None = None) -> None:
        state = self.stored_state(trunk_id)
        state.last_polled_at = at
        if missing_since is not None:
            state.deliveries_missing_since = missing_since

    def record_poll_failure(self, trunk_id: str, at: datetime, cause: str, error: str) -> None:
        state = self.stored_state(trunk_id)
        state.polls_failing_since = state.polls_failing_since or at
        state.poll_error_cause, state.poll_error = cause, error[:ERROR_MAX]

    def record_poll_success(self, trunk_id: str, at: datetime, current: TrunkState) -> int:
        was_failing = current.polls_failing_since is not None
        last_ok = current.last_poll_ok_at
        if not was_failing and last_ok is not None and at - last_ok < LAST_OK_PRECISION:
            return 0
        state = self.stored_state(trunk_id)
        state.last_poll_ok_at = at
        if was_failing:
            state.polls_failing_since = state.poll_error_cause = state.poll_error = None
        return 1

    def record_delivery(self, trunk_id: str, at: datetime) -> None:
        self.stored_state(trunk_id).last_delivery_at = at

    def mark_unpaged(self, trunk_id: str, job: str, unpaged: bool) -> None:
        jobs = self.stored_state(trunk_id).unpaged
        (jobs.add if unpaged else jobs.discard)(job)

    def open_poll(self, trunk_id: str, poll: str, at: datetime, delivered: bool = False) -> None:
        state = self.stored_state(trunk_id)
        state.unsettled[poll] = at
        if delivered:
            state.last_delivery_at = at

    def close_poll(self, trunk_id: str, poll: str) -> None:
        self.stored_state(trunk_id).unsettled.pop(poll, None)

    def job_names(self, trunk_id: str) -> list[str]:
        return list(self._job_names.get(trunk_id) or [])

    def add_job_names(self, trunk_id: str, known: list[str], names: list[str]) -> bool:
        stored = self._job_names.get(trunk_id)
        if (stored is not None) if not known else stored != known:
            return False
        self._job_names[trunk_id] = [*known, *names]
        return True

    def source_state(self, trunk_id: str) -> dict[str, Any]:
        return copy.deepcopy(self._source_states.get(trunk_id) or {})

    def save_source_state(self, trunk_id: str, value: dict[str, Any]) -> None:
        self._source_states[trunk_id] = copy.deepcopy(value)


class MemoryCommits:
    def __init__(self) -> None:
        self._commits: dict[str, dict[int, StoredCommit]] = {}
        self._pointers: dict[str, dict[str, ShaPointer]] = {}

    def newest(self, trunk_id: str, limit: int) -> list[StoredCommit]:
        stored = self._commits.get(trunk_id, {})
        return [stored[seq] for seq in sorted(stored, reverse=True)[:limit]]

    def get(self, trunk_id: str, seq: int) -> StoredCommit | None:
        return self._commits.get(trunk_id, {}).get(seq)

    def mark(self, trunk_id: str, seq: int) -> RevertMark | None:
        stored = self.get(trunk_id, seq)
        return None if stored is None else RevertMark(stored.commit.autoreverted_by)

    def autoreverted(self, trunk_id: str, seqs: Iterable[int]) -> dict[int, str]:
        found = (self.get(trunk_id, seq) for seq in set(seqs))
        return {c.seq: c.commit.autoreverted_by for c in found if c is not None and c.commit.autoreverted_by}

    def place(
        self,
        trunk_id: str,
        commit: StoredCommit,
        retention: timedelta,
        seen: ShaPointer | None,
        parent: tuple[str, ShaPointer | None] | None = None,
    ) -> bool:
        stored = self._commits.setdefault(trunk_id, {})
        pointers = self._pointers.setdefault(trunk_id, {})
        sha = commit.commit.sha
        if (
            commit.seq in stored
            or pointers.get(sha) != seen
            or (parent is not None and pointers.get(parent[0]) != parent[1])
        ):
            return False
        stored[commit.seq] = commit
        pointers[sha] = ShaPointer(commit.seq, seen.child if seen is not None else None)
        if parent is not None:
            pointers[parent[0]] = ShaPointer(child=commit.seq)
        return True

    def save_states(self, trunk_id: str, seq: int, old: str, new: str, commit: Commit | None = None) -> bool:
        stored = self.get(trunk_id, seq)
        if stored is None or stored.states != old:
            return False
        kept = stored.commit  # its sha and time stay: the metadata are the rest
        metadata = replace(commit, sha=kept.sha, time=kept.time) if commit is not None else kept
        self._commits[trunk_id][seq] = replace(stored, states=new, commit=metadata)
        return True

    def pointers(self, trunk_id: str, shas: Iterable[str]) -> dict[str, ShaPointer]:
        pointers = self._pointers.get(trunk_id, {})
        return {sha: pointers[sha] for sha in set(shas) if sha in pointers}

    def seqs_of(self, trunk_id: str, shas: Iterable[str]) -> dict[str, int]:
        return {sha: seq for sha, p in self.pointers(trunk_id, shas).items() if (seq := p.seq) is not None}


class MemoryCells:
    def __init__(self) -> None:
        self._cells: dict[tuple[str, str], dict[int, StoredCell]] = {}

    def save_all(self, trunk_id: str, writes: Iterable[CellWrite], retention: timedelta) -> None:
        for write in writes:
            cell, commit = write.cell, write.commit
            stored = self._cells.setdefault((trunk_id, cell.job), {})
            held = stored.get(write.seq)
            if cell.state == CellState.PENDING and held is not None and held.state != CellState.PENDING:
                continue  # as DynamoDB's conditional put: a pending cell never over a result
            stored[write.seq] = StoredCell(
                seq=write.seq,
                state=cell.state,
                commit=replace(commit, title=commit.title[:TITLE_MAX], autoreverted_by=None),
                url=cell.url,
                failure_lines=tuple(cell.failure_lines),
            )

    def newest_seq(self, trunk_id: str, job: str) -> int | None:
        return max(self._cells.get((trunk_id, job), {}), default=None)

    def newest_first(self, trunk_id: str, job: str, limit: int, page_size: int) -> Iterator[StoredCell]:
        stored = self._cells.get((trunk_id, job), {})
        return iter([stored[seq] for seq in sorted(stored, reverse=True)[:limit]])


class MemoryAlerts:
    def __init__(self, trunks: MemoryTrunks) -> None:
        self._alerts: dict[str, dict[str, JobAlert]] = {}
        self._trunks = trunks  # the failing set lives in the trunk's state
        self._episodes: dict[str, dict[tuple[datetime, str], Episode]] = {}
        self._fixed: dict[str, dict[tuple[str, str], FixedEpisode]] = {}

    def job_alert(self, trunk_id: str, job: str) -> JobAlert | None:
        return self._alerts.get(trunk_id, {}).get(job)

    def of_trunk(self, trunk_id: str, firing_only: bool = False) -> list[JobAlert]:
        stored = self._alerts.get(trunk_id, {})
        alerts = [stored[job] for job in sorted(stored)]
        return [a for a in alerts if a.status == "firing"] if firing_only else alerts

    def save_with_failing_set(self, trunk_id: str, alert: JobAlert, now_firing: bool | None) -> JobAlert:
        current = self.job_alert(trunk_id, alert.job)
        if alert.version != (current.version if current is not None else None):
            raise Conflict(f"alert of {alert.job} changed since it was read")
        saved = replace(alert, version=(alert.version or 0) + 1)
        self._alerts.setdefault(trunk_id, {})[alert.job] = saved
        if now_firing is not None:
            failing = self._trunks.stored_state(trunk_id).failing
            (failing.add if now_firing else failing.discard)(alert.job)
            self._episodes.setdefault(trunk_id, {})[(alert.starts_at, alert.job)] = Episode.of(alert)
        return saved

    def episodes(self, trunk_id: str, since: datetime) -> list[Episode]:
        stored = self._episodes.get(trunk_id, {})
        by_start = [stored[key] for key in sorted(stored)]
        return [e for e in by_start if e.ends_at is None or e.ends_at >= since]

    def fixed(self, trunk_id: str) -> list[FixedEpisode]:
        stored = self._fixed.get(trunk_id, {})
        return [stored[key] for key in sorted(stored, key="#".join)]  # as DynamoDB sorts the keys

    def save_fixed(
        self, trunk_id: str, episode: FixedEpisode, supersedes: Sequence[FixedEpisode] = ()
    ) -> None:
        stored = self._fixed.setdefault(trunk_id, {})
        for old in supersedes:
            stored.pop((old.culprit.sha, old.job), None)
        stored[(episode.culprit.sha, episode.job)] = episode


class MemoryTicks:
    def __init__(self, trunks: MemoryTrunks) -> None:
        self._ticks: dict[tuple[str, str], _Tick] = {}
        self._trunks = trunks  # a poll's tick is the trunk's open poll until it settles

    def open_poll(self, trunk_id: str, poll: str, expected: int, now: datetime) -> None:
        self._ticks[(trunk_id, poll)] = _Tick(expected=expected, at=now)
        self._trunks.open_poll(trunk_id, poll, now)

    def count(self, trunk_id: str, poll: str, sequences: Sequence[str], now: datetime) -> bool:
        tick = self._ticks.get((trunk_id, poll))
        if tick is None or tick.settled:
            return False
        tick.counted |= set(sequences)
        tick.evaluated = len(tick.counted)
        return tick.evaluated >= tick.expected and (tick.closes_at is None or tick.closes_at <= now)

    def settle(self, trunk_id: str, poll: str, now: datetime) -> bool:
        tick = self._ticks.get((trunk_id, poll))
        if (
            tick is None
            or tick.settled
            or tick.evaluated is None
            or tick.evaluated < tick.expected
            or (tick.closes_at is not None and tick.closes_at > now)
        ):
            return False
        tick.settled = True
        self._trunks.close_poll(trunk_id, poll)
        return True

    def force_settle(self, trunk_id: str, poll: str, opened_at: datetime) -> bool:
        tick = self._ticks.get((trunk_id, poll))
        self._trunks.close_poll(trunk_id, poll)
        if tick is None or tick.settled:
            return False
        tick.settled = True
        return True

    def join_group(self, trunk_id: str, cells: int, now: datetime) -> Group:
        at, token = now, uuid.uuid4().hex
        while True:
            group, closes_at = group_bucket(at)
            tick = self._ticks.get((trunk_id, group))
            if tick is not None and (tick.settled or (tick.closes_at is not None and tick.closes_at < now)):
                at = closes_at + timedelta(microseconds=1)
                continue
            if tick is None:
                tick = self._ticks[(trunk_id, group)] = _Tick(expected=0, at=now, opened_by=token)
            tick.expected += cells
            tick.evaluated = tick.evaluated or 0
            tick.closes_at = closes_at
            opened = tick.opened_by == token
            if opened:
                self._trunks.open_poll(trunk_id, group, now, delivered=True)
            return Group(group, closes_at, opened)

    def settle_sweep(self, trunk_id: str, sweep: str, now: datetime) -> None:
        self._ticks[(trunk_id, sweep)] = _Tick(expected=0, at=now, evaluated=0, settled=True)


class MemoryShards:
    def __init__(self) -> None:
        self._shards: dict[tuple[str, str, str], dict[str, Shard]] = {}

    def report(self, trunk_id: str, shard: ShardReport, now: datetime) -> bool:
        shards = self._shards.setdefault((trunk_id, shard.sha, job_key(shard.name)), {})
        merged = shards[shard.name] = merge(shards.get(shard.name), shard)
        return merged.reflects(shard)

    def runs(self, trunk_id: str, sha: str, job: str) -> list[JobRun]:
        shards = self._shards.get((trunk_id, sha, job), {})
        return [shard.run(name) for name, shard in sorted(shards.items())]


class MemoryRuns:
    def __init__(self) -> None:
        self._runs: dict[tuple[str, int], RunRecord] = {}
        self._held: dict[tuple[str, int], dict[tuple[str, int, bool, str], ShardReport]] = {}

    def get(self, trunk_id: str, run_id: int, consistent: bool = False) -> RunRecord | None:
        return self._runs.get((trunk_id, run_id))

    def save(self, trunk_id: str, run: RunRecord, now: datetime) -> None:
        self._runs[(trunk_id, run.run_id)] = run

    def hold(self, trunk_id: str, report: ShardReport, now: datetime) -> None:
        self._held.setdefault((trunk_id, report.run_id), {})[_held_key(report)] = report

    def held(self, trunk_id: str, run_id: int) -> list[ShardReport]:
        return [report for _, report in sorted(self._held.get((trunk_id, run_id), {}).items())]

    def release(self, trunk_id: str, reports: Iterable[ShardReport]) -> None:
        for report in reports:
            self._held.get((trunk_id, report.run_id), {}).pop(_held_key(report), None)


def _held_key(report: ShardReport) -> tuple[str, int, bool, str]:
    return (report.name, report.attempt, report.completed, "" if report.completed else report.conclusion)


class MemoryLogs:
    def __init__(self) -> None:
        self._entries: dict[tuple[str, str], dict[str, LogEntry]] = {}
        self._rejections: dict[str, dict[tuple[str, str], Rejection]] = {}
        self._acks: dict[str, dict[str, Acknowledgement]] = {}

    def of_receiver(self, trunk_id: str, receiver: str) -> dict[str, LogEntry]:
        return copy.deepcopy(self._entries.get((trunk_id, receiver), {}))

    def entry(self, trunk_id: str, receiver: str, fingerprint: str) -> LogEntry | None:
        return copy.deepcopy(self._entries.get((trunk_id, receiver), {}).get(fingerprint))

    def save(self, trunk_id: str, entry: LogEntry, now: datetime, retention: timedelta) -> None:
        self._entries.setdefault((trunk_id, entry.receiver), {})[entry.fingerprint] = copy.deepcopy(entry)

    def claim(
        self, trunk_id: str, entry: LogEntry, lease: Lease, now: datetime, retention: timedelta
    ) -> bool:
        entries = self._entries.setdefault((trunk_id, entry.receiver), {})
        current = entries.get(entry.fingerprint) or LogEntry(
            entry.receiver, entry.fingerprint, entry.alertname, entry.job
        )
        if current.seq != entry.seq or (current.lease is not None and current.lease.live(now)):
            return False
        entries[entry.fingerprint] = replace(current, lease=lease)
        return True

    def advance(
        self, trunk_id: str, entry: LogEntry, lease: Lease, now: datetime, retention: timedelta
    ) -> bool:
        if not self._leased(trunk_id, entry, lease):
            return False
        self._entries[(trunk_id, entry.receiver)][entry.fingerprint] = replace(
            copy.deepcopy(entry), lease=None
        )
        return True

    def release(self, trunk_id: str, entry: LogEntry, lease: Lease) -> None:
        if self._leased(trunk_id, entry, lease):
            entries = self._entries[(trunk_id, entry.receiver)]
            entries[entry.fingerprint] = replace(entries[entry.fingerprint], lease=None)

    def _leased(self, trunk_id: str, entry: LogEntry, lease: Lease) -> bool:
        stored = self._entries.get((trunk_id, entry.receiver), {}).get(entry.fingerprint)
        return stored is not None and stored.lease is not None and stored.lease.claim_id == lease.claim_id

    def rejected(self, trunk_id: str) -> list[Rejection]:
        stored = self._rejections.get(trunk_id, {})
        return [stored[key] for key in sorted(stored, key="#".join)]  # as DynamoDB sorts the keys

    def save_rejection(self, trunk_id: str, rejection: Rejection, retention: timedelta) -> None:
        self._rejections.setdefault(trunk_id, {})[(rejection.receiver, rejection.fingerprint)] = rejection

    def acks(self, trunk_id: str) -> list[Acknowledgement]:
        stored = self._acks.get(trunk_id, {})
        return [stored[fingerprint] for fingerprint in sorted(stored)]

    def add_ack(self, trunk_id: str, ack: Acknowledgement) -> bool:
        stored = self._acks.setdefault(trunk_id, {})
        current = stored.get(ack.fingerprint)
        if current is not None and current.live:
            return False
        stored[ack.fingerprint] = ack
        return True

    def end_ack(self, trunk_id: str, ack: Acknowledgement, ended_at: datetime, retention: timedelta) -> None:
        stored = self._acks.get(trunk_id, {})
        current = stored.get(ack.fingerprint)
        if current is not None and current.live and current.at == ack.at:
            stored[ack.fingerprint] = current.ended(ended_at)


class MemoryReruns:
    def __init__(self) -> None:
        self.items: dict[str, dict[tuple[str, datetime, str], RerunRecord]] = {}

    def of_episode(self, trunk_id: str, job: str, episode: datetime) -> list[RerunRecord]:
        stored = self.items.get(trunk_id, {})
        return [stored[key] for key in sorted(stored, key=_rerun_order) if key[:2] == (job, episode)]

    def open(self, trunk_id: str, planned_since: datetime, requested_since: datetime) -> list[RerunRecord]:
        stored = self.items.get(trunk_id, {})
        return [
            stored[key]
            for key in sorted(stored, key=_rerun_order)
            if _open(stored[key], planned_since, requested_since)
        ]

    def add(self, trunk_id: str, record: RerunRecord, retention: timedelta) -> bool:
        stored = self.items.setdefault(trunk_id, {})
        key = (record.job, record.episode, record.role)
        if key in stored:
            return False
        stored[key] = record
        return True

    def update(self, trunk_id: str, record: RerunRecord, retention: timedelta) -> None:
        self.items.setdefault(trunk_id, {})[(record.job, record.episode, record.role)] = record


def _open(record: RerunRecord, planned_since: datetime, requested_since: datetime) -> bool:
    requested = record.requested_at
    unanswered = record.status in ("pending", "request_failed") and record.planned_at >= planned_since
    return unanswered or (requested is not None and requested >= requested_since)


def _rerun_order(key: tuple[str, datetime, str]) -> str:
    """DynamoDB's order: the sort key's text."""
    job, episode, role = key
    return f"{job}#{format_time(episode)}#{role}"


class MemorySilences:
    def __init__(self) -> None:
        self._silences: dict[str, SilenceRecord] = {}
        self._audits: dict[str, SilenceAudit] = {}  # by the audit item's sort key

    def get(self, silence_id: str) -> SilenceRecord | None:
        return self._silences.get(silence_id)

    def listable(self, now: datetime) -> list[SilenceRecord]:
        return [self._silences[key] for key in sorted(self._silences) if self._silences[key].expires_at > now]

    def audit(self) -> list[SilenceAudit]:
        return [self._audits[key] for key in sorted(self._audits)]

    def commit(self, silences: list[SilenceRecord], audits: list[SilenceAudit]) -> None:
        keys = {f"{format_time(a.at)}#{a.silence_id}#{a.action}": a for a in audits}
        stale = [s for s in silences if s.version != (getattr(self._silences.get(s.id), "version", None))]
        if stale or keys.keys() & self._audits.keys():
            raise Conflict("the silence was changed by another request")
        for record in silences:
            self._silences[record.id] = replace(record, version=(record.version or 0) + 1)
        self._audits.update(keys)


def memory_storage() -> Storage:
    """An empty storage in memory."""
    trunks = MemoryTrunks()
    return Storage(
        trunks=trunks,
        commits=MemoryCommits(),
        cells=MemoryCells(),
        alerts=MemoryAlerts(trunks),
        ticks=MemoryTicks(trunks),
        shards=MemoryShards(),
        runs=MemoryRuns(),
        logs=MemoryLogs(),
        silences=MemorySilences(),
        reruns=MemoryReruns(),
    )
