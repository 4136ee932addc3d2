"""Workload `buildkite_poll`: a Buildkite trunk at vLLM's volume, its polls measured and priced
for a month (issue 40: 64 commits a day to `main`, 266 jobs each).

The trunk is `scenario.Trunk` with `VLLM_JOBS` of the synthetic PyTorch-scale trunk's job
columns (benchmarks/trunk.py: the same noise, flaky jobs retried green), a commit every
day / `VLLM_COMMITS_PER_DAY`, each commit's jobs finishing an hour after it. Its snapshots
become Buildkite builds listings by the converter the Buildkite tests use
(tests/support/buildkite.py: one build per commit, each job of its column's name), served by
the Buildkite stand-in; `poll_trunk` polls them with the `buildkite` source (`per_page`
`WINDOW` commits) into the template's table on moto, metered as the ingest workload is. The
stand-in runs in the same process: building a page it had not answered before (after a
change) counts in the poll's time, Buildkite's own response time does not.

Five polls: the first (an empty table, no source state: the window's pages), the second (the
first with state: its two listings, whose pages it has no ETag for yet), a quiet one
(nothing changed: two conditional requests answered 304), one right after a commit's jobs
finished (its build finishes), and one right after a commit landed (a new running build).
They are priced for a month as `cost.py` prices one more trunk's polls; the evaluator and
notifier's work is the same as for the same cells from any source (the cost workload's).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from benchmarks.cost import DAYS_PER_MONTH, ingest_items, repeated, ticks_per_day
from benchmarks.harness import InProcessAws
from benchmarks.ingest import poll_figures
from benchmarks.memory import peak_growth
from benchmarks.trunk import DAY_START, JOB_DURATION, job_columns, outcome
from benchmarks.usage import Meter, Usage
from tests.support.buildkite import PIPELINE, Converter
from trunkwatch.app.ingest import PollResult, poll_trunk
from trunkwatch.domain.clock import format_time
from trunkwatch.domain.config import load_deployment
from trunkwatch.net.http import HttpClient
from trunkwatch.sources.buildkite import BuildkiteSource
from trunkwatch_local.buildkite_server import BuildkiteServer
from trunkwatch_local.scenario import Trunk

VLLM_COMMITS_PER_DAY = 64
VLLM_JOBS = 266
WINDOW = 50  # examples/vllm.yaml's per_page
ENVIRONMENTS = 6  # of the synthetic trunk: 300 columns, the first VLLM_JOBS taken
# The stand-in's rate limit: far above what four polls ask (its minute needs a clock).
LIMIT = 10_000


def vllm_trunk() -> Trunk:
    return Trunk(
        jobs=job_columns(ENVIRONMENTS)[:VLLM_JOBS],
        outcome=outcome,
        start=DAY_START - WINDOW * timedelta(days=1) / VLLM_COMMITS_PER_DAY,
        commit_every=timedelta(days=1) / VLLM_COMMITS_PER_DAY,
        job_duration=JOB_DURATION,
        window=WINDOW,
    )


def poll_times(trunk: Trunk, after: datetime) -> dict[str, datetime]:
    """Each phase's poll time: the first, second and quiet polls just after a commit landed
    at or after `after`, then a second after the next finish and after the next landing."""
    landed = -(-(after - trunk.start) // trunk.commit_every)
    start = trunk.start + landed * trunk.commit_every + timedelta(seconds=1)
    lands = (trunk.start + i * trunk.commit_every for i in range(landed + 1, landed + 10))
    finishes = (trunk.start + i * trunk.commit_every + trunk.job_duration for i in range(landed + 1))
    next_land = next(t for t in lands if t > start)
    next_finish = min(t for t in finishes if t > start)
    return {
        "first_poll": start,
        "second_poll": start,
        "quiet_poll": start,
        "finishing_poll": next_finish + timedelta(seconds=1),
        "landing_poll": next_land + timedelta(seconds=1),
    }


def finished_on_time(trunk: Trunk, builds: list[dict[str, Any]], at: datetime) -> list[dict[str, Any]]:
    """`builds` (the listing at `at`) with each finished one's `finished_at` when its
    commit's jobs finished (the converter, which sees snapshots only, says when it first saw
    it finished: the first listing's builds would all share one time, and the
    `finished_from` listing return them all on every poll)."""
    landed = int((at - trunk.start) / trunk.commit_every) + 1
    index = {trunk.sha(i): i for i in range(max(0, landed - trunk.window), landed)}
    for build in builds:
        if build["finished_at"]:
            done = trunk.start + index[build["commit"]] * trunk.commit_every + trunk.job_duration
            build["finished_at"] = format_time(done)
    return builds


def buildkite_poll() -> dict[str, Any]:
    trunk = vllm_trunk()
    server = BuildkiteServer(PIPELINE, limit=LIMIT)
    converter = Converter(PIPELINE)
    try:
        config = {
            "repo": "vllm-project/vllm",
            "source": "buildkite",
            "pipeline": PIPELINE,
            "url": server.url,
            "per_page": WINDOW,
        }
        deployment = load_deployment({"trunks": [config]})
        config_trunk = deployment.trunks[0]
        rule = deployment.rule_for(config_trunk)
        meter = Meter()
        figures: dict[str, dict[str, Any]] = {}
        times = poll_times(trunk, DAY_START)
        with meter, InProcessAws(deployment, meter) as aws:
            served_at = None
            for phase, at in sorted(times.items(), key=lambda item: item[1]):  # stable: as listed
                if at != served_at:  # the same builds again: the stand-in answers as before
                    server.serve(finished_on_time(trunk, converter.builds(trunk.snapshot(at), at), at))
                    served_at = at
                server.take()
                outcome_of: list[PollResult] = []
                source = BuildkiteSource(config_trunk, "bench-token", HttpClient())
                with peak_growth() as peak:
                    meter.invoke(
                        phase,
                        lambda: outcome_of.append(poll_trunk(aws.storage, config_trunk, rule, source, at)),  # noqa: B023
                    )
                requests = server.take()
                conditional = sum(1 for r in requests if r.headers.get("If-None-Match"))
                figures[phase] = poll_figures(
                    meter.get(phase), outcome_of[0], len(requests), len(requests) - conditional, peak
                )
            usages = {phase: meter.get(phase) for phase in times}
    finally:
        server.stop()
    return {**month(usages, figures), "polls": figures}


def month(usages: dict[str, Usage], figures: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """A day of polls (each commit's finishing and landing polls, a quiet one on every other
    tick) priced for a month, by item, with the Buildkite requests it sends."""
    ticks = ticks_per_day()
    commits = VLLM_COMMITS_PER_DAY
    polls = {"quiet_poll": ticks - 2 * commits, "finishing_poll": commits, "landing_poll": commits}
    day = sum((repeated(usages[phase], n) for phase, n in polls.items()), Usage())
    items = {name: round(usd * DAYS_PER_MONTH, 4) for name, usd in ingest_items(day, ticks).items()}
    requests = sum(figures[phase]["http_requests"] * n for phase, n in polls.items())
    return {
        "commits_per_day": commits,
        "jobs": VLLM_JOBS,
        "window": WINDOW,
        "polls_per_day": ticks,
        "buildkite_requests_per_day": requests,
        "buildkite_requests_per_minute": round(requests / (24 * 60), 2),
        "usd_per_month_by_item": items,
        "usd_per_month": round(sum(items.values()), 4),
    }
