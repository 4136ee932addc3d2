"""Webhook ingest (design.md §2, `webhook`): a GitHub delivery written as the cells the poll writes.

A delivery about a webhook-fed trunk is stored through the same records as a poll: the commit
item's state string (one code per job column of the trunk's job index) says what is stored, a
cell item is written only where the merged state changes, and the tick barrier (here a group
of the deliveries of the same instant, see `storage/ticks.py`) settles before the notifier
runs; a cell that cannot change its job's verdict (a pass on a job not failing, the
evaluator's own test) joins no group. Whichever of poll and delivery sees a result first
writes it; the other then finds the commit's state string unchanged and writes nothing.
Commits, job columns and state codes are written through the ledger the poll uses too
(`ledger.py`): conditional writes, merged again on a conflict.

Order of writes, as in the poll: shards, then the tick, the cell, then the commit's state
string; a delivery cut short is redone by its redelivery or by the next poll.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from trunkwatch.app import ledger
from trunkwatch.domain.cells import (
    ABSENT_CODE,
    WORKFLOW_JOB,
    Cell,
    CellState,
    Commit,
    build_cells,
    job_key,
    replaces,
)
from trunkwatch.domain.config import Deployment, RuleConfig, TrunkConfig
from trunkwatch.domain.rule import in_window, may_change_verdict
from trunkwatch.domain.shards import ShardReport
from trunkwatch.sources import webhook
from trunkwatch.storage.port import Storage
from trunkwatch.storage.records import CellWrite, Group, StoredCommit

WEB_URL = "https://github.com"


@dataclass
class DeliveryResult:
    event: str
    trunk: str | None = None
    ignored: str | None = None  # why nothing was stored
    commits_placed: int = 0
    cells_written: int = 0
    changed_jobs: list[str] = field(default_factory=list)
    group: Group | None = None


def trunk_of(deployment: Deployment, event: str, payload: dict[str, Any]) -> TrunkConfig | str:
    """The webhook-fed trunk a delivery is about, or why it is not about one: from the
    payload alone, before any table access."""
    if event not in webhook.EVENTS:
        return f"event {event!r} is not ingested"
    if not webhook.completed(event, payload):
        return "a job without its result yet"
    repo = webhook.repository(payload)
    branch = webhook.branch_of(event, payload)
    for trunk in deployment.trunks:
        if trunk.webhook and trunk.repo.lower() == repo.lower() and branch in (trunk.branch, None):
            if event == "workflow_run" and (payload.get("workflow_run") or {}).get("event") != "push":
                return "a run not triggered by a push"
            return trunk
    return "not about a webhook-fed trunk"


def ingest_delivery(
    storage: Storage, trunk: TrunkConfig, rule: RuleConfig, event: str, payload: dict[str, Any], now: datetime
) -> DeliveryResult:
    """Store one delivery about `trunk`. Raises webhook.PayloadError (nothing written) when a
    field it needs is missing or malformed."""
    result = DeliveryResult(event, trunk.trunk_id)
    repo_url = f"{WEB_URL}/{trunk.repo}"
    if event == "push":
        pushed = webhook.push(payload, repo_url)
        result.commits_placed = place_commits(storage, trunk.trunk_id, rule, pushed.commits, pushed.parent)
        return result
    if event == "workflow_run":
        run = webhook.workflow_run(payload, repo_url)
        result.commits_placed = place_commits(storage, trunk.trunk_id, rule, (run.commit,), None)
        reports = [run.shard] if run.shard else []
    else:
        reports = webhook.workflow_job(payload)
        if not reports:
            result.ignored = "a job without a workflow name"
            return result
    sha = reports[0].sha if reports else ""
    seq = storage.commits.seqs_of(trunk.trunk_id, [sha]).get(sha) if reports else None
    if reports and seq is None:
        result.ignored = "not a known trunk commit"
        return result
    if event == "workflow_job" and seq is not None:
        reports = [r for r in reports if not _run_pass_recorded(storage, trunk.trunk_id, seq, r)]
    changed = {job_key(r.name) for r in reports if storage.shards.report(trunk.trunk_id, r, now)}
    for key in sorted(changed):
        cell = build_cells(sha, storage.shards.runs(trunk.trunk_id, sha, key), rule.cancelled)[key]
        if cell.state == CellState.PENDING:
            # Shards still running: no result yet, as for any job still running (whose
            # `in_progress` deliveries are dropped); a poll records running jobs as pending.
            continue
        assert seq is not None
        written = write_cell(storage, trunk.trunk_id, rule, seq, cell, now)
        if written is not None:
            result.group = result.group or written.group
            result.cells_written += 1
            result.changed_jobs.append(key)
    return result


def _run_pass_recorded(storage: Storage, trunk_id: str, seq: int, report: ShardReport) -> bool:
    """Whether `report` is the run's `(workflow)` pass that every job delivery of the run
    repeats, and the commit's state string already records that pass: storing it again
    would change nothing, so it is not written (two reads instead of a write)."""
    if not report.name.endswith(f" / {WORKFLOW_JOB}") or report.conclusion != "success":
        return False
    names = storage.trunks.job_names(trunk_id)
    key = job_key(report.name)
    if key not in names:
        return False
    stored = storage.commits.get(trunk_id, seq)
    return stored is not None and _code(stored.states, names.index(key)) == CellState.PASS.code


def place_commits(
    storage: Storage, trunk_id: str, rule: RuleConfig, pushed: tuple[Commit, ...], parent: str | None
) -> int:
    """Place the commits not yet known (oldest first, `parent` the first one's parent if the
    delivery says) in branch order (`ledger.place_chain`); the number placed."""
    commits = storage.commits
    known = commits.seqs_of(trunk_id, [c.sha for c in pushed])
    if all(c.sha in known for c in pushed):
        return 0
    newest = [c.seq for c in commits.newest(trunk_id, 1)]
    recent = storage.trunks.state(trunk_id).recent_seqs
    _, placed = ledger.place_chain(
        storage, trunk_id, list(pushed), parent, rule.retention, known, [*newest, *recent]
    )
    return len(placed)


@dataclass(frozen=True)
class Written:
    """A cell item written, and the group tick it counts towards (None: it joined none, as
    it cannot change its job's verdict)."""

    group: Group | None


def write_cell(
    storage: Storage, trunk_id: str, rule: RuleConfig, seq: int, cell: Cell, now: datetime
) -> Written | None:
    """Record `cell` (a result) on commit `seq` as ingest would: a cell item (in scope) and
    the commit's state code, unless that code already says the same. None when no cell item
    was written."""
    trunks, commits = storage.trunks, storage.commits
    names, _ = ledger.add_jobs(trunks, trunk_id, trunks.job_names(trunk_id), [cell.job])
    column = names.index(cell.job)
    stored = commits.get(trunk_id, seq)
    if stored is None or not replaces(_code(stored.states, column), cell.state):
        return None
    written = _write(storage, trunk_id, rule, seq, cell, stored.commit, _code(stored.states, column), now)

    def merge(states: str) -> str:
        if not replaces(_code(states, column), cell.state):
            return states
        return ledger.merge_states(states, {column: cell.state.code})

    def rewrite(previous: StoredCommit, fresh: StoredCommit, new: str) -> None:
        # Another writer changed this column meanwhile, its cell before or after this one:
        # write this result again, as the state string will say (a result always replaces
        # another writer's: only a pending cell would lose, and a delivery writes none).
        # The same instant's group, which this delivery may have opened, stays its group.
        nonlocal written
        theirs = _code(fresh.states, column)
        if theirs not in (_code(previous.states, column), cell.state.code):
            again = _write(storage, trunk_id, rule, seq, cell, fresh.commit, theirs, now)
            if written is None or written.group is None:
                written = again

    saved = ledger.save_states(commits, trunk_id, stored, merge, before_retry=rewrite)
    if saved is not None and not saved[0].states.strip(ABSENT_CODE):
        _add_recent_seq(storage, trunk_id, seq)  # the commit's first job: it counts for staleness now
    return written


def _write(
    storage: Storage,
    trunk_id: str,
    rule: RuleConfig,
    seq: int,
    cell: Cell,
    commit: Commit,
    old_code: str,
    now: datetime,
) -> Written | None:
    """The cell item (in scope; None when out of scope). It joins its delivery group only if
    it may change its job's verdict, as the evaluator judges that (`may_change_verdict`): a
    pass on a job that is not failing changes nothing to notify, so it costs no tick write.
    Should the job begin firing meanwhile, the evaluator judges the cell all the same and
    the next settled tick (at the latest the schedule's sweep) sends what changed."""
    if not rule.in_scope(cell.job):
        return None
    prior = storage.cells.newest_seq(trunk_id, cell.job)
    state = storage.trunks.state(trunk_id, consistent=True)  # a job that began firing just now joins
    old = None if old_code == ABSENT_CODE else CellState.of_code(old_code)
    fresh_before = prior is not None and in_window(prior, state.recent_seqs, rule)
    group = None
    if may_change_verdict(old, cell.state, cell.job in state.failing, fresh_before):
        group = storage.ticks.join_group(trunk_id, 1, now)
    write = CellWrite(cell, commit, seq, group.id if group else "", prior)
    storage.cells.save_all(trunk_id, [write], rule.retention)
    return Written(group)


def _code(states: str, column: int) -> str:
    return states.ljust(column + 1, ABSENT_CODE)[column]


def settle(storage: Storage, trunk_id: str, group: Group, now: datetime) -> bool:
    """The opener of a group, once its bucket closed: settle it if its cells were all
    evaluated already (else the evaluator settles it at the last one)."""
    return storage.ticks.settle(trunk_id, group.id, now)


def _add_recent_seq(storage: Storage, trunk_id: str, seq: int) -> None:
    state = storage.trunks.state(trunk_id)
    ledger.save_recent_seqs(storage.trunks, trunk_id, state.recent_seqs, [seq])
