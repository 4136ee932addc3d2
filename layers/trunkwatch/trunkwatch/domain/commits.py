"""A trunk's commits as the ledger keeps them: placed at a `seq`, found by sha."""

from __future__ import annotations

from dataclasses import dataclass

from trunkwatch.domain.cells import Commit


@dataclass(frozen=True)
class StoredCommit:
    """A trunk commit at its position `seq`, with one CellState code per job column ('-' =
    no cell): what ingest compares a snapshot against."""

    seq: int
    commit: Commit
    states: str = ""


@dataclass(frozen=True)
class ShaPointer:
    """A commit's by-sha pointer: its `seq` once placed, and `child`, the seq of its child
    when that was placed first (a push delivered before its parent's push)."""

    seq: int | None = None
    child: int | None = None


@dataclass(frozen=True)
class RevertMark:
    """What a stored commit item says about its revert (it exists: it has not expired)."""

    autoreverted_by: str | None
