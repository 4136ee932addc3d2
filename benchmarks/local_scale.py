"""Workload `local_scale`: a PyTorch-sized trunk through the local runtime.

`LocalRuntime` (moto server on 127.0.0.1, the real handlers, the stream pump) and
`HudServer` replay a first poll of a 50-commit HUD page of 2,000 job columns, then 10
incremental polls (one commit lands per poll, `COMMIT_EVERY` apart, and older commits' jobs
finish); each poll is a full schedule tick (ingest, the stream drained into the evaluator,
the notifier). The same runs at 1,000 columns for the doubling ratio time(2000)/time(1000).

`max_items_per_partition_key` is the most stream records (item writes) one partition key
received in one poll, counted from the stream the pump reads.

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
from datetime import timedelta
from typing import Any
from unittest import mock

from benchmarks.emulator import fast_reads
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
    polls: int  # polls finished
    wall_s: float  # all polls (the cap when capped)
    peak_mb: float
    max_items_per_partition_key: int
    first_poll_s: float = 0.0
    incremental_poll_s_max: float = 0.0
    stream_records: int = 0
    describe_stream_calls: int = 0
    capped: bool = False
    poll_s: list[float] = field(default_factory=list)


def _replay(columns: int, polls: int, progress: Any) -> None:
    """In the child process: run the polls, sending ("poll", seconds, max per pk) after each
    and ("done", ScaleRun fields) at the end."""
    from trunkwatch_local.hud_server import HudServer
    from trunkwatch_local.runtime import LocalRuntime

    day = day_of(columns)
    hud = HudServer()
    per_pk: Counter[str] = Counter()
    describes = 0
    records = 0
    with mock.patch.dict(os.environ), fast_reads(), contextlib.redirect_stdout(sys.stderr):
        runtime = LocalRuntime().start(deployment("hud", hud.url, day.window))
        client = runtime.pump.client
        get_records, describe = client.get_records, client.describe_stream

        def counting_get_records(**kwargs: Any) -> Any:
            nonlocal records
            page = get_records(**kwargs)
            for record in page["Records"]:
                per_pk[record["dynamodb"]["Keys"]["pk"]["S"]] += 1
            records += len(page["Records"])
            return page

        def counting_describe(**kwargs: Any) -> Any:
            nonlocal describes
            describes += 1
            return describe(**kwargs)

        client.get_records, client.describe_stream = counting_get_records, counting_describe
        poll_s: list[float] = []
        worst = 0
        try:
            with peak_growth() as peak:
                at = DAY_START
                for _ in range(polls):
                    hud.serve(day.trunk.snapshot(at))
                    per_pk.clear()
                    started = time.perf_counter()
                    runtime.tick(at)
                    poll_s.append(time.perf_counter() - started)
                    worst = max(worst, max(per_pk.values(), default=0))
                    progress.put(("poll", poll_s[-1], worst))
                    at += COMMIT_EVERY
        finally:
            runtime.stop()
            hud.stop()
    run = ScaleRun(
        job_columns=day.columns,
        commits_per_page=day.window,
        polls=len(poll_s),
        wall_s=round(sum(poll_s), 2),
        peak_mb=peak.mb,
        max_items_per_partition_key=worst,
        first_poll_s=round(poll_s[0], 2),
        incremental_poll_s_max=round(max(poll_s[1:], default=0.0), 2),
        stream_records=records,
        describe_stream_calls=describes,
        poll_s=[round(s, 2) for s in poll_s],
    )
    progress.put(("done", asdict(run)))


def run_scale(columns: int, polls: int = 1 + INCREMENTAL_POLLS, cap_s: float | None = None) -> ScaleRun:
    """`polls` ticks at `columns` job columns in a fresh process, stopped after `cap_s`."""
    cap = cap_s if cap_s is not None else CAP_S.get(columns, 170.0)
    context = multiprocessing.get_context("spawn")
    progress = context.Queue()
    child = context.Process(target=_replay, args=(columns, polls, progress), daemon=True)
    started = time.monotonic()
    child.start()
    poll_s: list[float] = []
    worst = 0
    try:
        while True:
            left = cap - (time.monotonic() - started)
            try:
                message = progress.get(timeout=max(left, 0.01))
            except queue.Empty:
                if left > 0 and child.is_alive():
                    continue
                if not child.is_alive() and left > 0:
                    raise RuntimeError(f"local_scale at {columns} columns ended without a result") from None
                break  # capped
            if message[0] == "done":
                return ScaleRun(**message[1])
            poll_s.append(message[1])
            worst = message[2]
    finally:
        if child.is_alive():
            child.terminate()
        child.join(timeout=10)
    print(f"[bench] local_scale at {columns} columns: capped after {cap:g}s", file=sys.stderr, flush=True)
    return ScaleRun(
        job_columns=day_of(columns).columns,
        commits_per_page=WINDOW,
        polls=len(poll_s),
        wall_s=round(cap, 2),
        peak_mb=0.0,  # not measured: the run did not finish
        max_items_per_partition_key=worst,
        first_poll_s=round(poll_s[0], 2) if poll_s else 0.0,
        incremental_poll_s_max=round(max(poll_s[1:], default=0.0), 2),
        capped=True,
        poll_s=[round(s, 2) for s in poll_s],
    )


def local_scale(polls: int = 1 + INCREMENTAL_POLLS) -> dict[str, Any]:
    """The `local_scale` section of summary.json."""
    full = run_scale(COLUMNS, polls)
    half = run_scale(HALF_COLUMNS, polls)
    # A capped run's wall time is a lower bound; so is the ratio when only the full run was capped.
    doubling = round(full.wall_s / half.wall_s, 2) if half.wall_s else 0.0
    over = {
        "wall_s": full.capped or full.wall_s > BUDGET_WALL_S,
        "peak_mb": full.capped or full.peak_mb > BUDGET_PEAK_MB,
        "doubling_ratio": full.capped or half.capped or doubling > BUDGET_DOUBLING,
    }
    return {
        "job_columns": full.job_columns,
        "commits_per_page": full.commits_per_page,
        "polls": full.polls,
        "wall_s": full.wall_s,
        "peak_mb": full.peak_mb,
        "doubling_ratio": doubling,
        "max_items_per_partition_key": full.max_items_per_partition_key,
        "budget": {"wall_s": BUDGET_WALL_S, "peak_mb": BUDGET_PEAK_MB, "doubling_ratio": BUDGET_DOUBLING},
        "over_budget": any(over.values()),
        "over": [name for name, is_over in over.items() if is_over],
        "runs": {str(run.job_columns): asdict(run) for run in (full, half)},
        "timed_delta": str(timedelta(seconds=round(full.wall_s + half.wall_s))),
    }
