"""The scheduled sweep (evaluator, on the schedule): re-judge every firing job for what
changes with the clock alone (failure age, staleness), then write a settled tick so the
notifier sends reminders, what expired silences or ended inhibitions release, and whatever
a dead invocation left unsent (the notification log says what is due, design.md §4).

Deployed, the same schedule starts the poll and the sweep. A poll that writes cells settles
its own tick only after re-judging the same firing jobs at its time (see `evaluate`), so
its notification already reflects the clock; the sweep waits while that poll is open and
then, at the same instant, has nothing new to send.

A tick still open SETTLE_BOUND after its poll opened it never settles by itself: its cells'
stream records were dead-lettered, or its poll died before writing them all. The sweep then
re-judges every job of the trunk (what those records would have re-judged), settles the
tick, and counts it (`TicksSettledBySweep`, which raises an alarm)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit

from trunkwatch import sources
from trunkwatch.app.evaluate import evaluate_job, rejudge_firing
from trunkwatch.app.trunk_reads import TrunkReads
from trunkwatch.domain.config import Deployment, RuleConfig, TrunkConfig
from trunkwatch.domain.ticks import SWEEP_TICK_PREFIX
from trunkwatch.storage.port import Storage

# A poll's tick settles seconds after it opens, retries included; the sweep waits for a
# younger one and settles an older one itself.
SETTLE_BOUND = timedelta(minutes=2)

logger = Logger(child=True)
metrics = Metrics()


def sweep_tick_id(at: datetime) -> str:
    return f"{SWEEP_TICK_PREFIX}{at.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:8]}"


@dataclass
class SweepResult:
    trunk: str
    rejudged: int = 0
    waiting_for_poll: bool = False
    forced: int = 0  # ticks this sweep settled because they never settled by themselves


def sweep_trunk(storage: Storage, trunk: TrunkConfig, rule: RuleConfig, now: datetime) -> SweepResult:
    reads = TrunkReads(storage, trunk.trunk_id)  # the barrier check and the re-judging share one read
    unsettled = reads.state.unsettled
    if any(now - opened_at < SETTLE_BOUND for opened_at in unsettled.values()):
        return SweepResult(trunk.trunk_id, waiting_for_poll=True)
    result = SweepResult(trunk.trunk_id)
    judged: set[tuple[str, str]] = set()
    if unsettled:
        result.rejudged += _rejudge_all(storage, trunk, rule, now, reads, judged)
        forced = [storage.ticks.force_settle(trunk.trunk_id, poll, at) for poll, at in unsettled.items()]
        result.forced = sum(forced)
        logger.error(
            "ticks left open settled by the sweep; their cells were re-judged",
            extra={"trunk": trunk.trunk_id, "ticks": sorted(unsettled)},
        )
        metrics.add_metric(name="TicksSettledBySweep", unit=MetricUnit.Count, value=len(unsettled))
    lines = sources.reports_failure_lines(trunk)
    result.rejudged += rejudge_firing(trunk.trunk_id, rule, now, reads, judged, lines=lines)
    storage.ticks.settle_sweep(trunk.trunk_id, sweep_tick_id(now), now)
    return result


def _rejudge_all(
    storage: Storage,
    trunk: TrunkConfig,
    rule: RuleConfig,
    now: datetime,
    reads: TrunkReads,
    judged: set[tuple[str, str]],
) -> int:
    """Judge every in-scope job of the trunk's job index: which of them the lost records
    would have re-judged is not known."""
    jobs = [job for job in storage.trunks.job_names(trunk.trunk_id) if rule.in_scope(job)]
    for job in jobs:
        evaluate_job(trunk.trunk_id, job, rule, now, reads, lines=sources.reports_failure_lines(trunk))
        judged.add((trunk.trunk_id, job))
    return len(jobs)


def sweep_all(storage: Storage, deployment: Deployment, now: datetime) -> list[SweepResult]:
    return [sweep_trunk(storage, trunk, deployment.rule_for(trunk), now) for trunk in deployment.trunks]
