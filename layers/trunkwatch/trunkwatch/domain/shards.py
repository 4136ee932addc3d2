"""A job's shards as webhook deliveries report them, one at a time (pure).

A shard's reports merge like the poll's runs: the latest attempt decides, a success after a
failed attempt is flaky, and a result never goes back to pending: while a newer attempt is
queued (a retry), the shard shows its newest result, as a stored cell keeps it. The merge
depends on which reports came, not on their order, so deliveries may arrive in any order or
twice. A job's shards are those reported: a shard queued is pending, as the poll's
in-progress runs are, and a shard that never reports did not run (a job's name may say it
is shard 1 of 2 where shard 2 never runs).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from trunkwatch.domain.cells import JobRun

# `, <shard>, <shards>` inside a job name's parentheses.
_SHARDS = re.compile(r"\([^()]*?, \d+, (\d+)(?:, [^()]*)?\)")

# The conclusions of a failed shard attempt (a pass after one is flaky).
FAILED_CONCLUSIONS = frozenset({"failure", "timed_out", "startup_failure"})


@dataclass(frozen=True)
class ShardReport:
    """One job (one shard) of one run attempt on one commit."""

    sha: str
    name: str  # `<workflow> / <job>`, the poll's job name
    run_id: int
    attempt: int
    completed: bool
    conclusion: str  # the conclusion once completed, else the status (queued, waiting)
    url: str = ""


@dataclass(frozen=True)
class Attempt:
    number: int
    completed: bool
    conclusion: str  # the conclusion once completed, else the status
    url: str = ""

    def after(self, other: Attempt) -> bool:
        """A later attempt, or the same attempt's result after its queued report."""
        return self.number > other.number or (
            self.number == other.number and self.completed and not other.completed
        )


@dataclass(frozen=True)
class Shard:
    """What the reports of one shard say: its newest attempt, its newest attempt with a
    result, and the attempts that failed."""

    newest: Attempt
    result: Attempt | None = None
    failed: frozenset[int] = frozenset()

    def run(self, name: str) -> JobRun:
        """The shard as the poll reports it: its newest result (pending before one), flaky
        when it passed after an earlier attempt failed."""
        shown = self.result or self.newest
        return JobRun(
            name=name,
            conclusion=shown.conclusion,
            url=shown.url,
            attempt=shown.number,
            failed_before=shown.conclusion == "success" and any(a < shown.number for a in self.failed),
        )

    def reflects(self, report: ShardReport) -> bool:
        """Whether `report` shows in the shard (False: newer reports hide it entirely)."""
        attempt = _attempt(report)
        return attempt in (self.newest, self.result) or (
            report.completed and report.conclusion in FAILED_CONCLUSIONS and report.attempt in self.failed
        )


def sharded(name: str) -> bool:
    """Whether a job's name says it is one of several shards (`test (default, 1, 2, r)`)."""
    found = _SHARDS.search(name)
    return found is not None and int(found.group(1)) > 1


def merge(stored: Shard | None, report: ShardReport) -> Shard:
    """The shard once `report` is added to what `stored` says."""
    attempt = _attempt(report)
    failed = stored.failed if stored is not None else frozenset()
    if report.completed and report.conclusion in FAILED_CONCLUSIONS:
        failed |= {report.attempt}
    newest = attempt if stored is None or attempt.after(stored.newest) else stored.newest
    result = stored.result if stored is not None else None
    if report.completed and (result is None or report.attempt > result.number):
        result = attempt
    return Shard(newest, result, failed)


def _attempt(report: ShardReport) -> Attempt:
    return Attempt(report.attempt, report.completed, report.conclusion, report.url)
