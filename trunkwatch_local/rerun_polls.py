"""The polls a deployed schedule makes between a replay's snapshots while reruns are planned
or running (`confirm: rerun`).

Deployed, the schedule polls every period (a minute): a rerun the evaluator planned is sent
at the next poll, and its result is seen at the first poll after it is over. A replay polls
only at its snapshots (a red trunk's every 30 minutes), which would delay both by up to a
snapshot interval each. So while a rerun is planned or running, the replay also polls at the
times the schedule would: one period after a plan (or a refused request, until its tries are
used up), and at the first schedule tick at or after a rerun is due. The HUD stand-in
re-serves its current snapshot then, with the reruns that are over. With no rerun planned or
running there is no such poll: every other replay runs exactly at its events."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta

from trunkwatch.app.confirm import waits_for_request
from trunkwatch.domain.reruns import RerunRecord


def next_rerun_poll(
    now: datetime, period: timedelta, records: Iterable[RerunRecord], due: Iterable[datetime]
) -> datetime | None:
    """When the schedule, ticking every `period` from `now` (the last poll), next polls for a
    rerun: one period on when one of `records` (the trunk's open reruns) was planned at `now`
    or refused and is still to be tried again, else the first tick at or after the earliest
    of `due` (when the reruns running are over) that is later than `now`; None for neither."""
    if any(waits_for_request(record, now) for record in records):
        return now + period
    later = [at for at in due if at > now]
    if not later:
        return None
    ticks = -(-(min(later) - now) // period)  # whole periods, rounded up
    return now + ticks * period
