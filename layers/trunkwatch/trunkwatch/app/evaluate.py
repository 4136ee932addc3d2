"""Evaluator: re-derive a job's alert from its stored cells whenever one of them changes.

Per changed cell: one Query, paged lazily, reads the job's cells newest first only as far as
the rule walks. Per trunk and invocation: one GetItem of the trunk's state (recent commits,
failing jobs); an alert item is read only for a job that fires or was firing. It is written
only when its content changes, with a version check, in one transaction with the trunk's
set of failing jobs (K of SPEC 3.3). Each invocation then counts its records towards
their poll's tick with one idempotent update per poll, and settles the tick at the last one.
"""

from __future__ import annotations

import contextlib
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from aws_lambda_powertools import Metrics
from aws_lambda_powertools.metrics import MetricUnit
from pynamodb.exceptions import DoesNotExist, TransactWriteError, UpdateError
from pynamodb.expressions.update import Action
from pynamodb.transactions import TransactWrite

from trunkwatch.domain.cells import CellState, Commit
from trunkwatch.domain.config import Deployment, RuleConfig
from trunkwatch.domain.rule import JobVerdict, StoredCell, judge_job
from trunkwatch.storage.items import AlertItem, CellItem, CommitRef, TickItem, TrunkState
from trunkwatch.storage.table import connection

JOB_WINDOW = 100  # cells of one job the rule may walk back through
PAGE_SIZE = 8  # cells per Query page: a passing job's verdict needs the first few
VERSION_RETRIES = 3
ALERT_PREFIX = "ALERT#TrunkJobFailing#"

metrics = Metrics()


@dataclass
class TrunkReads:
    """What one invocation reads once per trunk instead of once per cell: the trunk's state
    (recent commits, failing jobs) and the alert items it needed."""

    pk: str
    _state: TrunkState | None = None
    _alerts: dict[str, AlertItem | None] = field(default_factory=dict)

    @property
    def state(self) -> TrunkState:
        if self._state is None:
            try:
                self._state = TrunkState.get(self.pk, "STATE", consistent_read=True)
            except DoesNotExist:
                self._state = TrunkState(self.pk, "STATE")
        return self._state

    @property
    def recent_seqs(self) -> list[int]:
        return [int(s) for s in self.state.recent_seqs or []]

    def failing(self, job: str) -> bool:
        return job in (self.state.failing or set())

    def alert(self, job: str) -> AlertItem | None:
        if job not in self._alerts:
            try:
                self._alerts[job] = AlertItem.get(self.pk, f"{ALERT_PREFIX}{job}", consistent_read=True)
            except DoesNotExist:
                self._alerts[job] = None
        return self._alerts[job]

    def remember(self, item: AlertItem) -> None:
        self._alerts[item.job] = item
        failing = set(self.state.failing or set())
        (failing.add if item.status == "firing" else failing.discard)(item.job)
        self.state.failing = failing or None

    def forget(self) -> None:
        """After a lost race: read again."""
        self._state = None
        self._alerts.clear()


def evaluate_job(
    pk: str, job: str, rule: RuleConfig, now: datetime, reads: TrunkReads | None = None
) -> JobVerdict:
    """Judge `job` from its stored cells and store the resulting alert state."""
    reads = reads or TrunkReads(pk)
    for attempt in range(VERSION_RETRIES):
        verdict = judge_job(job, _read_cells(pk, job), reads.recent_seqs, rule, now)
        try:
            _store_verdict(pk, verdict, now, reads)
            return verdict
        except TransactWriteError:
            # Another evaluation of the same job won the race: re-read and re-judge.
            reads.forget()
            if attempt == VERSION_RETRIES - 1:
                raise
    raise AssertionError("unreachable")


@dataclass
class BatchEvaluation:
    """One evaluator invocation over a batch of cell stream records."""

    deployment: Deployment
    now: datetime
    reads: dict[str, TrunkReads] = field(default_factory=dict)
    judged: set[tuple[str, str]] = field(default_factory=set)

    def cell(self, image: dict[str, Any]) -> None:
        """Evaluate the job of one record's new image (once per job per batch: the
        evaluation reads every stored cell, so a second record of the job adds nothing)."""
        pk, job = str(image["pk"]), str(image["job"])
        if (pk, job) in self.judged:
            return
        trunk_id = pk.removeprefix("TRUNK#")
        trunk = next((t for t in self.deployment.trunks if t.trunk_id == trunk_id), None)
        if trunk is not None:
            rule = self.deployment.rule_for(trunk)
            if rule.in_scope(job):
                evaluate_job(pk, job, rule, self.now, self.reads.setdefault(pk, TrunkReads(pk)))
        self.judged.add((pk, job))

    def settle(self, records: list[dict[str, Any]], failed: set[str]) -> list[str]:
        """Count the records Lambda will not redeliver (those before the first failure)
        towards their polls' ticks; returns the polls this settled."""
        done: list[dict[str, Any]] = []
        for record in records:
            if record["dynamodb"]["SequenceNumber"] in failed:
                break
            done.append(record)
        metrics.add_metric(name="CellsEvaluated", unit=MetricUnit.Count, value=len(done))
        groups: dict[tuple[str, str], list[str]] = defaultdict(list)
        for record in done:
            image = record["dynamodb"].get("NewImage") or {}
            poll = (image.get("poll") or {}).get("S")
            if poll:
                groups[(image["pk"]["S"], poll)].append(record["dynamodb"]["SequenceNumber"])
        return [poll for (pk, poll), sequence in groups.items() if _count_towards_tick(pk, poll, sequence)]


def _count_towards_tick(pk: str, poll: str, sequence: list[str]) -> bool:
    """Add this batch's records to the tick once (a redelivered batch has the same key)."""
    key = f"{sequence[0]}-{sequence[-1]}-{len(sequence)}"
    tick = TickItem(pk, f"TICK#{poll}")
    try:
        tick.update(
            actions=[TickItem.evaluated.add(len(sequence)), TickItem.batches.add({key})],
            condition=TickItem.poll.exists() & ~TickItem.batches.contains(key),
        )
    except UpdateError:
        return False  # counted before, or the tick expired: nothing more to do
    if tick.settled or int(tick.evaluated or 0) < int(tick.expected):
        return False
    try:
        tick.update(actions=[TickItem.settled.set(True)], condition=TickItem.settled.does_not_exist())
    except UpdateError:
        return False  # a concurrent evaluation settled it
    with contextlib.suppress(UpdateError):  # a newer poll is open; its own tick closes it
        TrunkState.upsert(
            pk,
            "STATE",
            [TrunkState.open_poll.remove(), TrunkState.open_poll_at.remove()],
            condition=TrunkState.open_poll == poll,
        )
    return True


def failed_ids(response: dict[str, Any]) -> set[str]:
    return {f["itemIdentifier"] for f in response.get("batchItemFailures", [])}


def _read_cells(pk: str, job: str) -> Iterator[StoredCell]:
    """The job's cells newest first, fetched a page at a time as the rule walks them."""
    query = CellItem.query(
        pk,
        CellItem.sk.startswith(f"CELL#{job}#"),
        scan_index_forward=False,
        limit=JOB_WINDOW,
        page_size=PAGE_SIZE,
    )
    return (
        StoredCell(
            seq=int(item.seq),
            state=CellState(item.state),
            commit=Commit(
                sha=item.sha,
                time=item.commit_time,
                title=item.title,
                author=item.author,
                pr=int(item.pr) if item.pr is not None else None,
                url=item.commit_url,
            ),
            url=item.url,
            failure_lines=tuple(str(line) for line in item.failure_lines or ()),
        )
        for item in query
    )


def _ref(cell: StoredCell) -> CommitRef:
    c = cell.commit
    return CommitRef(
        seq=cell.seq,
        sha=c.sha,
        time=c.time,
        title=c.title,
        author=c.author,
        pr=c.pr,
        url=c.url,
        job_url=cell.url,
    )


def _store_verdict(pk: str, verdict: JobVerdict, now: datetime, reads: TrunkReads) -> None:
    if not verdict.firing and not reads.failing(verdict.job):
        return  # nothing fires and nothing is open to resolve: no alert read at all
    item = reads.alert(verdict.job)
    was_firing = item is not None and item.status == "firing"
    if not verdict.firing:
        if item is None or not was_firing:
            return
        item.status, item.ends_at = "resolved", now
        _commit(item, TrunkState.failing.delete({verdict.job}))
        reads.remember(item)
        return
    assert verdict.culprit is not None
    fields: dict[str, Any] = {
        "job": verdict.job,
        "status": "firing",
        "starts_at": verdict.culprit.first_fail.commit.time,
        "ends_at": None,
        "streak": verdict.streak,
        "first_fail": _ref(verdict.culprit.first_fail),
        "last_pass": _ref(verdict.culprit.last_pass) if verdict.culprit.last_pass else None,
        "newest_fail": _ref(verdict.failures[0]),
        "failure_lines": list(verdict.failures[0].failure_lines) or None,
        "failing_urls": [c.url for c in verdict.failures if c.url][:10] or None,
    }
    if item is not None and was_firing:
        fields["starts_at"] = item.starts_at  # the same episode keeps its start
        if _same(item, fields):
            return
    item = item or AlertItem(pk, f"{ALERT_PREFIX}{verdict.job}")
    for name, value in fields.items():
        setattr(item, name, value)
    _commit(item, None if was_firing else TrunkState.failing.add({verdict.job}))
    reads.remember(item)


def _plain(value: Any) -> Any:
    return value.as_dict() if isinstance(value, CommitRef) else value


def _same(item: AlertItem, fields: dict[str, Any]) -> bool:
    return all(_plain(getattr(item, name)) == _plain(value) for name, value in fields.items())


def _commit(item: AlertItem, failing_change: Action | None) -> None:
    with TransactWrite(connection=connection()) as transaction:
        transaction.save(item)
        if failing_change is not None:
            actions = [failing_change, TrunkState.kind.set(TrunkState)]
            transaction.update(TrunkState(item.pk, "STATE"), actions=actions)
