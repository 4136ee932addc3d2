"""Sources of trunk job results. Each turns a remote API into a `Snapshot`."""

from trunkwatch.sources.base import CommitResult, Snapshot, SourceError

__all__ = ["CommitResult", "Snapshot", "SourceError"]
