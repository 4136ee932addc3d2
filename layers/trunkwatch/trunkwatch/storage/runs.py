"""Workflow runs in DynamoDB as webhook deliveries told of them, with the job reports held
under a run until a delivery says whether it is a trunk run."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from pynamodb.exceptions import DoesNotExist

from trunkwatch.domain.runs import RunRecord
from trunkwatch.domain.shards import ShardReport
from trunkwatch.storage import keys
from trunkwatch.storage.items import HeldReportItem, RunItem
from trunkwatch.storage.limits import SHARD_TTL
from trunkwatch.storage.table import BoundModels


def _held_key(report: ShardReport) -> str:
    return keys.held(report.name, report.attempt, report.conclusion if not report.completed else "completed")


class DynamoRuns:
    def __init__(self, table: BoundModels) -> None:
        self.runs = table.model(RunItem)
        self.held_reports = table.model(HeldReportItem)

    def get(self, trunk_id: str, run_id: int, consistent: bool = False) -> RunRecord | None:
        try:
            found = self.runs.get(keys.run(trunk_id, run_id), keys.RUN, consistent_read=consistent)
        except DoesNotExist:
            return None
        return RunRecord(run_id, str(found.sha), bool(found.of_trunk))

    def save(self, trunk_id: str, run: RunRecord, now: datetime) -> None:
        self.runs(
            keys.run(trunk_id, run.run_id),
            keys.RUN,
            sha=run.sha,
            of_trunk=run.of_trunk,
            expires_at=now + SHARD_TTL,
        ).save()

    def hold(self, trunk_id: str, report: ShardReport, now: datetime) -> None:
        self.held_reports(
            keys.run(trunk_id, report.run_id),
            _held_key(report),
            sha=report.sha,
            name=report.name,
            attempt=report.attempt,
            completed=report.completed,
            conclusion=report.conclusion,
            url=report.url,
            expires_at=now + SHARD_TTL,
        ).save()

    def held(self, trunk_id: str, run_id: int) -> list[ShardReport]:
        query = self.held_reports.query(
            keys.run(trunk_id, run_id),
            HeldReportItem.sk.startswith(keys.HELD_PREFIX),
            consistent_read=True,
        )
        return [
            ShardReport(
                sha=str(item.sha),
                name=str(item.name),
                run_id=run_id,
                attempt=int(item.attempt),
                completed=bool(item.completed),
                conclusion=str(item.conclusion),
                url=str(item.url),
            )
            for item in query
        ]

    def release(self, trunk_id: str, reports: Iterable[ShardReport]) -> None:
        with self.held_reports.batch_write() as batch:
            for report in reports:
                batch.delete(self.held_reports(keys.run(trunk_id, report.run_id), _held_key(report)))
