"""A trunk's commits: metadata and one state code per job column (what ingest compares)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import timedelta
from typing import Any

from pynamodb.exceptions import DoesNotExist, PutError, UpdateError

from trunkwatch.domain.cells import Commit
from trunkwatch.storage import keys
from trunkwatch.storage.items import CommitItem, CommitPointer


def newest(trunk_id: str, limit: int) -> list[CommitItem]:
    return list(CommitItem.query(keys.commits(trunk_id), scan_index_forward=False, limit=limit))


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


def commit_of(stored: CommitItem) -> Commit:
    """The commit a commit item stores (the inverse of `fields`)."""
    return Commit(
        sha=str(stored.sha),
        time=stored.time,
        title=str(stored.title),
        author=str(stored.author),
        pr=int(stored.pr) if stored.pr is not None else None,
        url=str(stored.url),
    )


def item(trunk_id: str, seq: int, commit: Commit, states: str, retention: timedelta) -> CommitItem:
    """The commit's item; it expires `retention` after the commit's time, as its cells do."""
    return CommitItem(
        keys.commits(trunk_id),
        keys.seq_key(seq),
        seq=seq,
        states=states,
        autoreverted_by=commit.autoreverted_by,
        expires_at=commit.time + retention,
        **fields(commit),
    )


def metadata_changed(stored: CommitItem, commit: Commit) -> bool:
    return (stored.title, stored.author, stored.pr, stored.url, stored.autoreverted_by) != (
        commit.title,
        commit.author,
        commit.pr,
        commit.url,
        commit.autoreverted_by,
    )


def autoreverted(trunk_id: str, seqs: Iterable[int]) -> dict[int, str]:
    """Which of these commits the source reports as already reverted, and by what. Read when
    an alert is shown, not copied onto cells: a revert usually lands after the failures."""
    wanted = sorted(set(seqs))
    if not wanted:
        return {}
    found = CommitItem.batch_get(
        [(keys.commits(trunk_id), keys.seq_key(seq)) for seq in wanted],
        attributes_to_get=["seq", "autoreverted_by"],
    )
    return {int(c.seq): str(c.autoreverted_by) for c in found if c.autoreverted_by}


def stored(trunk_id: str, seq: int) -> CommitItem | None:
    """The commit item at `seq` (its revert mark only), None once it has expired."""
    try:
        return CommitItem.get(
            keys.commits(trunk_id), keys.seq_key(seq), attributes_to_get=["autoreverted_by"]
        )
    except DoesNotExist:
        return None


def save_all(items: Iterable[CommitItem]) -> None:
    with CommitItem.batch_write() as batch:
        for commit_item in items:
            batch.save(commit_item)


def pointer(trunk_id: str, seq: int, commit: Commit, retention: timedelta) -> CommitPointer:
    """Written with a new commit item, and expiring with it: webhook deliveries find commits
    by sha."""
    return CommitPointer(
        keys.commit_sha(trunk_id, commit.sha), keys.SEQ, seq=seq, expires_at=commit.time + retention
    )


def save_pointers(items: Iterable[CommitPointer]) -> None:
    with CommitPointer.batch_write() as batch:
        for item in items:
            batch.save(item)


def seqs_of(trunk_id: str, shas: Iterable[str]) -> dict[str, int]:
    """The seqs of those of `shas` that are known trunk commits."""
    wanted = sorted(set(shas))
    if not wanted:
        return {}
    found = CommitPointer.batch_get([(keys.commit_sha(trunk_id, sha), keys.SEQ) for sha in wanted])
    return {item.pk.rsplit("#", 1)[1]: int(item.seq) for item in found}


def get(trunk_id: str, seq: int) -> CommitItem | None:
    try:
        return CommitItem.get(keys.commits(trunk_id), keys.seq_key(seq), consistent_read=True)
    except DoesNotExist:
        return None


def save_states(trunk_id: str, seq: int, old: str, new: str) -> bool:
    """Replace the commit's state string if it is still `old` (another writer changed it:
    False, the caller reads again)."""
    try:
        CommitItem(keys.commits(trunk_id), keys.seq_key(seq)).update(
            actions=[CommitItem.states.set(new)],
            condition=CommitItem.sha.exists() & (CommitItem.states == old),
        )
    except UpdateError as err:
        if err.cause_response_code == "ConditionalCheckFailedException":
            return False
        raise
    return True


def place(commit_item: CommitItem) -> bool:
    """Save a new commit item unless its seq is taken (False)."""
    try:
        commit_item.save(condition=CommitItem.pk.does_not_exist())
    except PutError as err:
        if err.cause_response_code == "ConditionalCheckFailedException":
            return False
        raise
    return True
