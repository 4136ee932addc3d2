"""Ingest: turn a source's snapshot into job cells, writing only what changed (design.md §2).

Each commit item keeps its cells' states as one short string (a code per JobIndex column),
so a poll compares the snapshot against one Query of commit items and writes a cell item
only where a merged state changed. A poll that changed nothing writes nothing.

Write order makes a crash harmless: the tick barrier first, then cells, then commit items
(the record of what is stored), then the source state. A poll cut short is redone by the
next one, which still sees the old commit states and rewrites the same cells.

Cells and commit items expire (DynamoDB TTL) the rule's `retention` after the commit's
time; a commit already that old on a source page is skipped.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

from trunkwatch.domain.cells import ABSENT_CODE, Cell, CellState, Commit, build_cells
from trunkwatch.domain.config import RuleConfig, TrunkConfig
from trunkwatch.sources.base import Source
from trunkwatch.storage.port import Storage, Trunks
from trunkwatch.storage.records import CellWrite, StoredCommit, TrunkState

COMMITS_KEPT = 200  # commit items read back per poll: well over any source window
RECENT_SEQS_KEPT = 20
SCOPE = "trunkwatch_scope"  # kept beside the source's own state: the job scope it was read for
FIRST_SEQ = 1_000_000  # room below for commits that show up older than the first poll's


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


def poll_trunk(
    storage: Storage, trunk: TrunkConfig, rule: RuleConfig, source: Source, now: datetime
) -> PollResult:
    """One poll of one trunk. Raises SourceError before writing anything if the source fails."""
    trunk_id, trunks = trunk.trunk_id, storage.trunks
    old_source_state = trunks.source_state(trunk_id)
    scope = _scope_digest(rule)
    # What the source keeps (ETags, the last page's digest) is only good for the job scope
    # it was stored under: a configuration change polls everything again.
    kept = (
        {key: value for key, value in old_source_state.items() if key != SCOPE}
        if old_source_state.get(SCOPE) == scope
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

    stored_names = trunks.job_names(trunk_id)
    names = list(stored_names)
    known = {c.commit.sha: c for c in storage.commits.newest(trunk_id, COMMITS_KEPT)}
    state = trunks.state(trunk_id)  # one read serves numbering, staleness and source health
    # A commit past the retention horizon is not stored again: its items would be born
    # expired, and its failures are older than any the rule fires on (retention >
    # max_failure_age). So a page still showing commits whose items expired writes nothing.
    retained = [r for r in snapshot.commits if r.commit.time + rule.retention > now]
    seqs = _assign_seqs(
        [r.commit.sha for r in retained],
        {sha: c.seq for sha, c in known.items()},
        max(state.recent_seqs, default=None),
    )

    columns = {name: i for i, name in enumerate(names)}
    commit_writes: list[StoredCommit] = []
    pointers: list[StoredCommit] = []
    cell_writes: list[tuple[Cell, Commit, int]] = []
    for commit_result in retained:
        commit_cells = build_cells(commit_result.commit.sha, commit_result.runs, rule.cancelled)
        for key in sorted(commit_cells):
            if key not in columns:
                columns[key] = len(names)
                names.append(key)
        seq = seqs[commit_result.commit.sha]
        existing = known.get(commit_result.commit.sha)
        old_states = (existing.states if existing else "").ljust(len(names), ABSENT_CODE)
        new_states = _new_states(old_states, commit_cells, columns, commit_result.complete)
        for column, (old, new) in enumerate(zip(old_states, new_states, strict=True)):
            if old != new and rule.in_scope(names[column]):
                cell = commit_cells.get(names[column]) or Cell(
                    job=names[column], sha=commit_result.commit.sha, state=CellState.NODATA
                )
                cell_writes.append((cell, commit_result.commit, seq))
        stored_states = new_states.rstrip(ABSENT_CODE)
        stored = StoredCommit(seq, commit_result.commit, stored_states)
        if (
            existing is None
            or existing.states != stored_states
            or _metadata_changed(existing.commit, commit_result.commit)
        ):
            commit_writes.append(stored)
        if existing is None:
            pointers.append(stored)

    # Job by job: a job's stream records then arrive together, and the evaluator, which judges
    # a job once per batch, reads each changed job about once instead of once per commit.
    cell_writes.sort(key=lambda write: (write[0].job, write[2]))
    if cell_writes:
        result.poll = f"{now.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:8]}"
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
    storage.commits.save_all(trunk_id, commit_writes, rule.retention)
    # Webhook deliveries find the commits by sha.
    storage.commits.save_pointers(trunk_id, pointers, rule.retention)
    result.cells_written = len(cell_writes)
    result.items_written += len(cell_writes) + len(commit_writes) + len(pointers)
    result.changed_jobs = sorted({cell.job for cell, _, _ in cell_writes})

    if names != stored_names:
        trunks.save_job_names(trunk_id, names)
        result.items_written += 1
    result.items_written += _save_recent_seqs(trunks, trunk_id, state, known, commit_writes)
    result.items_written += trunks.record_poll_success(trunk_id, now, state)
    new_source_state = {**snapshot.state, SCOPE: scope}
    if new_source_state != old_source_state:
        trunks.save_source_state(trunk_id, new_source_state)
        result.items_written += 1
    return result


def _scope_digest(rule: RuleConfig) -> str:
    """What decides which cells a page makes: the jobs in scope and how cancelled counts."""
    return hashlib.sha256(repr((rule.include, rule.exclude, rule.cancelled)).encode()).hexdigest()[:16]


def _assign_seqs(
    shas_newest_first: list[str], known: dict[str, int], recent_top: int | None
) -> dict[str, int]:
    """Keep known commits' seqs; number new ones along the branch order. New numbers also
    stay above `recent_top` (the newest seq that had cells, kept in the trunk's state), so
    that once every commit item read back has expired a new commit still never takes the
    seq of expired cells DynamoDB has not deleted yet."""
    seqs = dict(known)
    top = max([*known.values(), *([] if recent_top is None else [recent_top])], default=FIRST_SEQ - 1)
    oldest_first = list(reversed(shas_newest_first))
    first_known = next((i for i, sha in enumerate(oldest_first) if sha in known), None)
    if first_known is None:
        for sha in oldest_first:
            top += 1
            seqs[sha] = top
        return seqs
    bottom = known[oldest_first[first_known]]
    for sha in reversed(oldest_first[:first_known]):
        bottom -= 1
        seqs[sha] = bottom
    for sha in oldest_first[first_known:]:
        if sha not in seqs:
            top += 1
            seqs[sha] = top
    return seqs


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
        codes[columns[key]] = cell.state.code
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
    known: dict[str, StoredCommit],
    written: Iterable[StoredCommit],
) -> int:
    """Keep the seqs of the newest commits that ran any job (staleness window). Items written."""
    states = {c.seq: c.states for c in known.values()}
    states.update({c.seq: c.states for c in written})
    return save_recent_seqs(
        trunks, trunk_id, state, (seq for seq, codes in states.items() if codes.strip(ABSENT_CODE))
    )


def save_recent_seqs(trunks: Trunks, trunk_id: str, state: TrunkState, ran_jobs: Iterable[int]) -> int:
    """Keep the newest RECENT_SEQS_KEPT of `ran_jobs`, the seqs of commits that ran any job
    (the staleness window), unless `state` already holds them. Items written."""
    recent = sorted(set(ran_jobs), reverse=True)[:RECENT_SEQS_KEPT]
    if state.recent_seqs == recent:
        return 0
    trunks.save_recent_seqs(trunk_id, recent)
    return 1
