"""A job's shards as webhook deliveries report them, one at a time (pure).

A shard's reports merge like the poll's runs: the latest attempt decides, a success after a
failed attempt is flaky. A sharded job's name says how many shards it has (`test (default,
2, 5, runner)` is shard 2 of 5), so the shards not reported yet count as pending, as the
poll's in-progress runs do.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from trunkwatch.domain.cells import JobRun, job_key

# `(<config>, <shard>, <shards>[, <runner>])` at the end of a sharded job's name.
_SHARD = re.compile(r"^(.*\([^()]*?, )(\d+), (\d+)((?:, [^()]*)?\))$")


@dataclass(frozen=True)
class ShardReport:
    """One job (one shard) of one run attempt on one commit."""

    sha: str
    name: str  # `<workflow> / <job>`, the poll's job name
    run_id: int
    attempt: int
    completed: bool
    conclusion: str  # the conclusion once completed, else the status (queued, in_progress...)
    url: str = ""


def shard_run(name: str, attempt: int, conclusion: str, url: str, failed_attempts: Iterable[int]) -> JobRun:
    """A stored shard as the `JobRun` the poll would report: flaky when it passed after an
    earlier attempt failed."""
    return JobRun(
        name=name,
        conclusion=conclusion,
        url=url,
        attempt=attempt,
        failed_before=conclusion == "success" and any(a < attempt for a in failed_attempts),
    )


def pending_shards(names: Iterable[str]) -> list[JobRun]:
    """The shards of the reported sharded jobs that have not reported: pending runs. Shards
    of one job run on different runner fleets are one job (`job_key`)."""
    seen: dict[tuple[str, int], tuple[str, str, set[int]]] = {}
    for name in names:
        found = _SHARD.match(name)
        if found is None:
            continue
        head, index, count, tail = found.groups()
        _, _, indexes = seen.setdefault((job_key(name), int(count)), (head, tail, set()))
        indexes.add(int(index))
    return [
        JobRun(name=f"{head}{i}, {count}{tail}", conclusion="in_progress")
        for (_, count), (head, tail, indexes) in sorted(seen.items())
        for i in range(1, count + 1)
        if i not in indexes
    ]
