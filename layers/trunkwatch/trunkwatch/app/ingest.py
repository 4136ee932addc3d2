"""Ingest: turn a source's snapshot into job cells, writing only what changed (design.md §2).

Each commit item keeps its cells' states as one short string (a code per JobIndex column),
so a poll compares the snapshot against one Query of commit items and writes a cell item
only where a merged state changed. A poll that changed nothing writes nothing. The job
index, new commits and state strings are written through the ledger webhook deliveries
share (`ledger.py`): conditional appends, placements and compare-and-sets, never blind.

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
from dataclasses import dataclass, field, replace
from datetime import datetime

from trunkwatch.app import ledger
from trunkwatch.app.confirm import RequestRerun, advance_reruns, requests_waiting
from trunkwatch.domain.cells import ABSENT_CODE, Cell, CellState, Commit, build_cells, replaces
from trunkwatch.domain.config import RuleConfig, TrunkConfig
from trunkwatch.sources.base import CommitResult, Source
from trunkwatch.storage.port import Storage, Trunks
from trunkwatch.storage.records import CellWrite, StoredCommit, TrunkState

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
    reruns_requested: int = 0  # reruns GitHub accepted (`confirm: rerun`)


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
    # What the source keeps (ETags, the last page's digest) is only good for the job scope
    # it was stored under: a configuration change polls everything again.
    kept = (
        {key: value for key, value in old_source_state.items() if key != SCOPE}
        if old_source_state.get(SCOPE) == scope and not waiting
        else {}
    )
    snapshot = source.poll(kept, now)
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

    names = trunks.job_names(trunk_id)
    known = {c.commit.sha: c for c in storage.commits.newest(trunk_id, COMMITS_KEPT)}
    state = trunks.state(trunk_id)  # one read serves numbering, staleness and source health
    # A commit past the retention horizon is not stored again: its items would be born
    # expired, and its failures are older than any the rule fires on (retention >
    # max_failure_age). So a page still showing commits whose items expired writes nothing.
    retained = [r for r in snapshot.commits if r.commit.time + rule.retention > now]
    built = {r.commit.sha: build_cells(r.commit.sha, r.runs, rule.cancelled) for r in retained}
    names, appended = ledger.add_jobs(
        trunks, trunk_id, names, (key for r in retained for key in sorted(built[r.commit.sha]))
    )
    result.items_written += appended
    columns = {name: i for i, name in enumerate(names)}
    # New commits are placed first, empty (no cell stored yet), so their cells have a seq.
    seqs, placed = ledger.place_chain(
        storage,
        trunk_id,
        [r.commit for r in reversed(retained)],
        None,
        rule.retention,
        {sha: c.seq for sha, c in known.items()},
        state.recent_seqs,
    )
    result.items_written += 2 * len(placed)  # an item and its pointer each

    merges: list[_Merge] = []
    cell_writes: list[tuple[Cell, Commit, int]] = []
    for commit_result in retained:
        sha, seq = commit_result.commit.sha, seqs[commit_result.commit.sha]
        existing = _stored(storage, trunk_id, commit_result.commit, seq, known, placed)
        if existing is None:
            continue  # expired since it was placed
        merge = _Merge(commit_result, existing, built[sha], columns)
        new_states = merge(existing.states).ljust(len(names), ABSENT_CODE)
        for column in _changed(existing.states, new_states):
            if rule.in_scope(names[column]):
                cell_writes.append((merge.cell(names[column]), commit_result.commit, seq))
                merge.written[column] = new_states[column]
        merges.append(merge)

    # Job by job: a job's stream records then arrive together, and the evaluator, which judges
    # a job once per batch, reads each changed job about once instead of once per commit.
    cell_writes.sort(key=lambda write: (write[0].job, write[2]))
    if cell_writes:
        result.poll = _poll_id(now)
        storage.ticks.open_poll(trunk_id, result.poll, len(cell_writes), now)
        result.items_written += 2
    prior = _newest_seqs(known.values(), columns, {cell.job for cell, _, _ in cell_writes})
    storage.cells.save_all(
        trunk_id,
        (
            CellWrite(cell, commit, seq, result.poll or "", prior.get(cell.job))
            for cell, commit, seq in cell_writes
        ),
        rule.retention,
    )
    result.cells_written = len(cell_writes)
    result.items_written += len(cell_writes)
    changed_jobs = {cell.job for cell, _, _ in cell_writes}
    # The commits' states last: they record what is stored.
    written = []
    for merge in merges:
        metadata = merge.result.commit if _metadata_changed(merge.read.commit, merge.result.commit) else None

        def rewrite(previous: StoredCommit, fresh: StoredCommit, new: str, merge: _Merge = merge) -> None:
            extra = _rewrite_cells(storage, trunk_id, rule, merge, previous, fresh, new, now)
            result.cells_written += len(extra)
            result.items_written += len(extra) + (2 if extra else 0)
            changed_jobs.update(extra)

        saved = ledger.save_states(storage.commits, trunk_id, merge.read, merge, metadata, rewrite)
        if saved is not None:
            written.append(saved[1])
    result.items_written += len(written)
    result.changed_jobs = sorted(changed_jobs)
    read = [*known.values(), *(merge.read for merge in merges)]

    result.items_written += _save_recent_seqs(trunks, trunk_id, state, read, written)
    result.items_written += trunks.record_poll_success(trunk_id, now, state)
    new_source_state = {**snapshot.state, SCOPE: scope}
    if new_source_state != old_source_state:
        trunks.save_source_state(trunk_id, new_source_state)
        result.items_written += 1
    return result


def _scope_digest(rule: RuleConfig) -> str:
    """What decides which cells a page makes: the jobs in scope and how cancelled counts."""
    return hashlib.sha256(repr((rule.include, rule.exclude, rule.cancelled)).encode()).hexdigest()[:16]


class _Merge:
    """One commit's merge in a poll: the snapshot's cells onto a stored state string (the
    poll's side of `ledger.save_states`), and the cells the poll wrote for it."""

    def __init__(
        self, result: CommitResult, read: StoredCommit, cells: dict[str, Cell], columns: dict[str, int]
    ) -> None:
        self.result, self.read, self.cells, self.columns = result, read, cells, columns
        self.written: dict[int, str] = {}  # column -> the code of the cell this poll wrote

    def __call__(self, stored: str) -> str:
        width = max(len(stored), len(self.columns))
        merged = _new_states(stored.ljust(width, ABSENT_CODE), self.cells, self.columns, self.result.complete)
        return merged.rstrip(ABSENT_CODE)

    def cell(self, job: str) -> Cell:
        return self.cells.get(job) or Cell(job=job, sha=self.result.commit.sha, state=CellState.NODATA)


def _rewrite_cells(
    storage: Storage,
    trunk_id: str,
    rule: RuleConfig,
    merge: _Merge,
    previous: StoredCommit,
    fresh: StoredCommit,
    new: str,
    now: datetime,
) -> list[str]:
    """Another writer changed the commit since the poll read it: write the cells the merge
    onto its states changes that the poll has not written, or that the other writer may
    have written over (its column changed since `previous`), under a tick of their own.
    The jobs written."""
    width = max(len(new), len(fresh.states), len(previous.states))
    before, stored, merged = (s.ljust(width, ABSENT_CODE) for s in (previous.states, fresh.states, new))
    changed = _changed(stored, merged)
    if not changed:
        return []
    names = storage.trunks.job_names(trunk_id)  # a column another writer added may be new
    writes = []
    for column in changed:
        if rule.in_scope(names[column]) and (
            merge.written.get(column) != merged[column] or before[column] != stored[column]
        ):
            writes.append(CellWrite(merge.cell(names[column]), merge.result.commit, fresh.seq, ""))
            merge.written[column] = merged[column]
    if writes:
        poll = _poll_id(now)
        storage.ticks.open_poll(trunk_id, poll, len(writes), now)
        storage.cells.save_all(trunk_id, [replace(w, poll=poll) for w in writes], rule.retention)
    return [write.cell.job for write in writes]


def _changed(old: str, new: str) -> list[int]:
    """The columns whose code differs (absent past a string's end)."""
    width = max(len(old), len(new))
    return [
        column
        for column, (a, b) in enumerate(
            zip(old.ljust(width, ABSENT_CODE), new.ljust(width, ABSENT_CODE), strict=True)
        )
        if a != b
    ]


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


def _metadata_changed(stored: Commit, commit: Commit) -> bool:
    return (stored.title, stored.author, stored.pr, stored.url, stored.autoreverted_by) != (
        commit.title,
        commit.author,
        commit.pr,
        commit.url,
        commit.autoreverted_by,
    )


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


def _new_states(old: str, cells: dict[str, Cell], columns: dict[str, int], complete: bool) -> str:
    codes = [ABSENT_CODE if complete else code for code in old]
    for key, cell in cells.items():
        column = columns[key]
        # As for a delivery: a result never goes back to pending (a retry running keeps the
        # result it retries until its own comes).
        codes[column] = cell.state.code if replaces(old[column], cell.state) else old[column]
    if complete:
        # A cell that disappears from a complete report is no longer data for the rule.
        for column, code in enumerate(old):
            if code != ABSENT_CODE and codes[column] == ABSENT_CODE:
                codes[column] = CellState.NODATA.code
    return "".join(codes)


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
