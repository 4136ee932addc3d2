"""What every source is, returns and raises (the HTTP client is `trunkwatch.net.http`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from trunkwatch.domain.cells import Commit, JobRun
from trunkwatch.domain.clock import format_time

if TYPE_CHECKING:
    from trunkwatch.domain.config import TrunkConfig
    from trunkwatch.net.http import HttpClient
    from trunkwatch.net.rest import RateLimited


def base_url(trunk: TrunkConfig, default: str) -> str:
    """Where the trunk's source is read: its `url`, else the source's own `default`."""
    return (trunk.url or default).rstrip("/")


class SourceError(Exception):
    """A poll that could not complete; nothing of it is written, the next poll catches up.

    `kind` names the cause for the metric dimension: timeout, http_5xx, rate_limited,
    auth, http_4xx, malformed, network.
    """

    def __init__(self, kind: str, message: str, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.retry_after_s = retry_after_s


@dataclass(frozen=True)
class CommitRuns:
    """One trunk commit and the job runs the source reported for it.

    `complete` means `runs` is every job of the commit (a job key missing from it has no
    cell there); otherwise only the job keys present are updated (the GitHub source
    re-fetches only the runs that changed).
    """

    commit: Commit
    runs: tuple[JobRun, ...]
    complete: bool = True


@dataclass
class Snapshot:
    """A source's view of the trunk, newest commit first, plus the source state to keep."""

    commits: list[CommitRuns]
    # Opaque, JSON-serialisable state the source wants back next poll (ETags, run versions).
    state: dict[str, Any] = field(default_factory=dict)
    http_requests: int = 0
    # Set when a rate limit cut the poll short: what it returns is consistent and is stored,
    # the rest follows once the limit allows.
    rate_limited: SourceError | None = None
    # The source answered exactly what it answered at the last stored poll: nothing to compare.
    unchanged: bool = False


class Source(Protocol):
    """What ingest polls: `poll` returns the trunk's snapshot. `state` is what the previous
    poll's snapshot asked to keep (ETags, digests), `{}` the first time or after a change of
    the job scope."""

    def poll(self, state: dict[str, Any], now: datetime) -> Snapshot: ...


class SourceClass(Protocol):
    """A source is built per poll from the trunk's configuration, its token (resolved from the
    configured reference, None without one) and the poll's HTTP client, which carries the
    poll's deadline and limits."""

    def __call__(self, trunk: TrunkConfig, token: str | None, http: HttpClient | None) -> Source: ...


def rate_limit_error(message: str, until: datetime, now: datetime) -> SourceError:
    """A poll's rate limit, as its caller logs and counts it."""
    return SourceError(
        "rate_limited", f"{message}; no request before {format_time(until)}", (until - now).total_seconds()
    )


def stopped_by(limit: RateLimited, state: dict[str, Any], now: datetime, requests: int) -> Snapshot:
    """The snapshot of a poll a rate limit stopped: nothing new, and no request before the
    limit allows (kept in the state as `not_before`)."""
    until = limit.until(now)
    return Snapshot(
        commits=[],
        state={**state, "not_before": format_time(until)},
        http_requests=requests,
        rate_limited=rate_limit_error(str(limit), until, now),
    )
