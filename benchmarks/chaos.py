"""What a crash costs: the repository's scenarios replayed (on the in-memory store) with
invocations dying at random calls (`trunkwatch replay --chaos`), each compared with its
expected messages (or, where the schedule ticks the crashes called for can change what the
clock makes due, with the same replay without crashes ticking at the same times).

Per run, each expected message is matched with the first published message of the same
alert, status, job, priority and team at or after its time: on time, delayed (by how long),
or lost. A delayed one is late when it came after the design allows (`due_by`). Published
messages left over are extra (a message sent twice). Runs go two at a time, each in its own
process (the emulation is per process)."""

from __future__ import annotations

import multiprocessing
from collections import Counter
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from trunkwatch.domain.clock import parse_time

SCENARIOS = Path(__file__).resolve().parents[1] / "tests" / "scenarios"
SEEDS = (1, 2, 3)
RATES = (0.03, 0.08)
KEY = ("status", "alertname", "job", "priority", "team", "day")
# design.md §3.4: the sweep settles a tick left open (its records dead-lettered) 2 minutes
# after it opened.
SETTLE_BOUND = timedelta(minutes=2)


@dataclass
class Run:
    scenario: str
    seed: int
    rate: float
    expected: int
    lost: list[dict[str, Any]] = field(default_factory=list)
    extra: list[dict[str, Any]] = field(default_factory=list)
    delays_s: list[float] = field(default_factory=list)
    late: list[dict[str, Any]] = field(default_factory=list)  # expected rows, with when they "came"
    crashes: int = 0
    crashes_after_publish: int = 0  # each may send its message once more (allowed)
    calls: int = 0
    stream_retries: int = 0
    dead_lettered: int = 0
    dropped_schedule_events: int = 0


def compare(expected: list[dict[str, Any]], published: list[dict[str, Any]]) -> tuple[list, list, list]:
    """(lost, extra, (expected, published) pairs) of `published` against `expected` (rows
    with "at")."""
    left = sorted(published, key=lambda row: row["at"])
    lost, matched = [], []
    for want in sorted(expected, key=lambda row: row["at"]):
        same = [i for i, row in enumerate(left) if all(row.get(k) == want.get(k) for k in KEY)]
        match = next((i for i in same if left[i]["at"] >= want["at"]), None)
        if match is None:
            lost.append(want)
            continue
        matched.append((want, left.pop(match)))
    return lost, left, matched


def due_by(at: datetime, died_at: list[datetime], period: timedelta) -> datetime:
    """When a message due `at` has gone out at the latest (design.md §4: a dead invocation
    delays it to the next settled tick, at the latest the next sweep): at the first schedule
    tick SETTLE_BOUND or more after it (a tick left open waits that long for its sweep)
    during which no invocation died. A sweep that runs through settles a tick, and the
    notifier it starts sends everything due."""
    tick = at + SETTLE_BOUND
    while any(tick <= died < tick + period for died in died_at):
        tick += period
    return tick


def replay_with_chaos(scenario: str, seed: int, rate: float) -> Run:
    from trunkwatch_local.replay import read_replay
    from trunkwatch_local.runtime import expected_rows

    path = SCENARIOS / scenario
    return run_with_chaos(scenario, read_replay(path), expected_rows(path) or [], seed, rate)


def run_with_chaos(
    name: str,
    replay: Any,
    expected: list[dict[str, Any]],
    seed: int,
    rate: float,
    spared: tuple[str, ...] = (),
    reference_always: bool = True,
    store: str = "memory",
) -> Run:
    """Run `replay` (a `trunkwatch_local.replay.Replay`) on `store` with invocations (but the
    `spared` functions') dying at `rate` of their calls, compared with the same replay without
    crashes ticking at the same times: the schedule ticks the crashes called for (recovery ticks) can
    change what is due by the clock alone (an alert whose failure ages out between two
    events). With `reference_always` False that replay runs only where the run differs from
    `expected` (rows of an `.expected.jsonl`), which is the reference otherwise."""
    from trunkwatch_local.chaos import Chaos
    from trunkwatch_local.schedule import period_seconds
    from trunkwatch_local.session import run_replay

    chaos = Chaos(seed, rate, spared)
    published = _rows(run_replay(replay, chaos=chaos, store=store))
    period = timedelta(seconds=period_seconds(replay.deployment("http://127.0.0.1").schedule))

    def late(matched: list[tuple[dict[str, Any], dict[str, Any]]]) -> list[dict[str, Any]]:
        return [
            {**want, "came": got["at"]}
            for want, got in matched
            if parse_time(got["at"]) > due_by(parse_time(want["at"]), chaos.stats.died_at, period)
        ]

    reference = expected
    lost, extra, matched = compare(reference, published)
    differs = bool(lost) or bool(late(matched)) or len(extra) > chaos.stats.after_publish
    if chaos.stats.recovery_ticks and (reference_always or differs):
        reference = _rows(run_replay(replay, store=store, extra_ticks=chaos.stats.recovery_ticks))
        lost, extra, matched = compare(reference, published)
    stats = chaos.stats
    return Run(
        name,
        seed,
        rate,
        len(reference),
        lost,
        extra,
        [(parse_time(got["at"]) - parse_time(want["at"])).total_seconds() for want, got in matched],
        late(matched),
        len(stats.crashes),
        stats.after_publish,
        stats.calls,
        stats.stream_retries,
        stats.dead_lettered,
        stats.dropped_schedule_events,
    )


def _rows(messages: Any) -> list[dict[str, Any]]:
    from trunkwatch_local.runtime import summary_row

    return [summary_row(message.as_json()) for message in messages]


def chaos(seeds: tuple[int, ...] = SEEDS, rates: tuple[float, ...] = RATES) -> dict[str, Any]:
    scenarios = sorted(p.name for p in SCENARIOS.glob("*.jsonl") if not p.name.endswith(".expected.jsonl"))
    jobs = [(scenario, seed, rate) for rate in rates for seed in seeds for scenario in scenarios]
    with multiprocessing.get_context("spawn").Pool(2, maxtasksperchild=1) as pool:
        runs = pool.starmap(replay_with_chaos, jobs, chunksize=1)
    by_rate = {}
    for rate in rates:
        of_rate = [run for run in runs if run.rate == rate]
        delays = sorted(d for run in of_rate for d in run.delays_s)
        by_rate[f"{rate:.0%}"] = {
            "runs": len(of_rate),
            "runs_losing_messages": sum(bool(run.lost) for run in of_rate),
            "messages_expected": sum(run.expected for run in of_rate),
            "messages_lost": sum(len(run.lost) for run in of_rate),
            "messages_extra": sum(len(run.extra) for run in of_rate),
            # Extra messages beyond one per crash right after a publish: never allowed.
            "runs_with_unexplained_extra": sum(len(run.extra) > run.crashes_after_publish for run in of_rate),
            "messages_delayed": sum(d > 0 for d in delays),
            "max_delay_s": max(delays, default=0.0),
            "lost_by_alert": dict(
                Counter(f"{row['alertname']} {row['status']}" for run in of_rate for row in run.lost)
            ),
            "crashes": sum(run.crashes for run in of_rate),
            "aws_calls": sum(run.calls for run in of_rate),
            "stream_retries": sum(run.stream_retries for run in of_rate),
            "records_dead_lettered": sum(run.dead_lettered for run in of_rate),
            "scheduled_invocations_lost": sum(run.dropped_schedule_events for run in of_rate),
        }
    # The runs that lost a message, sent one late or repeated one beyond the publish window.
    failing = [
        asdict(run) for run in runs if run.lost or run.late or len(run.extra) > run.crashes_after_publish
    ]
    return {"seeds": list(seeds), "scenarios": scenarios, "by_rate": by_rate, "failing_runs": failing}
