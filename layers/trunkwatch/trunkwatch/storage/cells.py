"""Job cells in DynamoDB, one partition per (trunk, job), newest commit last in sort order."""

from __future__ import annotations

import contextvars
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

from pynamodb.exceptions import PutError

from trunkwatch.domain.cells import CellState, CellWrite, Commit, StoredCell
from trunkwatch.storage import keys
from trunkwatch.storage.items import CellItem
from trunkwatch.storage.limits import TITLE_MAX
from trunkwatch.storage.table import BoundModels

# Conditional puts in flight at once: PynamoDB's connection pool size (its default
# `max_pool_connections`), so that no request waits for a connection or opens one it drops.
PENDING_WRITERS = 10


def cell_item(model: type[CellItem], trunk_id: str, write: CellWrite, retention: timedelta) -> CellItem:
    """The cell's item (of `model`: `CellItem` bound to a table, or itself for its image); it
    expires `retention` after its commit's time, with the commit."""
    cell, commit = write.cell, write.commit
    return model(
        keys.cells(trunk_id, cell.job),
        keys.seq_key(write.seq),
        trunk=trunk_id,
        job=cell.job,
        seq=write.seq,
        sha=cell.sha,
        state=cell.state.value,
        poll=write.poll,
        url=cell.url,
        attempt=cell.attempt,
        failure_lines=list(cell.failure_lines) or None,
        commit_time=commit.time,
        title=commit.title[:TITLE_MAX],
        author=commit.author,
        pr=commit.pr,
        commit_url=commit.url,
        prior_seq=write.prior_seq,
        expires_at=commit.time + retention,
    )


class DynamoCells:
    def __init__(self, table: BoundModels) -> None:
        self.cells = table.model(CellItem)

    def save_all(self, trunk_id: str, writes: Iterable[CellWrite], retention: timedelta) -> None:
        """Results in batches; pending cells one conditional put each (a batch write takes no
        condition), on the condition that the item holds no result, PENDING_WRITERS at a
        time: a landing commit brings a pending cell per job, which one after the other
        would take a round trip each. A failed condition (a result is there) is the
        expected outcome; any other error is raised once every put has ended."""
        pending = []
        with self.cells.batch_write() as batch:
            for write in writes:
                if write.cell.state == CellState.PENDING:
                    pending.append(cell_item(self.cells, trunk_id, write, retention))
                else:
                    batch.save(cell_item(self.cells, trunk_id, write, retention))
        if not pending:
            return
        # The first here: the model's connection makes its client once, not in each thread.
        _save_pending(pending[0])
        if len(pending) == 1:
            return
        with ThreadPoolExecutor(min(PENDING_WRITERS, len(pending) - 1)) as pool:
            # Each put in a copy of the caller's context, as asyncio.to_thread runs a call:
            # what the caller set there (a request's labels) holds for its requests too.
            puts = [pool.submit(contextvars.copy_context().run, _save_pending, item) for item in pending[1:]]
        for put in puts:
            put.result()

    def newest_seq(self, trunk_id: str, job: str) -> int | None:
        """The seq of the job's newest stored cell (None before its first)."""
        query = self.cells.query(keys.cells(trunk_id, job), scan_index_forward=False, limit=1)
        return next((int(cell.seq) for cell in query), None)

    def newest_first(self, trunk_id: str, job: str, limit: int, page_size: int) -> Iterator[StoredCell]:
        """The job's cells newest first, fetched a page at a time as the caller walks them
        (lazy: the Query's pages are read from this store's table whenever the walk goes on)."""
        query = self.cells.query(
            keys.cells(trunk_id, job), scan_index_forward=False, limit=limit, page_size=page_size
        )
        return (
            StoredCell(
                seq=int(cell.seq),
                state=CellState(cell.state),
                commit=Commit(
                    sha=cell.sha,
                    time=cell.commit_time,
                    title=cell.title,
                    author=cell.author,
                    pr=int(cell.pr) if cell.pr is not None else None,
                    url=cell.commit_url,
                ),
                url=cell.url,
                failure_lines=tuple(str(line) for line in cell.failure_lines or ()),
            )
            for cell in query
        )


def _save_pending(item: CellItem) -> None:
    """Put a pending cell's item unless it holds a result."""
    try:
        item.save(condition=CellItem.sk.does_not_exist() | (CellItem.state == CellState.PENDING.value))
    except PutError as err:
        if err.cause_response_code != "ConditionalCheckFailedException":
            raise
