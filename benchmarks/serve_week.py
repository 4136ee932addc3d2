"""Workload `serve_week`: `trunkwatch serve`'s tick loop for a simulated week.

The loop `trunkwatch serve` runs (`Session.serve_tick`: the template's schedules, their
streams, then the messages), on the simulated clock, every `PERIOD` for seven days, against
a HUD stand-in whose page changes at every tick: a commit lands per tick and earlier ones'
jobs finish, with a job that breaks and is fixed every day, so alerts open and resolve all
week. Reports the process's resident set at the end of each day; the loop holds its memory
flat when days 2 to 7 stay level (day 1 includes the imports and the first page's backlog).
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any

from benchmarks.memory import status_kb

PERIOD = timedelta(minutes=30)
DAYS = 7
START = datetime(2026, 11, 2, 0, 0, tzinfo=UTC)
BROKEN_JOB = "pull / linux-jammy-py3.10-gcc11 / test (default, 2, 3, linux.2xlarge)"
COMMITS_PER_DAY = int(timedelta(days=1) / PERIOD)


def _outcome(job: str, index: int) -> str:
    """Every day the job breaks for five commits (from the day's tenth), then is fixed."""
    return "failure" if job == BROKEN_JOB and 10 <= index % COMMITS_PER_DAY < 15 else "success"


def serve_week() -> dict[str, Any]:
    from trunkwatch.domain.config import load_deployment
    from trunkwatch_local.scenario import DEMO_JOBS, Trunk
    from trunkwatch_local.session import Session

    trunk = Trunk(jobs=DEMO_JOBS, outcome=_outcome, start=START, commit_every=PERIOD, job_duration=PERIOD)
    session = Session()
    started = time.perf_counter()
    rss_by_day: list[float] = []
    messages = ticks = 0
    try:
        session.start(
            load_deployment(
                {"trunks": [{"repo": "pytorch/pytorch", "branch": "main", "url": session.hud.url}]}
            )
        )
        now = START
        for day in range(1, DAYS + 1):
            while now < START + day * timedelta(days=1):
                now += PERIOD
                session.hud.serve(trunk.snapshot(now))
                messages += len(session.serve_tick(now))
                ticks += 1
            rss_by_day.append(round(status_kb("VmRSS") / 1024, 1))
    finally:
        session.stop()
    return {
        "ticks": ticks,
        "period_s": PERIOD.total_seconds(),
        "wall_s": round(time.perf_counter() - started, 1),
        "rss_mb_by_day": rss_by_day,
        "growth_mb_day2_to_7": round(rss_by_day[-1] - rss_by_day[1], 1),
        "messages": messages,
    }
