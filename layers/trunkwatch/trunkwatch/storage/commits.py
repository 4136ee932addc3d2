"""A trunk's commits: metadata and one state code per job column (what ingest compares)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from trunkwatch.domain.cells import Commit
from trunkwatch.storage import keys
from trunkwatch.storage.items import CommitItem


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


def item(trunk_id: str, seq: int, commit: Commit, states: str) -> CommitItem:
    return CommitItem(keys.commits(trunk_id), keys.seq_key(seq), seq=seq, states=states, **fields(commit))


def metadata_changed(stored: CommitItem, commit: Commit) -> bool:
    return (stored.title, stored.author, stored.pr, stored.url) != (
        commit.title,
        commit.author,
        commit.pr,
        commit.url,
    )


def save_all(items: Iterable[CommitItem]) -> None:
    with CommitItem.batch_write() as batch:
        for commit_item in items:
            batch.save(commit_item)
