"""The commit ledger both ingest paths write through (design.md §2): the trunk's job index,
its commit items (placed at a `seq`) and their state strings.

The poll and webhook deliveries run concurrently, so none of these is ever written blind.
Each change is a pure merge (the value stored + what this writer saw -> the new value)
written by compare-and-set, and on a conflict read again and merged again:

- The job index only grows: a writer appends the jobs it lacks on the condition that the
  index is still the one it read. A column, once given to a job, never changes, so a state
  string (one code per column) always decodes to the same jobs.
- A state string changes only from the string read, to the writer's merge of it (the poll:
  its snapshot's cells onto the stored codes; a delivery: its one cell, a result). On a
  conflict the writer merges again onto what is stored now, and first writes the cells
  that new merge changes that it has not written yet, or that another writer wrote since
  (cells are written before the state string that records them, so a crash between the
  two is redone by the next poll or redelivery). So the cell
  items and the state string agree, and the result is that of the two writers one after
  the other: a job another writer added meanwhile is kept (or made no data by a poll's
  complete report, as if the poll had come second). A delivery writes only results (never
  pending), and a result always replaces what another writer stored on the column, so a
  delivery's merge never loses: where its cell may have landed before theirs, it is
  written again, so the two still agree.
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
from datetime import timedelta

from trunkwatch.domain.cells import ABSENT_CODE, Commit
from trunkwatch.storage.port import Commits, Storage, Trunks
from trunkwatch.storage.records import Pointer, StoredCommit

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


def merge_states(stored: str, changes: Mapping[int, str]) -> str:
    """`stored` with this writer's `changes` (column -> code) applied."""
    width = max([len(stored), *(column + 1 for column in changes)])
    codes = list(stored.ljust(width, ABSENT_CODE))
    for column, code in changes.items():
        codes[column] = code
    return "".join(codes).rstrip(ABSENT_CODE)


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
        pointers = {sha: Pointer(seq) for sha, seq in known.items()}
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
            pointers[commit.sha] = Pointer(seq, seen.child if seen is not None else None)
            if link is not None:
                pointers[link[0]] = Pointer(child=seq)
        else:
            seqs = {sha: p.seq for sha, p in pointers.items() if p.seq is not None}
            return {c.sha: seqs[c.sha] for c in chain}, placed


def plan_seqs(
    chain: list[str], parent: str | None, pointers: Mapping[str, Pointer], taken: set[int], top: int
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
