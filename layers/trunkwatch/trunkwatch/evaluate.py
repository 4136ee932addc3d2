"""Evaluator: re-derive a job's alert from its stored cells whenever one of them changes.

One Query reads the job's window (newest first) and one GetItem the trunk's recent
commits; the alert item is written only when its content changes, with a version check,
in one transaction with the trunk's set of failing jobs (K of SPEC 3.3).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from datetime import datetime

from pynamodb.exceptions import DoesNotExist, TransactWriteError, UpdateError
from pynamodb.expressions.update import Action
from pynamodb.transactions import TransactWrite

from trunkwatch.cells import CellState, Commit
from trunkwatch.config import RuleConfig
from trunkwatch.rule import JobVerdict, StoredCell, judge_job
from trunkwatch.storage.items import AlertItem, CellItem, CommitRef, TickItem, TrunkState
from trunkwatch.storage.table import connection

JOB_WINDOW = 100  # cells of one job read per evaluation
VERSION_RETRIES = 3


@dataclass(frozen=True)
class CellChange:
    """What a stream record says changed: enough to find the job and the poll's tick."""

    pk: str
    sk: str
    job: str
    poll: str


def evaluate_job(pk: str, job: str, rule: RuleConfig, now: datetime) -> JobVerdict:
    """Judge `job` from its stored cells and store the resulting alert state."""
    for attempt in range(VERSION_RETRIES):
        verdict = judge_job(job, _read_cells(pk, job), _recent_seqs(pk), rule, now)
        try:
            _store_verdict(pk, verdict, now)
            return verdict
        except TransactWriteError:
            # Another evaluation of the same job won the race: re-read and re-judge.
            if attempt == VERSION_RETRIES - 1:
                raise
    raise AssertionError("unreachable")


def report_to_tick(change: CellChange) -> bool:
    """Count the cell as evaluated for its poll; settle the tick when it was the last."""
    if not change.poll:
        return False
    try:
        tick = TickItem(change.pk, f"TICK#{change.poll}")
        tick.update(actions=[TickItem.evaluated.add({change.sk})], condition=TickItem.poll.exists())
    except UpdateError:
        return False  # the tick expired or never existed: nothing waits on it
    if tick.settled or len(tick.evaluated or ()) < int(tick.expected):
        return False
    try:
        tick.update(actions=[TickItem.settled.set(True)], condition=TickItem.settled.does_not_exist())
    except UpdateError:
        return False  # a concurrent evaluation settled it
    with contextlib.suppress(UpdateError):  # a newer poll is open; its own tick closes it
        TrunkState.upsert(
            change.pk,
            "STATE",
            [TrunkState.open_poll.remove(), TrunkState.open_poll_at.remove()],
            condition=TrunkState.open_poll == change.poll,
        )
    return True


def _read_cells(pk: str, job: str) -> list[StoredCell]:
    query = CellItem.query(
        pk, CellItem.sk.startswith(f"CELL#{job}#"), scan_index_forward=False, limit=JOB_WINDOW
    )
    return [
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
    ]


def _recent_seqs(pk: str) -> list[int]:
    try:
        return [int(s) for s in TrunkState.get(pk, "STATE").recent_seqs or []]
    except DoesNotExist:
        return []


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


def _store_verdict(pk: str, verdict: JobVerdict, now: datetime) -> None:
    sk = f"ALERT#TrunkJobFailing#{verdict.job}"
    try:
        item: AlertItem | None = AlertItem.get(pk, sk, consistent_read=True)
    except DoesNotExist:
        item = None
    was_firing = item is not None and item.status == "firing"
    if not verdict.firing:
        if item is None or not was_firing:
            return
        item.status, item.ends_at = "resolved", now
        _commit(item, TrunkState.failing.delete({verdict.job}))
        return
    assert verdict.culprit is not None
    fields = {
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
    item = item or AlertItem(pk, sk)
    for name, value in fields.items():
        setattr(item, name, value)
    _commit(item, None if was_firing else TrunkState.failing.add({verdict.job}))


def _same(item: AlertItem, fields: dict[str, object]) -> bool:
    current = {name: getattr(item, name) for name in fields}
    for name in ("first_fail", "last_pass", "newest_fail"):
        current[name] = current[name].as_dict() if current[name] is not None else None
        fields = {**fields, name: fields[name].as_dict() if fields[name] is not None else None}  # type: ignore[attr-defined]
    return current == fields


def _commit(item: AlertItem, failing_change: Action | None) -> None:
    with TransactWrite(connection=connection()) as transaction:
        transaction.save(item)
        if failing_change is not None:
            actions = [failing_change, TrunkState.kind.set(TrunkState)]
            transaction.update(TrunkState(item.pk, "STATE"), actions=actions)


def on_cell_record(image: dict[str, object], now: datetime) -> JobVerdict | None:
    """Evaluate the job of one stream record's new image, then report to its poll's tick."""
    from trunkwatch import settings

    change = CellChange(
        pk=str(image["pk"]), sk=str(image["sk"]), job=str(image["job"]), poll=str(image.get("poll") or "")
    )
    deployment = settings.deployment()
    trunk_id = change.pk.removeprefix("TRUNK#")
    verdict = None
    if any(t.trunk_id == trunk_id for t in deployment.trunks):
        rule = deployment.rule_for(deployment.trunk(trunk_id))
        if rule.in_scope(change.job):
            verdict = evaluate_job(change.pk, change.job, rule, now)
    report_to_tick(change)
    return verdict
