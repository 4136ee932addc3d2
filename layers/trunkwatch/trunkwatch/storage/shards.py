"""A job's shards on one commit in DynamoDB, as webhook deliveries reported them: one item per
shard, the merge of its reports (`domain.shards.merge`) written by compare-and-set on its
version, so deliveries may come in any order or twice."""

from __future__ import annotations

from datetime import datetime

from pynamodb.exceptions import DoesNotExist, PutError

from trunkwatch.domain.cells import JobRun, job_key
from trunkwatch.domain.shards import Attempt, Shard, ShardReport, merge
from trunkwatch.storage import keys
from trunkwatch.storage.items import ShardItem
from trunkwatch.storage.limits import SHARD_TTL
from trunkwatch.storage.table import BoundModels


def _shard(item: ShardItem) -> Shard:
    result = None
    if item.result_attempt is not None:
        result = Attempt(
            int(item.result_attempt), True, str(item.result_conclusion), str(item.result_url or "")
        )
    return Shard(
        Attempt(int(item.attempt), bool(item.completed), str(item.conclusion), str(item.url)),
        result,
        frozenset(int(a) for a in item.failed_attempts or ()),
    )


def _store(item: ShardItem, shard: Shard, now: datetime) -> None:
    item.attempt, item.completed = shard.newest.number, shard.newest.completed
    item.conclusion, item.url = shard.newest.conclusion, shard.newest.url
    result = shard.result
    item.result_attempt = result.number if result else None
    item.result_conclusion = result.conclusion if result else None
    item.result_url = result.url if result else None
    item.failed_attempts = set(shard.failed) or None
    item.expires_at = now + SHARD_TTL
    item.save()  # conditional on the version read (none: the item must not exist)


class DynamoShards:
    def __init__(self, table: BoundModels) -> None:
        self.shards = table.model(ShardItem)

    def report(self, trunk_id: str, shard: ShardReport, now: datetime) -> bool:
        """Merge the report into its stored shard (read, merge, write if it changes, again on
        a conflict). True when the report shows in the shard (written now, or the same
        report stored before: its redelivery redoes what the first try may not have
        finished); False when newer reports hide it."""
        pk, sk = keys.shards(trunk_id, shard.sha, job_key(shard.name)), shard.name
        while True:
            try:
                item = self.shards.get(pk, sk, consistent_read=True)
                stored: Shard | None = _shard(item)
            except DoesNotExist:
                item, stored = self.shards(pk, sk), None
            merged = merge(stored, shard)
            if merged == stored:
                return merged.reflects(shard)
            try:
                _store(item, merged, now)
            except PutError as err:
                if err.cause_response_code != "ConditionalCheckFailedException":
                    raise
                continue  # another delivery of the shard wrote first: merge onto theirs
            return merged.reflects(shard)

    def runs(self, trunk_id: str, sha: str, job: str) -> list[JobRun]:
        """Every stored shard of `job` on `sha`, as the runs the poll would report (a shard
        still queued as a pending run)."""
        return [
            _shard(item).run(str(item.sk))
            for item in self.shards.query(keys.shards(trunk_id, sha, job), consistent_read=True)
        ]
