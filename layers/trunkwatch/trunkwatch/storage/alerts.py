"""Stored alerts of a trunk (TrunkJobFailing items) and the trunk's failing set, written
together in one transaction so K (design.md §3.3) never disagrees with the alert items."""

from __future__ import annotations

from pynamodb.exceptions import DoesNotExist
from pynamodb.expressions.update import Action
from pynamodb.transactions import TransactWrite

from trunkwatch.domain.alerts import FIRING, JOB_FAILING
from trunkwatch.domain.cells import StoredCell
from trunkwatch.storage import commits, keys
from trunkwatch.storage.items import AlertItem, CommitRef, TrunkState
from trunkwatch.storage.table import connection


def job_alert(trunk_id: str, job: str) -> AlertItem | None:
    try:
        return AlertItem.get(keys.alerts(trunk_id), keys.alert(JOB_FAILING, job), consistent_read=True)
    except DoesNotExist:
        return None


def new_job_alert(trunk_id: str, job: str) -> AlertItem:
    return AlertItem(keys.alerts(trunk_id), keys.alert(JOB_FAILING, job))


def of_trunk(trunk_id: str, firing_only: bool = False) -> list[AlertItem]:
    condition = AlertItem.status == FIRING if firing_only else None
    return list(AlertItem.query(keys.alerts(trunk_id), filter_condition=condition))


def ref(cell: StoredCell) -> CommitRef:
    return CommitRef(seq=cell.seq, job_url=cell.url, **commits.fields(cell.commit))


def save_with_failing_set(trunk_id: str, item: AlertItem, now_firing: bool | None) -> None:
    """Save the alert (version-checked); `now_firing` True/False adds/removes its job from
    the trunk's failing set in the same transaction, None leaves the set alone."""
    with TransactWrite(connection=connection()) as transaction:
        transaction.save(item)
        if now_firing is not None:
            change: Action = (TrunkState.failing.add if now_firing else TrunkState.failing.delete)({item.job})
            transaction.update(
                TrunkState(keys.trunk(trunk_id), keys.STATE),
                actions=[change, TrunkState.kind.set(TrunkState)],
            )
