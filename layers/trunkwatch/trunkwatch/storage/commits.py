"""A trunk's commits in DynamoDB: metadata and one state code per job column (what ingest
compares), and a pointer by sha to each."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import timedelta
from typing import Any

from pynamodb.exceptions import DoesNotExist, PutError, UpdateError

from trunkwatch.domain.cells import Commit
from trunkwatch.storage import keys
from trunkwatch.storage.items import CommitItem, CommitPointer
from trunkwatch.storage.records import CommitMark, StoredCommit

_CONDITION_FAILED = "ConditionalCheckFailedException"


def fields(commit: Commit) -> dict[str, Any]:
    """A commit's attributes as the commit item and an alert's commit ref both store them."""
    return {
        "sha": commit.sha,
        "time": commit.time,
        "title": commit.title,
        "author": commit.author,
        "pr": commit.pr,
        "url": commit.url,
    }


def _stored(item: CommitItem) -> StoredCommit:
    commit = Commit(
        sha=str(item.sha),
        time=item.time,
        title=str(item.title),
        author=str(item.author),
        pr=int(item.pr) if item.pr is not None else None,
        url=str(item.url),
        autoreverted_by=item.autoreverted_by,
    )
    return StoredCommit(int(item.seq), commit, str(item.states))


def _item(trunk_id: str, stored: StoredCommit, retention: timedelta) -> CommitItem:
    """The commit's item; it expires `retention` after the commit's time, as its cells do."""
    return CommitItem(
        keys.commits(trunk_id),
        keys.seq_key(stored.seq),
        seq=stored.seq,
        states=stored.states,
        autoreverted_by=stored.commit.autoreverted_by,
        expires_at=stored.commit.time + retention,
        **fields(stored.commit),
    )


class DynamoCommits:
    def newest(self, trunk_id: str, limit: int) -> list[StoredCommit]:
        query = CommitItem.query(keys.commits(trunk_id), scan_index_forward=False, limit=limit)
        return [_stored(item) for item in query]

    def get(self, trunk_id: str, seq: int) -> StoredCommit | None:
        try:
            return _stored(CommitItem.get(keys.commits(trunk_id), keys.seq_key(seq), consistent_read=True))
        except DoesNotExist:
            return None

    def mark(self, trunk_id: str, seq: int) -> CommitMark | None:
        """The revert mark of the commit at `seq`, None once it has expired. The projection
        holds `seq`: with `autoreverted_by` alone, an unreverted commit would read as none."""
        try:
            item = CommitItem.get(
                keys.commits(trunk_id), keys.seq_key(seq), attributes_to_get=["seq", "autoreverted_by"]
            )
        except DoesNotExist:
            return None
        return CommitMark(item.autoreverted_by)

    def autoreverted(self, trunk_id: str, seqs: Iterable[int]) -> dict[int, str]:
        """Which of these commits the source reports as already reverted, and by what. Read
        when an alert is shown, not copied onto cells: a revert usually lands after the
        failures."""
        wanted = sorted(set(seqs))
        if not wanted:
            return {}
        found = CommitItem.batch_get(
            [(keys.commits(trunk_id), keys.seq_key(seq)) for seq in wanted],
            attributes_to_get=["seq", "autoreverted_by"],
        )
        return {int(c.seq): str(c.autoreverted_by) for c in found if c.autoreverted_by}

    def save_all(self, trunk_id: str, commits: Iterable[StoredCommit], retention: timedelta) -> None:
        with CommitItem.batch_write() as batch:
            for stored in commits:
                batch.save(_item(trunk_id, stored, retention))

    def place(self, trunk_id: str, commit: StoredCommit, retention: timedelta) -> bool:
        """Save a new commit unless its seq is taken (False)."""
        try:
            _item(trunk_id, commit, retention).save(condition=CommitItem.pk.does_not_exist())
        except PutError as err:
            if err.cause_response_code == _CONDITION_FAILED:
                return False
            raise
        return True

    def save_states(self, trunk_id: str, seq: int, old: str, new: str) -> bool:
        """Replace the commit's state string if it is still `old` (another writer changed it:
        False, the caller reads again)."""
        try:
            CommitItem(keys.commits(trunk_id), keys.seq_key(seq)).update(
                actions=[CommitItem.states.set(new)],
                condition=CommitItem.sha.exists() & (CommitItem.states == old),
            )
        except UpdateError as err:
            if err.cause_response_code == _CONDITION_FAILED:
                return False
            raise
        return True

    def save_pointers(self, trunk_id: str, commits: Iterable[StoredCommit], retention: timedelta) -> None:
        """Written with a new commit item, and expiring with it: webhook deliveries find
        commits by sha."""
        with CommitPointer.batch_write() as batch:
            for stored in commits:
                batch.save(
                    CommitPointer(
                        keys.commit_sha(trunk_id, stored.commit.sha),
                        keys.SEQ,
                        seq=stored.seq,
                        expires_at=stored.commit.time + retention,
                    )
                )

    def seqs_of(self, trunk_id: str, shas: Iterable[str]) -> dict[str, int]:
        """The seqs of those of `shas` that are known trunk commits."""
        wanted = sorted(set(shas))
        if not wanted:
            return {}
        found = CommitPointer.batch_get([(keys.commit_sha(trunk_id, sha), keys.SEQ) for sha in wanted])
        return {item.pk.rsplit("#", 1)[1]: int(item.seq) for item in found}
