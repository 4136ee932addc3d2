"""A job's shards on one commit in DynamoDB, as webhook deliveries reported them: one item per shard,
each replaced only by a newer report, so deliveries may come in any order or twice."""

from __future__ import annotations

from datetime import datetime

from pynamodb.exceptions import UpdateError
from pynamodb.expressions.update import Action

from trunkwatch.domain.cells import JobRun, job_key
from trunkwatch.domain.shards import ShardReport, pending_shards, shard_run
from trunkwatch.storage import keys
from trunkwatch.storage.items import ShardItem
from trunkwatch.storage.records import FAILED_CONCLUSIONS, SHARD_TTL
from trunkwatch.storage.table import TableStore


class DynamoShards(TableStore):
    def report(self, trunk_id: str, shard: ShardReport, now: datetime) -> bool:
        """Store the report if it is newer than the stored one: a later attempt, or the same
        attempt's completion; a pending report never replaces a completed one. A failed attempt
        is remembered even when a later attempt is already stored (a pass after it is flaky).
        True when the stored shard is this report's (the same report is written again: one
        write unit, as a refused conditional write would cost) or a late failed attempt was
        added; False when a newer report is stored."""
        pk, sk = keys.shards(trunk_id, shard.sha, job_key(shard.name)), shard.name
        item = ShardItem(pk, sk)
        newer = ShardItem.pk.does_not_exist() | (
            (ShardItem.attempt == shard.attempt)
            & (ShardItem.completed == shard.completed)
            & (ShardItem.conclusion == shard.conclusion)
        )
        if shard.completed:
            newer |= (ShardItem.completed == False) | (ShardItem.attempt < shard.attempt)  # noqa: E712
        actions: list[Action] = [
            ShardItem.attempt.set(shard.attempt),
            ShardItem.completed.set(shard.completed),
            ShardItem.conclusion.set(shard.conclusion),
            ShardItem.url.set(shard.url),
            ShardItem.expires_at.set(now + SHARD_TTL),
            ShardItem.kind.set(ShardItem),
        ]
        failed = shard.completed and shard.conclusion in FAILED_CONCLUSIONS
        if failed:
            actions.append(ShardItem.failed_attempts.add({shard.attempt}))
        try:
            item.update(actions=actions, condition=newer)
        except UpdateError as err:
            if err.cause_response_code != "ConditionalCheckFailedException":
                raise
            if not failed:
                return False
            # An older failed attempt arriving late: the stored pass becomes flaky.
            item.update(
                actions=[ShardItem.failed_attempts.add({shard.attempt})], condition=ShardItem.pk.exists()
            )
        return True

    def runs(self, trunk_id: str, sha: str, job: str) -> list[JobRun]:
        """Every stored shard of `job` on `sha`, as the runs the poll would report, and the
        shards not reported yet as pending runs."""
        reported = [
            shard_run(
                str(item.sk),
                int(item.attempt),
                str(item.conclusion),
                str(item.url),
                (int(a) for a in item.failed_attempts or ()),
            )
            for item in ShardItem.query(keys.shards(trunk_id, sha, job), consistent_read=True)
        ]
        return [*reported, *pending_shards(run.name for run in reported)]
