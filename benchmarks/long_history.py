"""Workload `long_history`: weeks of a real trunk replayed through the local runtime.

`python -m benchmarks long_history [PATH]` replays PATH (a replay file, gzipped or not; by
default the repository's cut of a real history in tests/real-history) event by event on a
fresh local runtime, in a fresh process, and reports:
- per-poll wall time, averaged over the first and the last tenth of the polls, and their
  ratio (last / first). The very first poll is left out of both: it pays the imports and
  the page's whole backlog of commits, which no later poll does (`first_poll_s`);
- the cell items the polls' Queries read (what DynamoDB bills as reads, and what the
  walks cost: a count, free of the machine's noise), averaged over the same tenths, and
  their ratio;
- total wall time and the process's peak resident set (VmHWM, the whole process);
- the messages published and, when `X.expected.jsonl` sits beside `X.jsonl[.gz]`, whether
  they are exactly those (the same comparison as the scenario tests: messages of the same
  time may come in any order).

Budget (benchmarks/budgets.py): total <= 10 s + 0.25 s per poll and peak <= 1 GiB for every
real history; for the full two-week one also total <= 60 s and ratio <= 1.5.
"""

from __future__ import annotations

import contextlib
import json
import resource
import statistics
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

REPOSITORY_HISTORY = (
    Path(__file__).resolve().parents[1]
    / "tests"
    / "real-history"
    / "rust-toolstate-2018-04-first-112-polls.jsonl.gz"
)
POLL_KINDS = ("hud", "hud_status")  # events that poll the source; ticks and silences are not polls
SUMMARY_KEYS = ("at", "status", "alertname", "job", "priority", "team", "day")


def expected_beside(path: Path) -> Path:
    """`X.expected.jsonl` for `X.jsonl` or `X.jsonl.gz`."""
    stem = path.name.removesuffix(".gz").removesuffix(".jsonl")
    return path.with_name(f"{stem}.expected.jsonl")


def summary_of(message: dict[str, Any]) -> tuple[Any, ...]:
    """A published message (`Published.as_json()`) as the expected files list it."""
    from trunkwatch_local.runtime import summary_row

    line = summary_row(message)
    return tuple(line.get(key) for key in SUMMARY_KEYS)


def matches(published: list[dict[str, Any]], expected: Path) -> bool:
    wanted = [json.loads(line) for line in expected.read_text().splitlines() if line.strip()]
    return Counter(map(summary_of, published)) == Counter(
        tuple(w.get(k) for k in SUMMARY_KEYS) for w in wanted
    )


def tenths(per_poll: list[float] | list[int]) -> tuple[float, float]:
    """The mean of the first and of the last tenth of the polls but the very first."""
    later = per_poll[1:]
    tenth = max(1, len(later) // 10)
    return statistics.fmean(later[:tenth] or [0.0]), statistics.fmean(later[-tenth:] or [0.0])


@contextlib.contextmanager
def counting_cell_queries(queries: list[Any]) -> Iterator[None]:
    """Collect every Query of a job's cells (their result iterators count the items read)."""
    from trunkwatch.storage.items import CellItem

    original = CellItem.query

    def query(*args: Any, **kwargs: Any) -> Any:
        result = original(*args, **kwargs)
        queries.append(result)
        return result

    with mock.patch.object(CellItem, "query", query):
        yield


def long_history(path: Path = REPOSITORY_HISTORY) -> dict[str, Any]:
    from trunkwatch_local.replay import read_replay
    from trunkwatch_local.session import Session, replay_steps

    started = time.perf_counter()
    replay = read_replay(path)
    session = Session()
    poll_s: list[float] = []
    poll_reads: list[int] = []
    published: list[dict[str, Any]] = []
    queries: list[Any] = []
    try:
        session.start(replay.deployment(session.hud.url))
        step_started = time.perf_counter()
        with counting_cell_queries(queries):
            for event, messages in replay_steps(session, replay):
                now = time.perf_counter()
                if event.kind in POLL_KINDS:
                    poll_s.append(now - step_started)
                    poll_reads.append(sum(query.total_count for query in queries))
                queries.clear()  # a finished Query's iterator holds its last page
                published.extend(message.as_json() for message in messages)
                step_started = now
    finally:
        session.stop()
    wall_s = time.perf_counter() - started
    first, last = tenths(poll_s)
    first_reads, last_reads = tenths(poll_reads)
    expected = expected_beside(path)
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
        "matches_expected": matches(published, expected) if expected.exists() else None,
    }
