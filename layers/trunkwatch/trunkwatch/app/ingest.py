"""Ingest: turn a source's snapshot into job cells, writing only what changed (design.md §2).

Each commit item keeps its cells' states as one short string (a code per JobIndex column),
so a poll compares the snapshot against one Query of commit items and writes a cell item
only where a merged state changed. A poll that changed nothing writes nothing. A poll is
a plan of its snapshot, decided from the snapshot alone (`plan_poll`: the commits kept and
their cells), then applied: the job index, new commits, cells and state strings written
through the ledger webhook deliveries share (`ledger.py`, `record_cells`): conditional
appends, placements and compare-and-sets, never blind.

Write order makes a crash harmless: new job columns and new commits (placed empty: no cell
stored yet) first, then the tick barrier, then cells, then the commits' state strings (the
record of what is stored), then the source state. A poll cut short is redone by the next
one, which still sees the old commit states and rewrites the same cells.

Cells and commit items expire (DynamoDB TTL) the rule's `retention` after the commit's
time; a commit already that old on a source page is skipped.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from trunkwatch.app import ledger
from trunkwatch.app.confirm import RequestRerun, advance_reruns, requests_waiting
from trunkwatch.domain.cells import ABSENT_CODE, Cell, CellWrite, Commit, build_cells
from trunkwatch.domain.commits import StoredCommit
from trunkwatch.domain.config import RuleConfig, TrunkConfig
from trunkwatch.domain.trunk_state import TrunkState
from trunkwatch.sources.base import CommitRuns, Snapshot, Source
from trunkwatch.storage.port import Storage, Trunks

COMMITS_KEPT = 200  # commit items read back per poll: well over any source window
SCOPE = "trunkwatch_scope"  # kept beside the source's own state: the job scope it was read for


@dataclass
class PollResult:
    trunk: str
    poll: str | None = None
    cells_written: int = 0
    items_written: int = 0
    http_requests: int = 0
    commits: int = 0
    changed_jobs: list[str] = field(default_factory=list)
    rate_limited: str | None = None  # the source stopped early; the rest follows next poll
    reruns_requested: int = 0  # reruns the CI accepted (`confirm: rerun`)


def poll_trunk(
    storage: Storage,
    trunk: TrunkConfig,
    rule: RuleConfig,
    source: Source,
    now: datetime,
    request_rerun: RequestRerun | None = None,
) -> PollResult:
    """One poll of one trunk. Raises SourceError before writing anything if the source fails.
    With `confirm: rerun` (and `request_rerun`), the snapshot first advances the trunk's
    reruns (`confirm.advance_reruns`), so the cells it writes are judged with their results."""
    trunk_id, trunks = trunk.trunk_id, storage.trunks
    old_source_state = trunks.source_state(trunk_id)
    scope = _scope_digest(rule)
    # A rerun request waiting for the job ids reads the page even if it is unchanged.
    waiting = (
        rule.confirms
        and request_rerun is not None
        and requests_waiting(storage, trunk_id, trunks.state(trunk_id).last_poll_ok_at, now)
    )
    snapshot = source.poll(_kept_source_state(old_source_state, scope, waiting), now)
    result = PollResult(
        trunk=trunk_id,
        http_requests=snapshot.http_requests,
        commits=len(snapshot.commits),
        rate_limited=str(snapshot.rate_limited) if snapshot.rate_limited else None,
    )
    if snapshot.unchanged:
        result.items_written += trunks.record_poll_success(trunk_id, now, trunks.state(trunk_id))
        return result
    if rule.confirms and request_rerun is not None:
        result.reruns_requested = advance_reruns(storage, trunk, rule, snapshot.commits, request_rerun, now)
    _apply(storage, trunk_id, rule, plan_poll(snapshot, rule, now), now, result)
    new_source_state = {**snapshot.state, SCOPE: scope}
    if new_source_state != old_source_state:
        trunks.save_source_state(trunk_id, new_source_state)
        result.items_written += 1
    return result


def _kept_source_state(stored: dict[str, Any], scope: str, waiting: bool) -> dict[str, Any]:
    """What the source gets back of what it kept (ETags, the last page's digest): only what
    it stored under the same job scope (a configuration change polls everything again),
    and nothing while a rerun request waits for the page."""
    if stored.get(SCOPE) != scope or waiting:
        return {}
    return {key: value for key, value in stored.items() if key != SCOPE}


@dataclass(frozen=True)
class PollPlan:
    """What a snapshot asks of the ledger: the commits to store (newest first) and their
    cells (by sha, by job)."""

    commits: list[CommitRuns]
    cells: dict[str, dict[str, Cell]]

    @property
    def jobs(self) -> list[str]:
        """The job columns the cells need, commit by commit."""
        return [job for r in self.commits for job in sorted(self.cells[r.commit.sha])]

    @property
    def chain(self) -> list[Commit]:
        """The commits to place, oldest first."""
        return [r.commit for r in reversed(self.commits)]


def plan_poll(snapshot: Snapshot, rule: RuleConfig, now: datetime) -> PollPlan:
    """The plan of a snapshot. A commit past the retention horizon is not stored again: its
    items would be born expired, and its failures are older than any the rule fires on
    (retention > max_failure_age). So a page still showing commits whose items expired
    writes nothing."""
    retained = [r for r in snapshot.commits if r.commit.time + rule.retention > now]
    return PollPlan(
        retained, {r.commit.sha: build_cells(r.commit.sha, r.runs, rule.cancelled) for r in retained}
    )


def _apply(
    storage: Storage, trunk_id: str, rule: RuleConfig, plan: PollPlan, now: datetime, result: PollResult
) -> None:
    """Write `plan` through the ledger in the module docstring's order, counting into `result`."""
    trunks = storage.trunks
    names = trunks.job_names(trunk_id)
    known = {c.commit.sha: c for c in storage.commits.newest(trunk_id, COMMITS_KEPT)}
    state = trunks.state(trunk_id)  # one read serves numbering, staleness and source health
    names, appended = ledger.add_jobs(trunks, trunk_id, names, plan.jobs)
    # New commits are placed first, empty (no cell stored yet), so their cells have a seq.
    known_seqs = {sha: c.seq for sha, c in known.items()}
    seqs, placed = ledger.place_chain(
        storage, trunk_id, plan.chain, None, rule.retention, known_seqs, state.recent_seqs
    )
    result.items_written += appended + 2 * len(placed)  # a placed commit's item and its pointer
    seen = []
    for r in plan.commits:
        stored = _stored(storage, trunk_id, r.commit, seqs[r.commit.sha], known, placed)
        if stored is not None:  # else it expired since it was placed
            seen.append(ledger.Seen(stored, plan.cells[r.commit.sha], r.complete, r.commit))
    cells = _PollCells(storage, trunk_id, rule, now, list(known.values()), names)
    saved = ledger.record_cells(storage, trunk_id, rule, names, seen, cells)
    result.poll, result.cells_written, result.changed_jobs = cells.poll, cells.written, sorted(cells.jobs)
    result.items_written += cells.items_written + len(saved)
    read = [*known.values(), *(s.read for s in seen)]
    result.items_written += _save_recent_seqs(trunks, trunk_id, state, read, [new for _, new in saved])
    result.items_written += trunks.record_poll_success(trunk_id, now, state)


class _PollCells:
    """The poll's cell items (`ledger.CellWriter`): those its merges change under one tick
    for the poll, job by job (a job's stream records then arrive together, and the
    evaluator, which judges a job once per batch, reads each changed job about once instead
    of once per commit); those a conflict makes it write again under a tick each."""

    def __init__(
        self,
        storage: Storage,
        trunk_id: str,
        rule: RuleConfig,
        now: datetime,
        known: list[StoredCommit],  # the commits read back before the poll's writes
        names: list[str],
    ) -> None:
        self.storage, self.trunk_id, self.rule, self.now = storage, trunk_id, rule, now
        self.known, self.columns = known, {name: column for column, name in enumerate(names)}
        self.poll: str | None = None
        self.written = self.items_written = 0
        self.jobs: set[str] = set()

    def write(self, changes: list[ledger.CellChange]) -> None:
        changes = sorted(changes, key=lambda change: (change.cell.job, change.seq))
        prior = _newest_seqs(self.known, self.columns, {change.cell.job for change in changes})
        self.poll = self._save(changes, prior)

    def rewrite(self, changes: list[ledger.CellChange]) -> None:
        self._save(changes, {})

    def _save(self, changes: list[ledger.CellChange], prior: dict[str, int]) -> str | None:
        """The cells under a tick of their own (none without cells); the tick."""
        if not changes:
            return None
        poll = _poll_id(self.now)
        self.storage.ticks.open_poll(self.trunk_id, poll, len(changes), self.now)
        writes = [CellWrite(c.cell, c.commit, c.seq, poll, prior.get(c.cell.job)) for c in changes]
        self.storage.cells.save_all(self.trunk_id, writes, self.rule.retention)
        self.written += len(changes)
        self.items_written += len(changes) + 2  # and the tick
        self.jobs.update(change.cell.job for change in changes)
        return poll


def _scope_digest(rule: RuleConfig) -> str:
    """What decides which cells a page makes: the jobs in scope and how cancelled counts."""
    return hashlib.sha256(repr((rule.include, rule.exclude, rule.cancelled)).encode()).hexdigest()[:16]


def _poll_id(now: datetime) -> str:
    return f"{now.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:8]}"


def _stored(
    storage: Storage,
    trunk_id: str,
    commit: Commit,
    seq: int,
    known: dict[str, StoredCommit],
    placed: list[str],
) -> StoredCommit | None:
    """The commit as stored before this poll's changes: as read, as just placed, or, placed
    by another writer since the read, read now."""
    if commit.sha in known:
        return known[commit.sha]
    if commit.sha in placed:
        return StoredCommit(seq, commit)
    return storage.commits.get(trunk_id, seq)


def _newest_seqs(known: Iterable[StoredCommit], columns: dict[str, int], jobs: set[str]) -> dict[str, int]:
    """Each of `jobs`' newest stored cell among the commits read back (before this poll)."""
    newest_first = sorted(known, key=lambda commit: commit.seq, reverse=True)
    found: dict[str, int] = {}
    for job in jobs:
        column = columns[job]
        seq = next(
            (c.seq for c in newest_first if column < len(c.states) and c.states[column] != ABSENT_CODE),
            None,
        )
        if seq is not None:
            found[job] = seq
    return found


def _save_recent_seqs(
    trunks: Trunks,
    trunk_id: str,
    state: TrunkState,
    read: Iterable[StoredCommit],
    written: Iterable[StoredCommit],
) -> int:
    """Keep the seqs of the newest commits that ran any job (staleness window). Items written."""
    states = {c.seq: c.states for c in read}
    states.update({c.seq: c.states for c in written})
    ran_jobs = (seq for seq, codes in states.items() if codes.strip(ABSENT_CODE))
    return ledger.save_recent_seqs(trunks, trunk_id, state.recent_seqs, ran_jobs)
