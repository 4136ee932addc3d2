"""Webhook ingest (design.md §2, `webhook`): a GitHub delivery written as the cells the poll writes.

A delivery about a webhook-fed trunk is stored through the same records as a poll: the
commit item's state string (one code per job column of the trunk's job index) says what is
stored, a cell item is written only where the merged state changes, and the tick barrier
(here a group of the deliveries of the same instant, see `storage/ticks.py`) settles before the
notifier runs. Whichever of poll and delivery sees a result first writes it; the other then
finds the commit's state string unchanged and writes nothing.

Order of writes, as in the poll: shards, then the tick, the cell, then the commit's state
string; a delivery cut short is redone by its redelivery or by the next poll.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from trunkwatch.app.ingest import FIRST_SEQ, save_recent_seqs
from trunkwatch.domain.cells import ABSENT_CODE, Cell, Commit, build_cells, job_key, replaces
from trunkwatch.domain.config import Deployment, RuleConfig, TrunkConfig
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
        pushed = webhook.push(payload, repo_url).commits
        result.commits_placed = place_commits(storage, trunk.trunk_id, rule, pushed)
        return result
    if event == "workflow_run":
        run = webhook.workflow_run(payload, repo_url)
        result.commits_placed = place_commits(storage, trunk.trunk_id, rule, (run.commit,))
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
    changed = {job_key(r.name) for r in reports if storage.shards.report(trunk.trunk_id, r, now)}
    for key in sorted(changed):
        cell = build_cells(sha, storage.shards.runs(trunk.trunk_id, sha, key), rule.cancelled)[key]
        assert seq is not None
        group = write_cell(storage, trunk.trunk_id, rule, seq, cell, now)
        if group is not None:
            result.group = result.group or group
            result.cells_written += 1
            result.changed_jobs.append(key)
    return result


def place_commits(storage: Storage, trunk_id: str, rule: RuleConfig, pushed: tuple[Commit, ...]) -> int:
    """Place the commits not yet known above the newest known one, oldest first; the number
    placed. A seq another writer took meanwhile is skipped (a conditional put). As in the
    poll, new numbers stay above the newest seq that had cells (the trunk's state), so a new
    commit never takes the seq of expired cells DynamoDB has not deleted yet."""
    commits = storage.commits
    known = commits.seqs_of(trunk_id, [c.sha for c in pushed])
    new = [c for c in pushed if c.sha not in known]
    if not new:
        return 0
    newest = [c.seq for c in commits.newest(trunk_id, 1)]
    recent = storage.trunks.state(trunk_id).recent_seqs
    seq = max([*newest, *recent], default=FIRST_SEQ - 1)
    for commit in new:
        seq += 1
        while not commits.place(trunk_id, StoredCommit(seq, commit), rule.retention):
            seq += 1
        commits.save_pointers(trunk_id, [StoredCommit(seq, commit)], rule.retention)
    return len(new)


def write_cell(
    storage: Storage, trunk_id: str, rule: RuleConfig, seq: int, cell: Cell, now: datetime
) -> Group | None:
    """Record `cell` on commit `seq` as ingest would: a cell item (in scope) and the commit's
    state code, unless that code already says the same (or would go back to pending). The
    group tick the cell counts towards, or None when nothing was written."""
    commits = storage.commits
    column, names = _column(storage, trunk_id, cell.job)
    stored = commits.get(trunk_id, seq)
    if stored is None:
        return None
    old = stored.states.ljust(len(names), ABSENT_CODE)
    if not replaces(old[column], cell.state):
        return None
    group = None
    if rule.in_scope(cell.job):
        group = storage.ticks.join_group(trunk_id, 1, now)
        prior = storage.cells.newest_seq(trunk_id, cell.job)
        storage.cells.save_all(
            trunk_id, [CellWrite(cell, stored.commit, seq, group.id, prior)], rule.retention
        )
    while True:
        new = (old[:column] + cell.state.code + old[column + 1 :]).rstrip(ABSENT_CODE)
        if commits.save_states(trunk_id, seq, stored.states, new):
            break
        # Another delivery or a poll changed the commit meanwhile: set this column again.
        stored = commits.get(trunk_id, seq)
        if stored is None:
            return group
        old = stored.states.ljust(len(names), ABSENT_CODE)
    if not stored.states.strip(ABSENT_CODE):
        _add_recent_seq(storage, trunk_id, seq)  # the commit's first job: it counts for staleness now
    return group


def settle(storage: Storage, trunk_id: str, group: Group, now: datetime) -> bool:
    """The opener of a group, once its bucket closed: settle it if its cells were all
    evaluated already (else the evaluator settles it at the last one)."""
    return storage.ticks.settle(trunk_id, group.id, now)


def _column(storage: Storage, trunk_id: str, job: str) -> tuple[int, list[str]]:
    """The job's column in the trunk's job index, appending it if new."""
    trunks = storage.trunks
    while True:
        names = trunks.job_names(trunk_id)
        if job in names:
            return names.index(job), names
        if trunks.add_job_name(trunk_id, names, job):
            return len(names), [*names, job]


def _add_recent_seq(storage: Storage, trunk_id: str, seq: int) -> None:
    state = storage.trunks.state(trunk_id)
    save_recent_seqs(storage.trunks, trunk_id, state, [*state.recent_seqs, seq])
