"""A trunk's commits in DynamoDB: metadata and one state code per job column (what ingest
compares), and a pointer by sha to each. Commits are only placed (item and pointer in one
conditional transaction) and their states only compare-and-set (see `app/ledger.py`)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import timedelta
from typing import Any

from pynamodb.exceptions import DoesNotExist, TransactWriteError, UpdateError
from pynamodb.expressions.condition import Condition
from pynamodb.expressions.update import Action
from pynamodb.transactions import TransactWrite

from trunkwatch.domain.cells import Commit
from trunkwatch.domain.commits import RevertMark, ShaPointer, StoredCommit
from trunkwatch.storage import keys
from trunkwatch.storage.items import CommitItem, ShaPointerItem
from trunkwatch.storage.table import BoundModels

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


def _item(model: type[CommitItem], trunk_id: str, stored: StoredCommit, retention: timedelta) -> CommitItem:
    """The commit's item; it expires `retention` after the commit's time, as its cells do."""
    return model(
        keys.commits(trunk_id),
        keys.seq_key(stored.seq),
        seq=stored.seq,
        states=stored.states,
        autoreverted_by=stored.commit.autoreverted_by,
        expires_at=stored.commit.time + retention,
        **fields(stored.commit),
    )


class DynamoCommits:
    def __init__(self, table: BoundModels) -> None:
        self.commits = table.model(CommitItem)
        self.pointer_items = table.model(ShaPointerItem)
        self.connection = table.connection

    def newest(self, trunk_id: str, limit: int) -> list[StoredCommit]:
        query = self.commits.query(keys.commits(trunk_id), scan_index_forward=False, limit=limit)
        return [_stored(item) for item in query]

    def get(self, trunk_id: str, seq: int) -> StoredCommit | None:
        try:
            return _stored(self.commits.get(keys.commits(trunk_id), keys.seq_key(seq), consistent_read=True))
        except DoesNotExist:
            return None

    def mark(self, trunk_id: str, seq: int) -> RevertMark | None:
        """The revert mark of the commit at `seq`, None once it has expired. The projection
        holds `seq`: with `autoreverted_by` alone, an unreverted commit would read as none."""
        try:
            item = self.commits.get(
                keys.commits(trunk_id), keys.seq_key(seq), attributes_to_get=["seq", "autoreverted_by"]
            )
        except DoesNotExist:
            return None
        return RevertMark(item.autoreverted_by)

    def autoreverted(self, trunk_id: str, seqs: Iterable[int]) -> dict[int, str]:
        """Which of these commits the source reports as already reverted, and by what. Read
        when an alert is shown, not copied onto cells: a revert usually lands after the
        failures."""
        wanted = sorted(set(seqs))
        if not wanted:
            return {}
        found = self.commits.batch_get(
            [(keys.commits(trunk_id), keys.seq_key(seq)) for seq in wanted],
            attributes_to_get=["seq", "autoreverted_by"],
        )
        return {int(c.seq): str(c.autoreverted_by) for c in found if c.autoreverted_by}

    def place(
        self,
        trunk_id: str,
        commit: StoredCommit,
        retention: timedelta,
        seen: ShaPointer | None,
        parent: tuple[str, ShaPointer | None] | None = None,
    ) -> bool:
        """Save a new commit item and its pointer in one transaction (the port's `place`):
        False when a condition failed, the caller reads again."""
        # Whole items, each on the condition that it is still as read: the puts write exactly
        # the pointer that was read plus this placement.
        expires_at = commit.commit.time + retention
        pointers = self.pointer_items
        pointer = pointers(
            keys.commit_sha(trunk_id, commit.commit.sha),
            keys.SEQ,
            seq=commit.seq,
            child=seen.child if seen is not None else None,
            expires_at=expires_at,
        )
        try:
            with TransactWrite(connection=self.connection) as transaction:
                transaction.save(
                    _item(self.commits, trunk_id, commit, retention), condition=CommitItem.pk.does_not_exist()
                )
                transaction.save(pointer, condition=_pointer_is(seen))
                if parent is not None:
                    sha, parent_seen = parent
                    bound = pointers(
                        keys.commit_sha(trunk_id, sha), keys.SEQ, child=commit.seq, expires_at=expires_at
                    )
                    transaction.save(bound, condition=_pointer_is(parent_seen))
        except TransactWriteError as err:
            reasons = [reason.code for reason in err.cancellation_reasons or [] if reason is not None]
            if "ConditionalCheckFailed" in reasons:
                return False
            raise
        return True

    def save_states(self, trunk_id: str, seq: int, old: str, new: str, commit: Commit | None = None) -> bool:
        """Replace the commit's state string (and with `commit` its metadata) if it is still
        `old` (another writer changed it: False, the caller reads again)."""
        actions: list[Action] = [CommitItem.states.set(new)]
        if commit is not None:
            actions += [
                CommitItem.title.set(commit.title),
                CommitItem.author.set(commit.author),
                CommitItem.url.set(commit.url),
                CommitItem.pr.set(commit.pr) if commit.pr is not None else CommitItem.pr.remove(),
                CommitItem.autoreverted_by.set(commit.autoreverted_by)
                if commit.autoreverted_by is not None
                else CommitItem.autoreverted_by.remove(),
            ]
        try:
            self.commits(keys.commits(trunk_id), keys.seq_key(seq)).update(
                actions=actions, condition=CommitItem.sha.exists() & (CommitItem.states == old)
            )
        except UpdateError as err:
            if err.cause_response_code == _CONDITION_FAILED:
                return False
            raise
        return True

    def pointers(self, trunk_id: str, shas: Iterable[str]) -> dict[str, ShaPointer]:
        """The pointers of those of `shas` that have one (placed, or bounding a child)."""
        wanted = sorted(set(shas))
        if not wanted:
            return {}
        found = self.pointer_items.batch_get([(keys.commit_sha(trunk_id, sha), keys.SEQ) for sha in wanted])
        return {
            item.pk.rsplit("#", 1)[1]: ShaPointer(
                int(item.seq) if item.seq is not None else None,
                int(item.child) if item.child is not None else None,
            )
            for item in found
        }

    def seqs_of(self, trunk_id: str, shas: Iterable[str]) -> dict[str, int]:
        """The seqs of those of `shas` that are placed trunk commits."""
        return {sha: seq for sha, p in self.pointers(trunk_id, shas).items() if (seq := p.seq) is not None}


def _pointer_is(seen: ShaPointer | None) -> Condition:
    """A pointer still as read (None: there was none)."""
    if seen is None:
        return ShaPointerItem.pk.does_not_exist()
    seq = ShaPointerItem.seq.does_not_exist() if seen.seq is None else ShaPointerItem.seq == seen.seq
    child = (
        ShaPointerItem.child.does_not_exist() if seen.child is None else ShaPointerItem.child == seen.child
    )
    return seq & child
