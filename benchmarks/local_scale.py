"""Workload `local_scale`: a PyTorch-sized trunk through the local runtime.

`LocalRuntime` (moto in-process, the real handlers, the stream pump) and
`HudServer` replay a first poll of a 50-commit HUD page of 2,000 job columns, then 10
incremental polls (one commit lands per poll, `COMMIT_EVERY` apart, and older commits' jobs
finish); each poll is a full schedule tick (ingest and the stream drained into the
evaluator, then the evaluator's sweep and the notifier its settled tick triggers). The same
runs at 1,000 columns for the doubling ratio time(2000)/time(1000).

`max_items_per_partition_key` is the most item writes one partition key received in one
poll, counted from the table's stream (one record per write) in moto's backend, which the
local runtime runs in this process. It is counted after the ingest step too, so a
capped run still reports it for the polls' first step.

Each scale runs in a fresh process (clean memory figures) under a time cap, so the workload
ends in about five minutes even when it is slow: a capped run reports the polls it finished
and `over_budget: true`, and its wall time is the cap (a lower bound).

Budget: <= 60 s wall for the 2,000-column run, <= 1 GiB peak, doubling <= 2.2x.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import queue
import sys
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any
from unittest import mock

from benchmarks.ingest import deployment
from benchmarks.memory import peak_growth
from benchmarks.trunk import COMMIT_EVERY, DAY_START, WINDOW, Day

COLUMNS = 2000
HALF_COLUMNS = 1000
INCREMENTAL_POLLS = 10
# Caps per scale (seconds of wall, from process start): about five minutes in all.
CAP_S = {COLUMNS: 170.0, HALF_COLUMNS: 110.0}
BUDGET_WALL_S = 60.0
BUDGET_PEAK_MB = 1024.0
BUDGET_DOUBLING = 2.2


def day_of(columns: int) -> Day:
    """A trunk of `columns` job columns (50 per build environment)."""
    if columns % 50:
        raise ValueError("columns must be a multiple of 50")
    return Day(environments=columns // 50, window=WINDOW)


@dataclass
class ScaleRun:
    job_columns: int
    commits_per_page: int
    polls: int = 0  # polls finished
    wall_s: float = 0.0  # all polls (the cap when capped)
    peak_mb: float = 0.0
    max_items_per_partition_key: int = 0
    first_poll_s: float = 0.0
    incremental_poll_s_max: float = 0.0
    first_ingest_s: float = 0.0  # the first poll's ingest step alone
    items_written_first_poll: int = 0  # by every function, in the first poll
    evaluator_records_first_poll: int = 0  # stream records delivered (so far, when capped)
    describe_stream_calls: int = 0
    capped: bool = False
    poll_s: list[float] = field(default_factory=list)


def _replay(columns: int, polls: int, progress: Any) -> None:
    """In the child process: run the polls, sending the run's figures so far ("progress",
    ScaleRun fields) after the first ingest step, as the first drain goes and after each
    poll, and ("done", ScaleRun fields) at the end."""
    from moto.dynamodb.models import dynamodb_backends

    from trunkwatch_local.hud_server import HudServer
    from trunkwatch_local.runtime import ACCOUNT, NAME, REGION, LocalRuntime

    day = day_of(columns)
    run = ScaleRun(day.columns, day.window)

    poll_s: list[float] = []

    def report(kind: str = "progress") -> None:
        run.polls, run.wall_s = len(poll_s), round(sum(poll_s), 2)
        run.first_poll_s = round(poll_s[0], 2) if poll_s else 0.0
        run.incremental_poll_s_max = round(max(poll_s[1:], default=0.0), 2)
        run.poll_s = [round(s, 2) for s in poll_s]
        progress.put((kind, asdict(run)))

    hud = HudServer()
    with mock.patch.dict(os.environ), contextlib.redirect_stdout(sys.stderr):
        runtime = LocalRuntime(store="dynamodb").start(deployment("hud", hud.url, day.window))
        shard = dynamodb_backends[ACCOUNT][REGION].tables[NAME].stream_shard
        assert shard is not None  # the template's table has its stream on
        counted = len(shard.items)

        def writes() -> Counter[str]:
            """Item writes per partition key since the last call."""
            nonlocal counted
            new = shard.items[counted:]
            counted += len(new)
            return Counter(item.to_json()["dynamodb"]["Keys"]["pk"]["S"] for item in new)

        invoke = runtime.pump.invoke

        def counting_invoke(function: str, event: dict[str, Any]) -> Any:
            result = invoke(function, event)
            if not poll_s:
                run.evaluator_records_first_poll += len(event["Records"])
                report()
            return result

        runtime.pump.invoke = counting_invoke
        try:
            with peak_growth() as peak:
                at = DAY_START
                for _ in range(polls):
                    hud.serve(day.trunk.snapshot(at))
                    started = time.perf_counter()
                    runtime.clock.set(at)  # what runtime.tick does, the ingest step timed apart
                    dispatcher, *others = runtime.wiring.schedules
                    runtime.invoke(dispatcher, runtime.scheduled_event(dispatcher, at))
                    runtime.queues.drain()  # ingest, on the dispatcher's poll message
                    ingested = writes()
                    if not poll_s:
                        run.first_ingest_s = round(time.perf_counter() - started, 2)
                        run.max_items_per_partition_key = max(ingested.values(), default=0)
                        report()
                    runtime.pump.drain()
                    for scheduled in others:  # the evaluator's sweep, and the notifier it settles
                        runtime.invoke(scheduled, runtime.scheduled_event(scheduled, at))
                        runtime.pump.drain()
                    in_poll = ingested + writes()
                    if not poll_s:
                        run.items_written_first_poll = sum(in_poll.values())
                    poll_s.append(time.perf_counter() - started)
                    worst = max(run.max_items_per_partition_key, max(in_poll.values(), default=0))
                    run.max_items_per_partition_key = worst
                    report()
                    at += COMMIT_EVERY
        finally:
            runtime.stop()
            hud.stop()
    run.peak_mb, run.describe_stream_calls = peak.mb, runtime.pump.describe_calls
    report("done")


def run_scale(columns: int, polls: int = 1 + INCREMENTAL_POLLS, cap_s: float | None = None) -> ScaleRun:
    """`polls` ticks at `columns` job columns in a fresh process, stopped after `cap_s`: then
    with the polls it finished, its wall time the cap (a lower bound)."""
    cap = cap_s if cap_s is not None else CAP_S.get(columns, 170.0)
    context = multiprocessing.get_context("spawn")
    progress = context.Queue()
    child = context.Process(target=_replay, args=(columns, polls, progress), daemon=True)
    started = time.monotonic()
    child.start()
    last = asdict(ScaleRun(day_of(columns).columns, WINDOW))
    try:
        while True:
            left = cap - (time.monotonic() - started)
            try:
                kind, last = progress.get(timeout=max(left, 0.01))
            except queue.Empty:
                if left > 0 and child.is_alive():
                    continue
                if not child.is_alive() and left > 0:
                    raise RuntimeError(f"local_scale at {columns} columns ended without a result") from None
                break  # capped
            if kind == "done":
                return ScaleRun(**last)
    finally:
        if child.is_alive():
            child.terminate()
        child.join(timeout=10)
    print(f"[bench] local_scale at {columns} columns: capped after {cap:g}s", file=sys.stderr, flush=True)
    # The peak is not measured: the run did not finish.
    return ScaleRun(**{**last, "wall_s": round(cap, 2), "peak_mb": 0.0, "capped": True})


def local_scale(polls: int = 1 + INCREMENTAL_POLLS) -> dict[str, Any]:
    """The `local_scale` section of summary.json."""
    full = run_scale(COLUMNS, polls)
    half = run_scale(HALF_COLUMNS, polls)
    # No ratio when the 1,000-column run was capped (its time is unknown); a lower bound when
    # only the 2,000-column one was.
    doubling = round(full.wall_s / half.wall_s, 2) if half.wall_s and not half.capped else None
    ingest_ratio = (
        round(full.first_ingest_s / half.first_ingest_s, 2)
        if full.first_ingest_s and half.first_ingest_s
        else None
    )
    over = {
        "wall_s": full.capped or full.wall_s > BUDGET_WALL_S,
        "peak_mb": full.capped or full.peak_mb > BUDGET_PEAK_MB,
        "doubling_ratio": doubling is None or full.capped or doubling > BUDGET_DOUBLING,
    }
    return {
        "job_columns": full.job_columns,
        "commits_per_page": full.commits_per_page,
        "polls": full.polls,
        "wall_s": full.wall_s,
        "peak_mb": full.peak_mb,
        "doubling_ratio": doubling,
        "max_items_per_partition_key": full.max_items_per_partition_key,
        "first_ingest_doubling_ratio": ingest_ratio,
        "budget": {"wall_s": BUDGET_WALL_S, "peak_mb": BUDGET_PEAK_MB, "doubling_ratio": BUDGET_DOUBLING},
        "over_budget": any(over.values()),
        "over": [name for name, is_over in over.items() if is_over],
        "runs": {str(run.job_columns): asdict(run) for run in (full, half)},
        "capped": full.capped or half.capped,
    }
