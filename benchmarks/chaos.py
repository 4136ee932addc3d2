"""What a crash costs: the repository's scenarios replayed with invocations dying at random AWS
calls (`trunkwatch replay --chaos`), each compared with its expected messages.

Per run, each expected message is matched with the first published message of the same
alert, status, job, priority and team at or after its time: on time, delayed (by how long),
or lost. Published messages left over are extra (a message sent twice). Runs go two at a
time, each in its own process (the emulation is per process)."""

from __future__ import annotations

import json
import multiprocessing
from collections import Counter
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

SCENARIOS = Path(__file__).resolve().parents[1] / "tests" / "scenarios"
SEEDS = (1, 2, 3)
RATES = (0.03, 0.08)
KEY = ("status", "alertname", "job", "priority", "team")


@dataclass
class Run:
    scenario: str
    seed: int
    rate: float
    expected: int
    lost: list[dict[str, Any]] = field(default_factory=list)
    extra: list[dict[str, Any]] = field(default_factory=list)
    delays_s: list[float] = field(default_factory=list)
    crashes: int = 0
    calls: int = 0
    stream_retries: int = 0
    dead_lettered: int = 0
    dropped_schedule_events: int = 0


def compare(expected: list[dict[str, Any]], published: list[dict[str, Any]]) -> tuple[list, list, list]:
    """(lost, extra, delays in seconds) of `published` against `expected` (rows with "at")."""
    left = sorted(published, key=lambda row: row["at"])
    lost, delays = [], []
    for want in sorted(expected, key=lambda row: row["at"]):
        key = tuple(want.get(name) for name in KEY)
        match = next(
            (
                i
                for i, row in enumerate(left)
                if tuple(row.get(name) for name in KEY) == key and row["at"] >= want["at"]
            ),
            None,
        )
        if match is None:
            lost.append(want)
            continue
        got = left.pop(match)
        delays.append((_time(got["at"]) - _time(want["at"])).total_seconds())
    return lost, left, delays


def replay_with_chaos(scenario: str, seed: int, rate: float) -> Run:
    from trunkwatch_local.chaos import Chaos
    from trunkwatch_local.replay import read_replay
    from trunkwatch_local.session import run_replay

    path = SCENARIOS / scenario
    chaos = Chaos(seed, rate)
    published = []
    for message in run_replay(read_replay(path), chaos=chaos):
        row = message.as_json()
        labels = row["message"]["alerts"][0]["labels"]
        published.append({"at": row["at"], "status": row["message"]["status"], "job": None, **labels})
    expected_path = path.with_name(path.name.removesuffix(".jsonl") + ".expected.jsonl")
    expected = [json.loads(line) for line in expected_path.read_text().splitlines() if line.strip()]
    lost, extra, delays = compare(expected, published)
    stats = chaos.stats
    return Run(
        scenario,
        seed,
        rate,
        len(expected),
        lost,
        extra,
        delays,
        len(stats.crashes),
        stats.calls,
        stats.stream_retries,
        stats.dead_lettered,
        stats.dropped_schedule_events,
    )


def _run(args: tuple[str, int, float]) -> Run:
    return replay_with_chaos(*args)


def chaos(seeds: tuple[int, ...] = SEEDS, rates: tuple[float, ...] = RATES) -> dict[str, Any]:
    scenarios = sorted(p.name for p in SCENARIOS.glob("*.jsonl") if not p.name.endswith(".expected.jsonl"))
    jobs = [(scenario, seed, rate) for rate in rates for seed in seeds for scenario in scenarios]
    with multiprocessing.get_context("spawn").Pool(2, maxtasksperchild=1) as pool:
        runs = pool.map(_run, jobs, chunksize=1)
    by_rate = {}
    for rate in rates:
        of_rate = [run for run in runs if run.rate == rate]
        delays = sorted(d for run in of_rate for d in run.delays_s)
        by_rate[str(rate)] = {
            "runs": len(of_rate),
            "runs_losing_messages": sum(bool(run.lost) for run in of_rate),
            "messages_expected": sum(run.expected for run in of_rate),
            "messages_lost": sum(len(run.lost) for run in of_rate),
            "messages_extra": sum(len(run.extra) for run in of_rate),
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
    # The runs that lost or repeated a message, with what they lost or repeated.
    failing = [asdict(run) for run in runs if run.lost or run.extra]
    return {"seeds": list(seeds), "scenarios": scenarios, "by_rate": by_rate, "failing_runs": failing}


def _time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))
