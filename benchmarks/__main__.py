"""`python -m benchmarks [--quick] [--out DIR]`: run every workload, write DIR/summary.json
(default benchmarks/out) and print the page docs/performance.md would show for it. No
network but 127.0.0.1, except PyPI for building the layer (which falls back to an estimate
without it).

`python -m benchmarks WORKLOAD` runs one of the workloads below and puts its figures into
DIR/summary.json under its name, keeping the rest of the file (each module says what it
measures): `local_scale`, `github_budget`, `cold_start` (the full run's, to measure it again
on a quieter machine), `push [--quick]`, `long_history [PATH]` (the repository's cut of a real
trunk's history by default, or PATH, e.g. a `.jsonl.gz` of weeks), `serve_week`, `chaos`,
`memory_replay`, `org [--quick]` (`--quick`: 6 small trunks, not 100), `buildkite_poll`, and
`redtrunk [--quick] [--seed N]` (two weeks of a generated red trunk, `--quick` three days, seed
100 unless given; `--replay PATH.jsonl.gz --truth PATH.truth.json.gz` scores a trunk in the
generator's format made elsewhere; each trunk's figures go under `redtrunk`'s `trunks` by its
name, keeping the other trunks').
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import multiprocessing
import os
import platform
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

from benchmarks import budgets
from benchmarks.buildkite_poll import buildkite_poll
from benchmarks.chaos import chaos
from benchmarks.cold_start import cold_start
from benchmarks.cost import project, ticks_per_day
from benchmarks.docs import render
from benchmarks.end_to_end import run_day
from benchmarks.evaluator import commit_cycle
from benchmarks.github_budget import github_budget
from benchmarks.ingest import ingest_github, ingest_hud
from benchmarks.local_scale import local_scale
from benchmarks.long_history import REPOSITORY_HISTORY, long_history
from benchmarks.memory_replay import memory_replay
from benchmarks.org import FULL as ORG_FULL
from benchmarks.org import QUICK as ORG_QUICK
from benchmarks.org import run_org
from benchmarks.push import METERED_DAYS, PUSH_DAYS, push_section
from benchmarks.push import SEED as PUSH_SEED
from benchmarks.redtrunk_score import QUICK_DAYS, SEED, redtrunk
from benchmarks.serve_week import serve_week
from benchmarks.trunk import COMMITS_PER_DAY, DAY_START, PYTORCH_SCALE, Day
from trunkwatch.app.evaluate import JOB_WINDOW

T = TypeVar("T")
OUT = Path(__file__).parent / "out"


@dataclass(frozen=True)
class Scale:
    """How big each workload runs."""

    pytorch: Day  # ingest, evaluator and the cost projection
    day: Day  # the simulated day through the local runtime
    period: timedelta  # its schedule period (the deployed rate(1 minute))
    coarse: timedelta  # its step away from the episodes' deciding jobs
    hours: float  # its length
    depth: int  # commits of history per job before the evaluator is measured
    push_days: float  # the push path runs through this many days of a red trunk
    push_metered_days: float  # the push runs meter DynamoDB on moto over their first days
    import_runs: int
    build_layer: bool

    def notes(self) -> list[str]:
        return [
            f"ingest, evaluator and cost run at {self.pytorch.columns:,} job columns with "
            f"{self.pytorch.window}-commit HUD windows; job windows hold {self.depth} commits",
            f"the simulated day runs at reduced scale through the local runtime: {self.day.columns} job "
            f"columns, {self.day.window}-commit HUD windows, for {self.hours:g} hours; ticks every "
            f"{self.period.total_seconds():g} s (the deployed schedule) around each episode's deciding "
            f"job, every {self.coarse.total_seconds() / 60:g} minutes between; the delay runs to the "
            "publish on the deployed timeline (template stream settings, measured durations)",
            "cost: per-commit and per-tick counts measured at full scale, multiplied out to "
            f"{COMMITS_PER_DAY} commits/day and {ticks_per_day():,.0f} ticks/day for 30 days "
            "(see cost.basis)",
            f"the push path runs through {self.push_days:g} days of a red trunk (seed {PUSH_SEED}), "
            "each job delivered at its own finish time, as GitHub and as Buildkite deliver it (each "
            "run on the in-memory store, metered on moto over its first "
            f"{self.push_metered_days:g} days)",
            "wall times are in-process against moto (code_s excludes the emulator's share)",
        ]


FULL = Scale(
    pytorch=PYTORCH_SCALE,
    day=Day(environments=2, window=10, tests=6),
    period=timedelta(seconds=60),
    coarse=timedelta(minutes=5),
    hours=24,
    depth=JOB_WINDOW,
    push_days=PUSH_DAYS,
    push_metered_days=METERED_DAYS,
    import_runs=9,
    build_layer=True,
)
QUICK = Scale(
    pytorch=Day(environments=2, window=5, tests=6),
    day=Day(environments=2, window=5, tests=6),
    period=timedelta(minutes=30),
    coarse=timedelta(minutes=30),
    hours=3,
    depth=5,
    push_days=0.3,
    push_metered_days=0.05,
    import_runs=1,
    build_layer=False,
)


# Workloads run on their own: name -> the section of summary.json they produce.
WORKLOADS: dict[str, Callable[[], dict[str, Any]]] = {
    "local_scale": local_scale,
    "github_budget": lambda: _fresh(github_budget),
    "cold_start": lambda: cold_start(FULL.import_runs, FULL.build_layer),
    "push": lambda: push_section(FULL.push_days, FULL.push_metered_days),  # also part of the full run
    "long_history": lambda: _fresh(long_history, REPOSITORY_HISTORY),
    "serve_week": lambda: _fresh(serve_week),
    "chaos": chaos,
    "redtrunk": redtrunk,
    "memory_replay": lambda: _fresh(memory_replay),
    "org": lambda: dataclasses.asdict(run_org(ORG_FULL)),
    "buildkite_poll": lambda: _fresh(buildkite_poll),
}
# Workloads with a smaller size for --quick.
QUICK_WORKLOADS: dict[str, Callable[[], dict[str, Any]]] = {
    "redtrunk": functools.partial(redtrunk, days=QUICK_DAYS),
    "org": lambda: dataclasses.asdict(run_org(ORG_QUICK)),
    "push": lambda: push_section(QUICK.push_days, QUICK.push_metered_days),
}


def _fresh(function: Callable[..., T], *args: Any) -> T:
    """`function(*args)` in a new interpreter, so its memory figures start from a clean heap."""
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        return pool.apply(function, args)


def _step(name: str, run: Callable[[], T]) -> T:
    started = time.perf_counter()
    print(f"[bench] {name} ...", file=sys.stderr, flush=True)
    result = run()
    print(f"[bench] {name}: {time.perf_counter() - started:.1f}s", file=sys.stderr, flush=True)
    return result


def run(scale: Scale) -> dict[str, Any]:
    hud = _step("ingest (HUD)", lambda: _fresh(ingest_hud, scale.pytorch, DAY_START))
    cycle = _step("evaluator", lambda: _fresh(commit_cycle, scale.pytorch, scale.depth))
    github = _step("ingest (GitHub)", lambda: _fresh(ingest_github, scale.pytorch, DAY_START))
    day = _step("end to end", lambda: run_day(scale.day, scale.period, scale.hours, scale.coarse))
    push = _step(
        "push (GitHub and Buildkite webhook deliveries)",
        lambda: push_section(scale.push_days, scale.push_metered_days),
    )
    cold = _step("cold start", lambda: cold_start(scale.import_runs, scale.build_layer))
    notifications_per_day = day.notifications * 24 / scale.hours
    cost = project(cycle, notifications_per_day, scale.pytorch.columns, day.stored, scale.hours)
    summary: dict[str, Any] = {
        "ingest_hud": hud,
        "ingest_github": github,
        "evaluator": cycle.evaluator,
        "end_to_end": dataclasses.asdict(day),
        "push": push,
        "cold_start": cold,
        "cost": cost,
        "scale": {
            "description": "quick" if scale is QUICK else "full",
            "notes": scale.notes(),
            "cycle_per_commit": {
                name: {
                    "at": phase.at.isoformat(),
                    "cells_written": phase.cells_written,
                    **{
                        f: {
                            "invocations": u.invocations,
                            "wall_s": round(u.seconds, 3),
                            "write_units": u.write_units,
                            "read_units": u.read_units,
                            "requests": dict(sorted(u.calls.items())),
                        }
                        for f, u in phase.usage.items()
                    },
                }
                for name, phase in (("finish", cycle.finish), ("land", cycle.land), ("quiet", cycle.quiet))
            },
            "stored_bytes_per_commit": cycle.stored_bytes_per_commit,
        },
    }
    summary["budgets"] = budgets.check(summary)
    return summary


def provenance() -> dict[str, Any]:
    """When and on what a run measured its figures (the summary's `runs`, one per section)."""
    return {
        "at": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": f"{platform.system()} {platform.machine()}, {os.cpu_count()} CPUs",
        "python": platform.python_version(),
        "load_average_1m": round(os.getloadavg()[0], 2),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="tiny workloads (a smoke test), in seconds")
    parser.add_argument("--out", type=Path, default=OUT, help="directory for summary.json")
    parser.add_argument(
        "workload",
        nargs="?",
        default="all",
        choices=["all", *WORKLOADS],
        help="one workload only, merged into summary.json (default: all of the others)",
    )
    parser.add_argument("path", nargs="?", type=Path, help="long_history: the replay file to run")
    parser.add_argument("--seed", type=int, help=f"redtrunk: the generated trunk's seed (default {SEED})")
    parser.add_argument("--replay", type=Path, help="redtrunk: score this replay file instead (with --truth)")
    parser.add_argument("--truth", type=Path, help="redtrunk: the replay file's truth file")
    args = parser.parse_args(argv)
    if args.path is not None and args.workload != "long_history":
        parser.error("a PATH is for long_history only")
    if args.path is not None and not args.path.is_file():
        parser.error(f"no replay file at {args.path}")
    trunk_options = [f"--{name}" for name in ("seed", "replay", "truth") if getattr(args, name) is not None]
    if trunk_options and args.workload != "redtrunk":
        parser.error(f"{' and '.join(trunk_options)} are for redtrunk only")
    if (args.replay is None) != (args.truth is None):
        parser.error("--replay and --truth go together: a replay file is scored against its truth file")
    if args.replay is not None and args.seed is not None:
        parser.error("--seed generates a trunk; --replay reads one: give one of them")
    for given in (args.replay, args.truth):
        if given is not None and not given.is_file():
            parser.error(f"no file at {given}")
    if args.workload != "all":
        run_workload = WORKLOADS[args.workload]
        if args.quick and args.workload in QUICK_WORKLOADS:
            run_workload = QUICK_WORKLOADS[args.workload]
        if args.path is not None:
            run_workload = functools.partial(_fresh, long_history, args.path)
        if trunk_options:
            days = {"days": QUICK_DAYS} if args.quick else {}
            trunk = {"seed": args.seed} if args.seed is not None else {}
            run_workload = functools.partial(
                redtrunk, **days, **trunk, replay_path=args.replay, truth_path=args.truth
            )
        section = _step(args.workload, run_workload)
        path = args.out / "summary.json"
        summary = json.loads(path.read_text()) if path.exists() else {}
        if args.workload == "redtrunk":
            # One trunk a run: the other trunks' figures stay.
            section = {"trunks": {**summary.get("redtrunk", {}).get("trunks", {}), **section["trunks"]}}
        summary[args.workload] = section
        summary.setdefault("runs", {})[args.workload] = provenance()
        summary["budgets"] = budgets.check(summary)  # every budget the summary has figures for
        args.out.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(summary, indent=2) + "\n")
        paths = {budget.name: budget.path for budget in budgets.EVERY_BUDGET}
        checked = {
            name: result for name, result in summary["budgets"].items() if args.workload in paths[name]
        }
        print(json.dumps({args.workload: section, "budgets": checked}, indent=2))
        return 0
    summary = run(QUICK if args.quick else FULL)
    ran = provenance()
    runs = {name: ran for name in summary if name not in ("budgets", "scale")}
    path = args.out / "summary.json"
    # The stand-alone workloads' last figures stay until they run again (`make bench` runs them).
    previous = json.loads(path.read_text()) if path.exists() and not args.quick else {}
    kept = [name for name in WORKLOADS if name in previous and name not in summary]
    summary.update({name: previous[name] for name in kept})
    summary["runs"] = {**{name: previous.get("runs", {}).get(name) for name in kept}, **runs}
    args.out.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(summary, indent=2) + "\n")
    print(render(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
