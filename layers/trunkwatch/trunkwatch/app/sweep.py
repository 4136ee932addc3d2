"""The scheduled sweep (evaluator, on the schedule): re-judge every firing job for what
changes with the clock alone (failure age, staleness), then write a settled tick so the
notifier sends reminders and what expired silences or ended inhibitions release.

Deployed, the same schedule starts the poll and the sweep. A poll that writes cells settles
its own tick only after re-judging the same firing jobs at its time (see `evaluate`), so
its notification already reflects the clock; the sweep waits while that poll is open and
then, at the same instant, has nothing new to send."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta

from trunkwatch.app.evaluate import TrunkReads, rejudge_firing
from trunkwatch.domain.config import Deployment, RuleConfig, TrunkConfig
from trunkwatch.storage.port import Storage

# A sweep waits this long for an open poll to settle (its tick notifies) before going ahead.
BARRIER_TIMEOUT = timedelta(minutes=5)


@dataclass
class SweepResult:
    trunk: str
    rejudged: int = 0
    waiting_for_poll: bool = False


def sweep_trunk(storage: Storage, trunk: TrunkConfig, rule: RuleConfig, now: datetime) -> SweepResult:
    reads = TrunkReads(storage, trunk.trunk_id)  # the barrier check and the re-judging share one read
    state = reads.state
    if state.open_poll and state.open_poll_at and now - state.open_poll_at < BARRIER_TIMEOUT:
        return SweepResult(trunk.trunk_id, waiting_for_poll=True)
    rejudged = rejudge_firing(trunk.trunk_id, rule, now, reads, set())
    storage.ticks.settle_sweep(
        trunk.trunk_id, f"sweep-{now.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:8]}", now
    )
    return SweepResult(trunk.trunk_id, rejudged=rejudged)


def sweep_all(storage: Storage, deployment: Deployment, now: datetime) -> list[SweepResult]:
    return [sweep_trunk(storage, trunk, deployment.rule_for(trunk), now) for trunk in deployment.trunks]
