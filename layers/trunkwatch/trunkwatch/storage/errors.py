"""What the stores raise, whichever implementation is behind them: callers above `storage/`
never see a PynamoDB or botocore exception for an outcome they handle."""

from __future__ import annotations


class Conflict(Exception):
    """A version-checked write lost: another writer changed the record since it was read.
    The caller reads again and decides again."""
