"""The commit ledger both ingest paths write through (design.md §2): the trunk's job index,
its commit items (placed at a `seq`) and their state strings.

The poll and webhook deliveries run concurrently, so none of these is ever written blind.
Each change is a pure merge (the value stored + what this writer saw -> the new value)
written by compare-and-set, and on a conflict read again and merged again:

- The job index only grows: a writer appends the jobs it lacks on the condition that the
  index is still the one it read. A column, once given to a job, never changes, so a state
  string (one code per column) always decodes to the same jobs.
- A state string changes only from the string read, to the writer's merge of its cells
  onto it (`domain.cells.merge_codes`: a cell's code where it replaces the stored one, a
  result never going back to pending; a complete report makes a stored job it lacks no
  data), the poll's and a delivery's alike (`record_cells`). On a conflict the writer
  merges again onto what is stored now, and first writes the cells that new merge changes
  that it has not written yet, or that another writer wrote since (cells are written
  before the state string that records them, so a crash between the two is redone by the
  next poll or redelivery). So the result is that of the two writers one after the other:
  a job another writer added meanwhile is kept (or made no data by a poll's complete
  report, as if the poll had come second), and where a writer's cell may have landed
  before theirs and still wins the merge, it is written again. A pending cell, which never
  wins over a result, is written only where the cell item holds no result (the stores'
  condition), so it cannot land over another writer's result either.
- A commit is placed (item and by-sha pointer together) only at a free seq and only while its
  pointer, and its parent's when it is linked to it, are still as read.
- The trunk's `recent_seqs` (the staleness window) changes only from the list read, to its
  union with the writer's (a commit that ran a job never stops having run it).

Seq placement keeps branch order whatever order pushes arrive in. A writer places a chain of
commits oldest first (a push's commits after its `before`, the poll's first-parent page).
Each run of new commits is numbered between its nearest placed neighbours on the chain:
- after its placed parent (lo), at the free seqs right above it, as long as they stay below
  its nearest placed descendant (hi);
- else right below hi, which a push delivered ahead of its parent's left: a commit placed
  before its parent records itself as the parent's `child` in the parent's pointer (in the
  same transaction), and is placed GAP above the newest seq, so the parent's push finds the
  bound and the room below it;
- else (nothing placed around it: the first poll, a forced push, a run's head) above the
  newest seq, also above the newest that had cells (the trunk's `recent_seqs`), so a new
  commit never takes the seq of expired cells DynamoDB has not deleted yet.
Every placement is conditional on what it was planned from (seq free, pointers unchanged),
so two writers never plan from different views both successfully: the loser re-reads and
plans again from the winner's result, as if it had run second. Seqs may have gaps; only
their order counts. Order is lost only when more than GAP - 1 commits arrive late below one
placed ahead of them, or for commits no push links (a forced push's head, a run's head
commit delivered before its push): these are numbered as they arrive.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Protocol

from trunkwatch.domain.cells import ABSENT_CODE, Cell, CellState, Commit, changed_columns, merge_codes
from trunkwatch.domain.commits import ShaPointer, StoredCommit
from trunkwatch.domain.config import RuleConfig
from trunkwatch.storage.port import Commits, Storage, Trunks

FIRST_SEQ = 1_000_000  # room below for commits that show up older than the first poll's
GAP = 1_000  # room left below a commit placed before its parent, for the parent's push
RECENT_SEQS_KEPT = 20


def add_jobs(trunks: Trunks, trunk_id: str, names: list[str], jobs: Iterable[str]) -> tuple[list[str], int]:
    """The job index holding every one of `jobs`, starting from `names` as read, and the
    writes that took: the missing ones appended by conditional append, re-read on conflict."""
    wanted = list(dict.fromkeys(jobs))
    writes = 0
    while True:
        missing = [job for job in wanted if job not in names]
        if not missing:
            return names, writes
        if trunks.add_job_names(trunk_id, names, missing):
            return [*names, *missing], writes + 1
        names = trunks.job_names(trunk_id)


@dataclass(frozen=True)
class Seen:
    """What one writer saw of one commit: its cells (by job) onto the commit as it read it.
    `complete`: they are every job of the commit (a stored job missing is no data);
    `commit`: the commit as the writer describes it, named by its cell items and stored
    where its title, author... differ (None: as stored)."""

    read: StoredCommit
    cells: Mapping[str, Cell]
    complete: bool = False
    commit: Commit | None = None

    def cell(self, job: str) -> Cell:
        """The writer's cell of `job` (no data where a complete report lacks it)."""
        return self.cells.get(job) or Cell(job=job, sha=self.read.commit.sha, state=CellState.NODATA)

    @property
    def metadata(self) -> Commit | None:
        """The commit's description to store with its states, where it changed."""
        if self.commit is None or _described(self.read.commit) == _described(self.commit):
            return None
        return self.commit


def _described(commit: Commit) -> tuple[object, ...]:
    return (commit.title, commit.author, commit.pr, commit.url, commit.autoreverted_by)


@dataclass(frozen=True)
class CellChange:
    """A cell item to write on commit `seq`, over the code stored for its job there (`old`)."""

    cell: Cell
    commit: Commit
    seq: int
    old: str


class CellWriter(Protocol):
    """How one writer stores cell items (under a poll's tick, in a delivery group)."""

    def write(self, changes: list[CellChange]) -> None:
        """The cells the writer's merges change, before any state string records them."""

    def rewrite(self, changes: list[CellChange]) -> None:
        """The cells a merge again changes after another writer's state string won."""


def record_cells(
    storage: Storage, trunk_id: str, rule: RuleConfig, names: list[str], seen: list[Seen], writer: CellWriter
) -> list[tuple[StoredCommit, StoredCommit]]:
    """Record what a writer saw of some commits (`names`: a job index with their jobs): the
    cell items their merges change (in scope), through `writer.write`, then each commit's
    state string by compare-and-set, on a conflict merged again after writing the cells
    that changes through `writer.rewrite` (the module docstring). Each commit written: as
    it was just before, and as written."""
    columns = {name: column for column, name in enumerate(names)}
    merges = [_Merge(s, {columns[job]: cell.state for job, cell in s.cells.items()}) for s in seen]
    if any(m(m.seen.read.states) != m.seen.read.states for m in merges):
        writer.write([change for m in merges for change in m.changes(m.seen.read, m.seen.read, names, rule)])
    saved = []
    for merge in merges:

        def rewrite(previous: StoredCommit, fresh: StoredCommit, new: str, merge: _Merge = merge) -> None:
            # Only a complete report changes columns beyond its own cells: maybe new ones.
            wider = merge.seen.complete and len(fresh.states) > len(names)
            writer.rewrite(
                merge.changes(previous, fresh, storage.trunks.job_names(trunk_id) if wider else names, rule)
            )

        done = save_states(storage.commits, trunk_id, merge.seen.read, merge, merge.seen.metadata, rewrite)
        if done is not None:
            saved.append(done)
    return saved


class _Merge:
    """One commit's merge (a writer's cells onto a stored state string), and the codes of
    the cell items written for it."""

    def __init__(self, seen: Seen, cells: dict[int, CellState]) -> None:
        self.seen, self.cells = seen, cells  # the writer's cells by column
        self.written: dict[int, str] = {}  # column -> the code of the cell item written

    def __call__(self, stored: str) -> str:
        return merge_codes(stored, self.cells, self.seen.complete)

    def changes(
        self, before: StoredCommit, stored: StoredCommit, names: list[str], rule: RuleConfig
    ) -> list[CellChange]:
        """The cell items (in scope) to write for the merge onto `stored`, read first as
        `before`: where it changes a code that the item written does not say yet, or that
        another writer may have written over (the column changed since `before`). The
        writer's cells in their order, then the jobs a complete report makes no data."""
        merged = self(stored.states)
        width = max(len(before.states), len(stored.states), len(merged))
        was, now = before.states.ljust(width, ABSENT_CODE), stored.states.ljust(width, ABSENT_CODE)
        changed = set(changed_columns(stored.states, merged))
        ordered = [*(c for c in self.cells if c in changed), *sorted(changed - self.cells.keys())]
        found = []
        for column in ordered:
            job = names[column]
            if rule.in_scope(job) and (
                self.written.get(column) != merged[column] or was[column] != now[column]
            ):
                found.append(
                    CellChange(
                        self.seen.cell(job), self.seen.commit or stored.commit, stored.seq, now[column]
                    )
                )
                self.written[column] = merged[column]
        return found


def save_states(
    commits: Commits,
    trunk_id: str,
    read: StoredCommit,
    merge: Callable[[str], str],
    metadata: Commit | None = None,
    before_retry: Callable[[StoredCommit, StoredCommit, str], None] | None = None,
) -> tuple[StoredCommit, StoredCommit] | None:
    """Write `merge(states)` (and `metadata`) onto the commit `read` by compare-and-set; on a
    conflict read it again and merge again, then call `before_retry(previous, fresh, new)`
    before writing (or finding nothing to write): the writer rewrites the cells whose codes
    that changes. The commit as it was just before the write and as written, or None when
    nothing was written (it already said so, or it expired)."""
    previous, stored = read, read
    while True:
        new = merge(stored.states)
        if stored is not read and before_retry is not None:
            before_retry(previous, stored, new)
        if new == stored.states and metadata is None:
            return None
        if commits.save_states(trunk_id, stored.seq, stored.states, new, metadata):
            return stored, StoredCommit(stored.seq, metadata or stored.commit, new)
        fresh = commits.get(trunk_id, stored.seq)
        if fresh is None:
            return None
        previous, stored = stored, fresh


def save_recent_seqs(trunks: Trunks, trunk_id: str, read: list[int], ran_jobs: Iterable[int]) -> int:
    """Add `ran_jobs`, seqs of commits that ran any job, to the trunk's newest
    RECENT_SEQS_KEPT such seqs (the staleness window), `read` as read, by compare-and-set.
    A commit that ran a job keeps its codes, so the merge is a union: on a conflict, the
    seqs another writer added stay. Items written."""
    mine, stored = set(ran_jobs), read
    while True:
        recent = sorted(mine | set(stored), reverse=True)[:RECENT_SEQS_KEPT]
        if recent == stored:
            return 0
        if trunks.save_recent_seqs(trunk_id, stored, recent):
            return 1
        stored = trunks.state(trunk_id, consistent=True).recent_seqs


def place_chain(
    storage: Storage,
    trunk_id: str,
    chain: list[Commit],
    parent: str | None,
    retention: timedelta,
    known: Mapping[str, int],
    taken: Iterable[int],
) -> tuple[dict[str, int], list[str]]:
    """Place the commits of `chain` (oldest first, each the first parent of the next;
    `parent` that of the first, if known) not placed yet. `known` are the seqs of commits
    already read by sha, `taken` other seqs read in use (the newest commit, `recent_seqs`).
    Every commit's seq, and the shas this call placed."""
    commits = storage.commits
    used = {*known.values(), *taken}
    top = max(used, default=FIRST_SEQ - 1)
    placed: list[str] = []
    while True:
        unread = [sha for sha in [parent, *(c.sha for c in chain)] if sha is not None and sha not in known]
        pointers = {sha: ShaPointer(seq) for sha, seq in known.items()}
        pointers.update(commits.pointers(trunk_id, unread) if unread else {})
        plan = plan_seqs([c.sha for c in chain], parent, pointers, used, top)
        for previous, commit in zip([parent, *(c.sha for c in chain)], chain, strict=False):
            if commit.sha not in plan:
                continue
            seq, seen = plan[commit.sha], pointers.get(commit.sha)
            link = None
            before = pointers.get(previous) if previous is not None else None
            if previous is not None and (before is None or (before.seq is None and before.child is None)):
                link = (previous, before)  # placed before its parent: the parent's bound
            if not commits.place(trunk_id, StoredCommit(seq, commit), retention, seen, link):
                if commits.get(trunk_id, seq) is not None:
                    used.add(seq)
                break
            placed.append(commit.sha)
            pointers[commit.sha] = ShaPointer(seq, seen.child if seen is not None else None)
            if link is not None:
                pointers[link[0]] = ShaPointer(child=seq)
        else:
            seqs = {sha: p.seq for sha, p in pointers.items() if p.seq is not None}
            return {c.sha: seqs[c.sha] for c in chain}, placed


def plan_seqs(
    chain: list[str], parent: str | None, pointers: Mapping[str, ShaPointer], taken: set[int], top: int
) -> dict[str, int]:
    """Seqs for the unplaced commits of `chain` (oldest first), as the module docstring says."""
    used = taken | {p.seq for p in pointers.values() if p.seq is not None}
    top = max([top, *used])
    plan: dict[str, int] = {}

    def seq_of(sha: str | None) -> int | None:
        pointer = pointers.get(sha) if sha is not None else None
        return pointer.seq if pointer is not None else None

    start = 0
    while start < len(chain):
        if seq_of(chain[start]) is not None:
            start += 1
            continue
        end = start
        while end < len(chain) and seq_of(chain[end]) is None:
            end += 1
        lo = seq_of(chain[start - 1] if start else parent)
        last = pointers.get(chain[end - 1])
        hi = seq_of(chain[end]) if end < len(chain) else (last.child if last is not None else None)
        linked = start == 0 and parent is not None and lo is None
        seqs = _fit(end - start, lo, hi, used, top, GAP if linked else 1)
        plan.update(zip(chain[start:end], seqs, strict=True))
        used.update(seqs)
        top = max(top, *seqs)
        start = end
    return plan


def _fit(count: int, lo: int | None, hi: int | None, used: set[int], top: int, above_top: int) -> list[int]:
    if lo is not None:
        seqs = _free(lo + 1, 1, count, used)
        if hi is None or seqs[-1] < hi:
            return seqs
        # No room left between parent and child: order cannot be kept, number as it arrives.
    elif hi is not None:
        return sorted(_free(hi - 1, -1, count, used))
    return _free(top + above_top, 1, count, used)


def _free(start: int, step: int, count: int, used: set[int]) -> list[int]:
    found: list[int] = []
    seq = start
    while len(found) < count:
        if seq not in used:
            found.append(seq)
        seq += step
    return found
