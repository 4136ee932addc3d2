"""Ingest: turn a source's snapshot into job cells, writing only what changed (SPEC 2).

Each commit item keeps its cells' states as one short string (a code per JobIndex column),
so a poll compares the snapshot against one Query of commit items and writes a cell item
only where a merged state changed. A poll that changed nothing writes nothing.

Write order makes a crash harmless: the tick barrier first, then cells, then commit items
(the record of what is stored), then the source state. A poll cut short is redone by the
next one, which still sees the old commit states and rewrites the same cells.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Protocol

from pynamodb.exceptions import DoesNotExist

from trunkwatch.domain.cells import ABSENT_CODE, Cell, CellState, build_cells
from trunkwatch.domain.config import RuleConfig, TrunkConfig
from trunkwatch.sources.base import CommitResult, Snapshot
from trunkwatch.sources.http import HttpClient
from trunkwatch.storage.items import CellItem, CommitItem, JobIndex, SourceState, TickItem, TrunkState
from trunkwatch.storage.table import seq_key, trunk_pk

COMMITS_KEPT = 200  # commit items read back per poll: well over any source window
RECENT_SEQS_KEPT = 20
FIRST_SEQ = 1_000_000  # room below for commits that show up older than the first poll's
TICK_TTL = timedelta(days=2)


class Source(Protocol):
    def poll(self, state: dict[str, Any], now: datetime) -> Snapshot: ...


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


def poll_trunk(trunk: TrunkConfig, rule: RuleConfig, source: Source, now: datetime) -> PollResult:
    """One poll of one trunk. Raises SourceError before writing anything if the source fails."""
    pk = trunk_pk(trunk.trunk_id)
    source_item = _get(SourceState, pk, "SOURCE")
    old_source_state = (source_item.state if source_item else None) or {}
    snapshot = source.poll(dict(old_source_state), now)
    result = PollResult(
        trunk=trunk.trunk_id,
        http_requests=snapshot.http_requests,
        commits=len(snapshot.commits),
        rate_limited=str(snapshot.rate_limited) if snapshot.rate_limited else None,
    )

    index_item = _get(JobIndex, pk, "JOBS") or JobIndex(pk, "JOBS")
    names = list(index_item.names or [])
    known = {
        c.sha: c
        for c in CommitItem.query(
            pk, CommitItem.sk.startswith("COMMIT#"), scan_index_forward=False, limit=COMMITS_KEPT
        )
    }
    seqs = _assign_seqs(
        [r.commit.sha for r in snapshot.commits], {sha: int(c.seq) for sha, c in known.items()}
    )

    columns = {name: i for i, name in enumerate(names)}
    commit_writes: list[CommitItem] = []
    cell_writes: list[tuple[Cell, CommitResult, int]] = []
    for commit_result in snapshot.commits:
        cells = build_cells(commit_result.commit.sha, commit_result.runs, rule.cancelled)
        for key in sorted(cells):
            if key not in columns:
                columns[key] = len(names)
                names.append(key)
        seq = seqs[commit_result.commit.sha]
        existing = known.get(commit_result.commit.sha)
        old_states = (existing.states if existing else "").ljust(len(names), ABSENT_CODE)
        new_states = _new_states(old_states, cells, columns, commit_result.complete)
        for column, (old, new) in enumerate(zip(old_states, new_states, strict=True)):
            if old != new and rule.in_scope(names[column]):
                cell = cells.get(names[column]) or Cell(
                    job=names[column], sha=commit_result.commit.sha, state=CellState.NODATA
                )
                cell_writes.append((cell, commit_result, seq))
        if (
            existing is None
            or existing.states != new_states.rstrip(ABSENT_CODE)
            or _metadata_changed(existing, commit_result)
        ):
            commit_writes.append(_commit_item(pk, seq, commit_result, new_states.rstrip(ABSENT_CODE)))

    if cell_writes:
        result.poll = f"{now.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:8]}"
        _open_tick(pk, result.poll, len(cell_writes), now)
        result.items_written += 2
    with CellItem.batch_write() as batch:
        for cell, commit_result, seq in cell_writes:
            batch.save(_cell_item(pk, cell, commit_result, seq, result.poll or ""))
    with CommitItem.batch_write() as batch:
        for item in commit_writes:
            batch.save(item)
    result.cells_written = len(cell_writes)
    result.items_written += len(cell_writes) + len(commit_writes)
    result.changed_jobs = sorted({cell.job for cell, _, _ in cell_writes})

    if names != list(index_item.names or []):
        index_item.names = names
        index_item.save()
        result.items_written += 1
    result.items_written += _save_recent_seqs(pk, known, commit_writes)
    if snapshot.state != old_source_state:
        SourceState(pk, "SOURCE", state=snapshot.state).save()
        result.items_written += 1
    return result


def _get(model: Any, pk: str, sk: str) -> Any:
    try:
        return model.get(pk, sk)
    except DoesNotExist:
        return None


def _assign_seqs(shas_newest_first: list[str], known: dict[str, int]) -> dict[str, int]:
    """Keep known commits' seqs; number new ones along the branch order."""
    seqs = dict(known)
    oldest_first = list(reversed(shas_newest_first))
    first_known = next((i for i, sha in enumerate(oldest_first) if sha in known), None)
    if first_known is None:
        top = max(known.values(), default=FIRST_SEQ - 1)
        for sha in oldest_first:
            top += 1
            seqs[sha] = top
        return seqs
    bottom = known[oldest_first[first_known]]
    for sha in reversed(oldest_first[:first_known]):
        bottom -= 1
        seqs[sha] = bottom
    top = max(known.values())
    for sha in oldest_first[first_known:]:
        if sha not in seqs:
            top += 1
            seqs[sha] = top
    return seqs


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


def _metadata_changed(item: CommitItem, result: CommitResult) -> bool:
    commit = result.commit
    return (item.title, item.author, item.pr, item.url) != (
        commit.title,
        commit.author,
        commit.pr,
        commit.url,
    )


def _commit_item(pk: str, seq: int, result: CommitResult, states: str) -> CommitItem:
    commit = result.commit
    return CommitItem(
        pk,
        f"COMMIT#{seq_key(seq)}",
        seq=seq,
        sha=commit.sha,
        time=commit.time,
        title=commit.title,
        author=commit.author,
        pr=commit.pr,
        url=commit.url,
        states=states,
    )


def _cell_item(pk: str, cell: Cell, result: CommitResult, seq: int, poll: str) -> CellItem:
    commit = result.commit
    return CellItem(
        pk,
        f"CELL#{cell.job}#{seq_key(seq)}",
        job=cell.job,
        seq=seq,
        sha=cell.sha,
        state=cell.state.value,
        poll=poll,
        url=cell.url,
        attempt=cell.attempt,
        failure_lines=list(cell.failure_lines) or None,
        commit_time=commit.time,
        title=commit.title[:200],
        author=commit.author,
        pr=commit.pr,
        commit_url=commit.url,
    )


def _open_tick(pk: str, poll: str, expected: int, now: datetime) -> None:
    TickItem(pk, f"TICK#{poll}", poll=poll, expected=expected, at=now, expires_at=now + TICK_TTL).save()
    TrunkState.upsert(pk, "STATE", [TrunkState.open_poll.set(poll), TrunkState.open_poll_at.set(now)])


def _save_recent_seqs(pk: str, known: dict[str, CommitItem], written: Iterable[CommitItem]) -> int:
    """Keep the seqs of the newest commits that ran any job (staleness window). Items written."""
    commits = {int(c.seq): c.states for c in known.values()}
    commits.update({int(c.seq): c.states for c in written})
    recent = sorted((seq for seq, states in commits.items() if states.strip(ABSENT_CODE)), reverse=True)[
        :RECENT_SEQS_KEPT
    ]
    state = _get(TrunkState, pk, "STATE")
    if state is not None and list(state.recent_seqs or []) == recent:
        return 0
    TrunkState.upsert(pk, "STATE", [TrunkState.recent_seqs.set(recent)])
    return 1


def make_source(trunk: TrunkConfig, http: HttpClient | None = None) -> Source:
    from trunkwatch.sources.credentials import resolve_token
    from trunkwatch.sources.github import GitHubSource
    from trunkwatch.sources.hud import HudSource

    token = resolve_token(trunk.token)
    if trunk.source == "github":
        return GitHubSource(trunk, token, http, window=trunk.per_page)
    return HudSource(trunk, token, http)
