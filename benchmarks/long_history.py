"""Workload `long_history`: weeks of a real trunk replayed through the local runtime.

`python -m benchmarks long_history [PATH]` replays PATH (a replay file, gzipped or not; by
default the repository's cut of a real history in tests/real-history) event by event on a
fresh local runtime, in a fresh process, and reports:
- per-poll wall time, averaged over the first and the last tenth of the polls, and their
  ratio (last / first). The very first poll is left out of both: it pays the imports and
  the page's whole backlog of commits, which no later poll does (`first_poll_s`);
- the cells the polls' evaluations read (each cell a walk of a job's cells takes, and the
  one `newest_seq` reads: what the walks cost, a count free of the machine's noise, counted
  through a `Storage` wrapper of the in-memory store), averaged over the same tenths, and
  their ratio;
- total wall time and the process's peak resident set (VmHWM, the whole process);
- the messages published and, when `X.expected.jsonl` sits beside `X.jsonl[.gz]`, whether
  they are exactly those (the same comparison as the scenario tests: messages of the same
  time may come in any order).

Budget (benchmarks/budgets.py): total <= 10 s + 0.25 s per poll and peak <= 1 GiB for every
real history; for the full two-week one also total <= 60 s and ratio <= 1.5.
"""

from __future__ import annotations

import resource
import statistics
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from trunkwatch.domain.cells import StoredCell
from trunkwatch.storage.port import Storage
from trunkwatch_local import store_calls

REPOSITORY_HISTORY = (
    Path(__file__).resolve().parents[1]
    / "tests"
    / "real-history"
    / "rust-toolstate-2018-04-first-112-polls.jsonl.gz"
)
POLL_KINDS = ("hud", "hud_status")  # events that poll the source; ticks and silences are not polls


def tenths(per_poll: list[float] | list[int]) -> tuple[float, float]:
    """The mean of the first and of the last tenth of the polls but the very first."""
    later = per_poll[1:]
    tenth = max(1, len(later) // 10)
    return statistics.fmean(later[:tenth] or [0.0]), statistics.fmean(later[-tenth:] or [0.0])


class CellReads:
    """Counts the cells read through the `Cells` of the storages it wraps (`storage`)."""

    def __init__(self) -> None:
        self.count = 0

    def storage(self, storage: Storage) -> Storage:
        return store_calls.each_call(storage, self._counted)

    def _counted(self, name: str, make: Callable[[], Any]) -> Any:
        found = make()
        if name == "cells.newest_first":
            return self._each(found)
        self.count += name == "cells.newest_seq" and found is not None
        return found

    def _each(self, cells: Iterator[StoredCell]) -> Iterator[StoredCell]:
        for cell in cells:
            self.count += 1
            yield cell


def long_history(path: Path = REPOSITORY_HISTORY) -> dict[str, Any]:
    from trunkwatch_local.replay import read_replay
    from trunkwatch_local.runtime import LocalRuntime, as_expected, expected_rows, summary_row
    from trunkwatch_local.session import Session, replay_steps

    started = time.perf_counter()
    replay = read_replay(path)
    reads = CellReads()
    session = Session(LocalRuntime(wrap_storage=reads.storage))
    poll_s: list[float] = []
    poll_reads: list[int] = []
    published: list[dict[str, Any]] = []
    try:
        session.start(replay.deployment(session.hud.url))
        step_started = time.perf_counter()
        for event, messages in replay_steps(session, replay):
            now = time.perf_counter()
            if event.kind in POLL_KINDS:
                poll_s.append(now - step_started)
                poll_reads.append(reads.count)
            reads.count = 0
            published.extend(message.as_json() for message in messages)
            step_started = now
    finally:
        session.stop()
    wall_s = time.perf_counter() - started
    first, last = tenths(poll_s)
    first_reads, last_reads = tenths(poll_reads)
    expected = expected_rows(path)
    return {
        "history": path.name,
        "polls": len(poll_s),
        "first_poll_s": round(poll_s[0], 3) if poll_s else 0.0,
        "first_tenth_poll_s": round(first, 3),
        "last_tenth_poll_s": round(last, 3),
        "ratio": round(last / first, 2) if first else 0.0,
        "first_tenth_cells_read": round(first_reads, 1),
        "last_tenth_cells_read": round(last_reads, 1),
        "cells_read_ratio": round(last_reads / first_reads, 2) if first_reads else 0.0,
        "wall_s": round(wall_s, 1),
        "peak_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "messages": len(published),
        "matches_expected": None
        if expected is None
        else as_expected(map(summary_row, published)) == as_expected(expected),
    }
