"""Webhook ingest (design.md §2, `webhook`): a GitHub or Buildkite delivery written as the
cells the poll writes.

A delivery about a webhook-fed trunk is stored through the same records as a poll: the commit
item's state string (one code per job column of the trunk's job index) says what is stored, a
cell item is written only where the merged state changes, and the tick barrier (here a group
of the deliveries of the same instant, see `storage/ticks.py`) settles before the notifier
runs; a cell that cannot change its job's judgement (a pass on a job not failing, the
evaluator's own test) joins no group. Whichever of poll and delivery sees a result first
writes it; the other then finds the commit's state string unchanged and writes nothing.
Commits, job columns and state codes are written through the ledger the poll uses too
(`ledger.py`): conditional writes, merged again on a conflict.

Order of writes, as in the poll: shards, then the tick (for a cell that joins one), the cell,
then the commit's state string; a delivery cut short is redone by its redelivery or by the
next poll.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from trunkwatch.app import ledger
from trunkwatch.domain.cells import (
    ABSENT_CODE,
    WORKFLOW_JOB,
    Cell,
    CellState,
    CellWrite,
    Commit,
    build_cells,
    job_key,
)
from trunkwatch.domain.commits import StoredCommit
from trunkwatch.domain.config import Deployment, RuleConfig, TrunkConfig
from trunkwatch.domain.rule import in_window, may_change_judgement
from trunkwatch.domain.runs import RunRecord
from trunkwatch.domain.shards import ShardReport, merge, sharded
from trunkwatch.domain.ticks import Group
from trunkwatch.domain.trunk_state import LAST_DELIVERY_PRECISION, TrunkState
from trunkwatch.sources import buildkite_webhook, webhook
from trunkwatch.storage.port import Storage

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
    payload alone, before any table access. Whether a job's run is a trunk run is known
    only from its run (`ingest_delivery`)."""
    if event not in webhook.EVENTS:
        return f"event {event!r} is not ingested"
    if not webhook.stored(event, payload):
        return "a job in progress (its queued delivery said it runs)"
    repo = webhook.repository(payload)
    branch = webhook.branch_of(event, payload)
    for trunk in deployment.trunks:
        if trunk.webhook and trunk.repo.lower() == repo.lower() and branch in (trunk.branch, None):
            return trunk
    return "not about a webhook-fed trunk"


def buildkite_trunk_of(deployment: Deployment, event: str, payload: dict[str, Any]) -> TrunkConfig | str:
    """The webhook-fed Buildkite trunk a Buildkite delivery is about (its pipeline, and its
    build on the trunk's branch), or why it is not about one."""
    if event not in buildkite_webhook.EVENTS:
        return f"event {event!r} is not ingested"
    pipeline = buildkite_webhook.pipeline_of(payload).lower()
    branch = buildkite_webhook.branch_of(payload)
    for trunk in deployment.trunks:
        if trunk.webhook and (trunk.pipeline or "").lower() == pipeline and branch == trunk.branch:
            return trunk
    return "not about a webhook-fed trunk's pipeline and branch"


def ingest_delivery(
    storage: Storage, trunk: TrunkConfig, rule: RuleConfig, event: str, payload: dict[str, Any], now: datetime
) -> DeliveryResult:
    """Store one delivery about `trunk`. Raises webhook.PayloadError (nothing written) when a
    field it needs is missing or malformed.

    Only trunk runs count (design.md §2): a run is recorded as one of the trunk's or not
    when its `workflow_run` delivery comes; a job delivery whose run is not known yet is
    held under the run until it is (GitHub does not order deliveries), then written."""
    result = DeliveryResult(event, trunk.trunk_id)
    if event in buildkite_webhook.EVENTS:
        return _buildkite(storage, trunk, rule, event, payload, now, result)
    repo_url = f"{WEB_URL}/{trunk.repo}"
    if event == "push":
        pushed = webhook.push(payload, repo_url)
        placed = place_commits(storage, trunk.trunk_id, rule, pushed.commits, pushed.parent)
        result.commits_placed = len(placed)
        _describe(storage, trunk.trunk_id, [c for c in pushed.commits if c.sha not in placed])
        return result
    if event == "workflow_run":
        return _run(storage, trunk, rule, webhook.workflow_run(payload, repo_url), now, result)
    reports = webhook.workflow_job(payload)
    if not reports:
        result.ignored = "a job without a workflow name"
        return result
    runs = storage.runs
    run = runs.get(trunk.trunk_id, reports[0].run_id)
    held = run is None
    if run is None:
        for report in reports:
            runs.hold(trunk.trunk_id, report, now)
        # The run's delivery may have come meanwhile, before it could see what is held here
        # (or just before, and the first read missed it).
        run = runs.get(trunk.trunk_id, reports[0].run_id, consistent=True)
        if run is None:
            result.ignored = "held until its run's delivery says whether it is a trunk run"
            return result
    if run.of_trunk:
        _store_reports(storage, trunk, rule, reports, now, result)
    else:
        result.ignored = NOT_A_TRUNK_RUN
    if held:
        runs.release(trunk.trunk_id, reports)
    return result


NOT_A_TRUNK_RUN = "not a trunk run (a push to the trunk's branch in its own repository)"


def _buildkite(
    storage: Storage,
    trunk: TrunkConfig,
    rule: RuleConfig,
    event: str,
    payload: dict[str, Any],
    now: datetime,
    result: DeliveryResult,
) -> DeliveryResult:
    """A Buildkite delivery: its build's commit placed (a build carries its commit, as a
    GitHub run does), then its job's shard report stored as a GitHub job's is."""
    found = buildkite_webhook.report(event, payload, trunk.repo)
    if found is None:
        result.ignored = "not a build of a pushed commit (scheduled, or on HEAD)"
        return result
    result.commits_placed = len(place_commits(storage, trunk.trunk_id, rule, (found.commit,), None))
    if found.shard is None:
        result.ignored = found.skipped or None
        return result
    _store_reports(storage, trunk, rule, [found.shard], now, result)
    return result


def _run(
    storage: Storage,
    trunk: TrunkConfig,
    rule: RuleConfig,
    run: webhook.RunReport,
    now: datetime,
    result: DeliveryResult,
) -> DeliveryResult:
    """A `workflow_run` delivery: record whether the run is a trunk run, place a trunk run's
    commit, and write its `(workflow)` failure and the job reports held for it."""
    of_trunk = run.of_trunk(trunk.repo, trunk.branch)
    if of_trunk:
        # Placed before the run is recorded: a job that finds the run finds its commit.
        result.commits_placed = len(place_commits(storage, trunk.trunk_id, rule, (run.commit,), None))
    runs = storage.runs
    if runs.get(trunk.trunk_id, run.run_id) is None:
        runs.save(trunk.trunk_id, RunRecord(run.run_id, run.commit.sha, of_trunk), now)
    held = runs.held(trunk.trunk_id, run.run_id)
    if of_trunk:
        _store_reports(storage, trunk, rule, [*([run.shard] if run.shard else []), *held], now, result)
    else:
        result.ignored = NOT_A_TRUNK_RUN
    runs.release(trunk.trunk_id, held)
    return result


def _store_reports(
    storage: Storage,
    trunk: TrunkConfig,
    rule: RuleConfig,
    reports: list[ShardReport],
    now: datetime,
    result: DeliveryResult,
) -> None:
    """Store a trunk run's shard reports (of one commit) and write the cells they change: a
    job's cell merges every shard stored for it, pending while one is queued (a delivery
    writes a pending cell only where the commit has none, as the poll records a job still
    running; a result never goes back to pending)."""
    if not reports:
        return
    sha = reports[0].sha
    seq = storage.commits.seqs_of(trunk.trunk_id, [sha]).get(sha)
    if seq is None:
        result.ignored = "not a known trunk commit"
        return
    read = Read(storage.trunks.job_names(trunk.trunk_id), storage.commits.get(trunk.trunk_id, seq))
    reports, decided = _run_pass(read, reports, rule.cancelled)
    # A job of one shard that is queued is pending where the commit records nothing for it
    # (a result never goes back to pending): nothing to merge, no shard stored.
    single = [r for r in reports if not r.completed and not sharded(r.name)]
    decided += [
        build_cells(sha, [merge(None, r).run(r.name)], rule.cancelled)[job_key(r.name)] for r in single
    ]
    reports = [r for r in reports if r not in single]
    changed = {job_key(r.name) for r in reports if storage.shards.report(trunk.trunk_id, r, now)}
    for key in sorted(changed):
        decided.append(build_cells(sha, storage.shards.runs(trunk.trunk_id, sha, key), rule.cancelled)[key])
    if decided:
        for job, written in _record_cells(storage, trunk.trunk_id, rule, read, decided, now).items():
            result.group = result.group or written.group
            result.cells_written += 1
            result.changed_jobs.append(job)


@dataclass(frozen=True)
class Read:
    """What a delivery reads once: the trunk's job index and the commit it is about (None:
    expired), each as read before its writes (a conditional write finds a change since)."""

    names: list[str]
    commit: StoredCommit | None


def _run_pass(read: Read, reports: list[ShardReport], cancelled: str) -> tuple[list[ShardReport], list[Cell]]:
    """The reports to store as shards, and the cells decided without storing one. Every job
    delivery of a run repeats the run's `(workflow)` pass: once the commit's state string
    records it, it is not written again (two reads instead of a write), and the first
    attempt's pass on a commit that records nothing for it is its cell as it stands (no
    earlier attempt can have failed to start, and a later one is stored as a shard)."""
    passes = [r for r in reports if r.name.endswith(f" / {WORKFLOW_JOB}") and r.conclusion == "success"]
    if not passes:
        return reports, []
    names, stored = read.names, read.commit
    kept, decided = list(reports), []
    for report in passes:
        key = job_key(report.name)
        code = _code(stored.states, names.index(key)) if stored and key in names else ABSENT_CODE
        if code == CellState.PASS.code:
            kept.remove(report)
        elif code == ABSENT_CODE and report.attempt == 1:
            kept.remove(report)
            run = merge(None, report).run(report.name)
            decided.append(build_cells(report.sha, [run], cancelled)[key])
    return kept, decided


def place_commits(
    storage: Storage, trunk_id: str, rule: RuleConfig, pushed: tuple[Commit, ...], parent: str | None
) -> list[str]:
    """Place the commits not yet known (oldest first, `parent` the first one's parent if the
    delivery says) in branch order (`ledger.place_chain`); the shas placed."""
    commits = storage.commits
    known = commits.seqs_of(trunk_id, [c.sha for c in pushed])
    if all(c.sha in known for c in pushed):
        return []
    newest = [c.seq for c in commits.newest(trunk_id, 1)]
    recent = storage.trunks.state(trunk_id).recent_seqs
    _, placed = ledger.place_chain(
        storage, trunk_id, list(pushed), parent, rule.retention, known, [*newest, *recent]
    )
    return placed


def _describe(storage: Storage, trunk_id: str, pushed: list[Commit]) -> None:
    """A run's delivery that placed a commit before its push did could not name its author
    (a run's head commit names the git author, not the GitHub login the push and the poll
    name): the push names it (`pushed`: its commits placed by another writer)."""
    commits = storage.commits
    for sha, seq in commits.seqs_of(trunk_id, [c.sha for c in pushed]).items():
        author = next(c.author for c in pushed if c.sha == sha)
        stored = commits.get(trunk_id, seq)
        if stored is not None and author and not stored.commit.author:
            described = replace(stored.commit, author=author)
            ledger.save_states(commits, trunk_id, stored, lambda states: states, described)


@dataclass(frozen=True)
class Written:
    """A cell item written, and the group tick it counts towards (None: it joined none, as
    it cannot change its job's judgement)."""

    group: Group | None


def _record_cells(
    storage: Storage, trunk_id: str, rule: RuleConfig, read: Read, cells: list[Cell], now: datetime
) -> dict[str, Written]:
    """Record `cells` (of the commit `read`) through the ledger the poll writes through: a
    cell item each (in scope) and their codes in one write of the commit's state string,
    but where a code already says the same. The cell items written, by job."""
    trunks = storage.trunks
    names, _ = ledger.add_jobs(trunks, trunk_id, read.names, [c.job for c in cells])
    if read.commit is None:
        return {}
    writer = _DeliveryCells(storage, trunk_id, rule, now)
    seen = ledger.Seen(read.commit, {cell.job: cell for cell in cells})
    saved = ledger.record_cells(storage, trunk_id, rule, names, [seen], writer)
    state = writer.state
    if state is None:
        return {}  # every code already said so
    if saved and not saved[0][0].states.strip(ABSENT_CODE):
        # The commit's first job: it counts for staleness now.
        ledger.save_recent_seqs(trunks, trunk_id, state.recent_seqs, [read.commit.seq])
    written = writer.written
    opened = any(w.group is not None and w.group.opened for w in written.values())
    last = state.last_delivery_at
    if written and not opened and (last is None or now - last >= LAST_DELIVERY_PRECISION):
        trunks.record_delivery(trunk_id, now)  # deliveries arrive: WebhooksDown stays quiet or ends
    return written


class _DeliveryCells:
    """A delivery's cell items (`ledger.CellWriter`). Each joins its instant's delivery group
    only if it may change its job's judgement, as the evaluator judges that
    (`may_change_judgement`): a pass on a job that is not failing changes nothing to notify,
    so it costs no tick write. The trunk's state is read (consistently) before the first,
    so a job that began firing just now joins; should it begin firing later, the evaluator
    judges the cell all the same and the next settled tick (at the latest the schedule's
    sweep) sends what changed. A cell written again after a conflict joins the same
    instant's group, which this delivery may have opened."""

    def __init__(self, storage: Storage, trunk_id: str, rule: RuleConfig, now: datetime) -> None:
        self.storage, self.trunk_id, self.rule, self.now = storage, trunk_id, rule, now
        self.state: TrunkState | None = None
        self.written: dict[str, Written] = {}  # by job; the write that joined a group, if one did

    def write(self, changes: list[ledger.CellChange]) -> None:
        if self.state is None:
            self.state = self.storage.trunks.state(self.trunk_id, consistent=True)
        for change in changes:
            group = self._write(change, self.state)
            job = change.cell.job
            if job not in self.written or self.written[job].group is None:
                self.written[job] = Written(group)

    rewrite = write

    def _write(self, change: ledger.CellChange, state: TrunkState) -> Group | None:
        cell, rule = change.cell, self.rule
        prior = self.storage.cells.newest_seq(self.trunk_id, cell.job)
        old = None if change.old == ABSENT_CODE else CellState.of_code(change.old)
        fresh_before = prior is not None and in_window(prior, state.recent_seqs, rule)
        group = None
        if may_change_judgement(old, cell.state, cell.job in state.failing, fresh_before):
            group = self.storage.ticks.join_group(self.trunk_id, 1, self.now)
        write = CellWrite(cell, change.commit, change.seq, group.id if group else "", prior)
        self.storage.cells.save_all(self.trunk_id, [write], rule.retention)
        return group


def _code(states: str, column: int) -> str:
    return states.ljust(column + 1, ABSENT_CODE)[column]


def settle(storage: Storage, trunk_id: str, group: Group, now: datetime) -> bool:
    """The opener of a group, once its bucket closed: settle it if its cells were all
    evaluated already (else the evaluator settles it at the last one)."""
    return storage.ticks.settle(trunk_id, group.id, now)
