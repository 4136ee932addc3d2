"""The reruns job alerts asked for (confirmation by reruns), in DynamoDB: one partition per
trunk, sorted by job and episode, so an episode's reruns are one Query and the trunk's open
ones one filtered Query of the partition (items expire with the rule's retention)."""

from __future__ import annotations

from datetime import datetime, timedelta

from pynamodb.exceptions import PutError

from trunkwatch.domain.clock import format_time
from trunkwatch.domain.reruns import RerunRecord
from trunkwatch.domain.verdict import RerunStatus
from trunkwatch.storage import keys
from trunkwatch.storage.items import RerunItem
from trunkwatch.storage.table import BoundModels

_OPEN = (RerunStatus.PENDING.value, RerunStatus.REQUEST_FAILED.value)


def _sort_key(job: str, episode: datetime, role: str) -> str:
    return keys.rerun(job, format_time(episode), role)


def _item(model: type[RerunItem], trunk_id: str, record: RerunRecord, retention: timedelta) -> RerunItem:
    return model(
        keys.reruns(trunk_id),
        _sort_key(record.job, record.episode, record.role),
        job=record.job,
        episode=record.episode,
        role=record.role,
        sha=record.sha,
        culprit_sha=record.culprit_sha,
        last_pass_sha=record.last_pass_sha,
        planned_at=record.planned_at,
        status=record.status,
        requested_at=record.requested_at,
        job_id=record.job_id if isinstance(record.job_id, int) else None,
        job_uuid=record.job_id if isinstance(record.job_id, str) else None,
        shard=record.shard or None,
        reason=record.reason or None,
        tries=record.tries,
        expires_at=record.planned_at + retention,
    )


def _record(item: RerunItem) -> RerunRecord:
    return RerunRecord(
        job=str(item.job),
        episode=item.episode,
        role=str(item.role),
        sha=str(item.sha),
        culprit_sha=str(item.culprit_sha),
        last_pass_sha=item.last_pass_sha,
        planned_at=item.planned_at,
        status=str(item.status),
        requested_at=item.requested_at,
        job_id=int(item.job_id) if item.job_id is not None else item.job_uuid,
        shard=item.shard or "",
        reason=item.reason or "",
        tries=int(item.tries or 0),
    )


class DynamoReruns:
    def __init__(self, table: BoundModels) -> None:
        self.reruns = table.model(RerunItem)

    def of_episode(self, trunk_id: str, job: str, episode: datetime) -> list[RerunRecord]:
        prefix = keys.rerun(job, format_time(episode), "")
        query = self.reruns.query(
            keys.reruns(trunk_id), RerunItem.sk.startswith(prefix), consistent_read=True
        )
        return [_record(item) for item in query]

    def open(self, trunk_id: str, planned_since: datetime, requested_since: datetime) -> list[RerunRecord]:
        condition = (RerunItem.status.is_in(*_OPEN) & (RerunItem.planned_at >= planned_since)) | (
            RerunItem.requested_at >= requested_since
        )
        query = self.reruns.query(keys.reruns(trunk_id), filter_condition=condition)
        return [_record(item) for item in query]

    def add(self, trunk_id: str, record: RerunRecord, retention: timedelta) -> bool:
        try:
            _item(self.reruns, trunk_id, record, retention).save(condition=RerunItem.sk.does_not_exist())
        except PutError as err:
            if err.cause_response_code == "ConditionalCheckFailedException":
                return False
            raise
        return True

    def update(self, trunk_id: str, record: RerunRecord, retention: timedelta) -> None:
        _item(self.reruns, trunk_id, record, retention).save()
