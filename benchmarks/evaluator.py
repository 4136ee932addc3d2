"""Workload 2: the evaluator on one commit's worth of changed cells, at PyTorch scale.

On a table that already holds the trunk's history (one HUD page as deep as the evaluator
reads a job's cells; its stream records skipped), one commit's jobs finish: the ingest
handler polls, and the stream pump delivers the changed cells to the evaluator handler in
the template's batches (and the settled tick to the notifier). The same is then measured
for the next commit landing (its cells appear as pending) and for a schedule tick with
nothing new (ingest, the evaluator's sweep and the notifier on the tick it settles):
together, what a commit and a quiet minute cost, which the cost projection multiplies out.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from benchmarks.harness import InProcessAws
from benchmarks.ingest import deployment
from benchmarks.trunk import DAY_START, JOB_DURATION, Day
from benchmarks.usage import Meter, Usage
from trunkwatch_local.hud_server import HudServer


@dataclass
class Phase:
    """One schedule tick: what each function did, and the cells the poll wrote."""

    at: datetime
    cells_written: int
    usage: dict[str, Usage]

    def of(self, function: str) -> Usage:
        return self.usage.get(function, Usage())


@dataclass
class Cycle:
    """A commit finishing, the next landing, and a quiet tick, on the full-scale table."""

    finish: Phase
    land: Phase
    quiet: Phase
    evaluator: dict[str, Any]
    # What a commit adds to the table for the retention: its cells and its commit item.
    stored_items_per_commit: float
    stored_bytes_per_commit: float
    tick_bytes: float  # one tick item (they expire after TICK_TTL)


def evaluator_figures(phase: Phase) -> dict[str, Any]:
    usage, cells = phase.of("evaluator"), max(phase.cells_written, 1)
    return {
        "queries_per_changed_cell": round(usage.ddb("Query") / cells, 3),
        "scans": usage.ddb("Scan"),
        "writes_per_changed_cell": round(usage.ddb_write_requests / cells, 3),
        "cells_per_s": round(phase.cells_written / usage.wall_seconds, 1) if usage.wall_seconds else 0.0,
        "changed_cells": phase.cells_written,
        "invocations": usage.invocations,
        "get_items_per_changed_cell": round(usage.ddb("GetItem", "BatchGetItem") / cells, 3),
        "items_read_per_changed_cell": round(usage.items_read / cells, 2),
        "read_units_per_changed_cell": round(usage.read_units / cells, 3),
        "write_units_per_changed_cell": round(usage.write_units / cells, 3),
        "cells_per_s_code": round(phase.cells_written / usage.code_seconds, 1) if usage.code_seconds else 0.0,
        "requests": dict(sorted(usage.calls.items())),
    }


def _tick(aws: InProcessAws, meter: Meter, at: datetime, sweep: bool) -> Phase:
    """One schedule tick at `at`: poll, let the stream settle, and (if asked) sweep."""
    meter.take()
    aws.clock.set(at)
    result = aws.poll()
    aws.drain()
    if sweep:
        aws.invoke("evaluator", aws.scheduled_event())
        aws.drain()
    cells = sum(p["cells_written"] for p in result.get("polled", []))
    return Phase(at, cells, meter.take())


def commit_cycle(day: Day, depth: int) -> Cycle:
    """The cycle on a table holding `depth` commits of history for every job (the evaluator
    reads up to JOB_WINDOW cells of a job, as it does once a trunk has run a day), so that
    reads cost what they cost in steady state, at the time the trunk's pages, one after the
    other from DAY_START, would have reached that depth.

    The history is written by two unmeasured polls. The first, of a HUD page that deep as
    it was when the jobs of the commits still running at that time had not started, places
    most commits while the table is still empty: moto copies the whole table for each item
    of a TransactWriteItems (to roll back), so placing page after page onto a table full of
    cells took most of the workload's time. The second, of the day's page at that time,
    places the few commits left, and writes their pending cells as a trunk polled all along
    does (each naming the job's cell before it).
    """
    at, stored_commits = DAY_START, day.window
    while stored_commits < depth:
        at = day.landed(day.commits_landed(at) + day.window - 1)  # the next page, complete
        stored_commits += day.window
    deep = dataclasses.replace(day, window=stored_commits)
    hud = HudServer()
    try:
        meter = Meter()
        with meter, InProcessAws(deployment("hud", hud.url, day.window), meter) as aws:
            for page, polled_at in ((deep, at - JOB_DURATION), (day, at)):
                hud.serve(page.trunk.snapshot(polled_at))
                aws.clock.set(polled_at)
                aws.poll()
            return _cycle(day, aws, meter, hud, at)
    finally:
        hud.stop()


def _cycle(day: Day, aws: InProcessAws, meter: Meter, hud: HudServer, at: datetime) -> Cycle:
    """The cycle after `at` on the harness's seeded table."""
    # The seeded table's records go unread, and their polls' ticks settled as if they had
    # been read: left open, the first sweep would settle them as lost and re-judge every job.
    trunk_id = aws.deployment.trunks[0].trunk_id
    for poll, opened_at in aws.storage.trunks.state(trunk_id).unsettled.items():
        aws.storage.ticks.force_settle(trunk_id, poll, opened_at)
    aws.pump.skip_written()
    meter.take()
    stored_before = aws.stored()
    # The first commit to finish after that, then the next one to land.
    finishing = next(i for i in range(day.commits_landed(at)) if day.finished(i) > at)
    finished_at = day.finished(finishing)
    hud.serve(day.trunk.snapshot(finished_at))
    finish = _tick(aws, meter, finished_at, sweep=False)
    landed_at = day.landed(day.commits_landed(finished_at))
    hud.serve(day.trunk.snapshot(landed_at))
    land = _tick(aws, meter, landed_at, sweep=False)
    stored_after = aws.stored()
    # The quiet tick is the figure the cost multiplies most (every other minute of the day):
    # the fastest of three alike, so that one stall of a busy machine is not priced 1,440 times.
    quiet = min(
        (_tick(aws, meter, landed_at + timedelta(minutes=m), sweep=True) for m in (1, 2, 3)),
        key=lambda phase: sum(usage.seconds for usage in phase.usage.values()),
    )
    items_added, bytes_added = (
        sum(stored_after.get(kind, (0, 0))[n] - stored_before.get(kind, (0, 0))[n] for kind in RETAINED)
        for n in (0, 1)
    )
    ticks, tick_bytes = aws.stored().get("tick", (0, 0))
    return Cycle(
        finish=finish,
        land=land,
        quiet=quiet,
        evaluator=evaluator_figures(finish),
        stored_items_per_commit=items_added,
        stored_bytes_per_commit=bytes_added,
        tick_bytes=round(tick_bytes / max(ticks, 1), 1),
    )


RETAINED = ("cell", "commit")  # the kinds that expire with the rule's retention
