"""A red trunk, calibrated to PyTorch's published figures: a seeded, deterministic generator of
a replay file (docs/local.md "Replay files") and its ground truth.

`python -m benchmarks.redtrunk [--seed N] [--days D] [--out DIR] [--confirm]` writes
DIR/redtrunk-N.jsonl.gz (a HUD snapshot of the newest 25 commits every 30 minutes) and
DIR/redtrunk-N.truth.json.gz, and prints the trunk's statistics.

The figures it follows, and where each comes from:

- commits: about 37 a day, twice as many per hour in US daytime (14-24 UTC) as at night.
  PyTorch lands 35-50 commits a day on `main` (its HUD's commit history).
- jobs: 60 columns in 7 families, one build and several test configurations each, named as
  PyTorch's HUD names them (`<workflow> / <build environment> / test (<config>, <shard>,
  <shards>, <runner>)`). Jobs take 40 minutes to 3 hours from their commit.
- flakiness: per-job failure rates mostly under 0.5%, twelve jobs at 0.5-3%, three chronic
  flakers at 6-15% (LUCI reports 98.6% of test segments failing under 1% of the time; PyTorch
  admits a job to its blocking set only under a 10% failure rate). 45% of failed jobs, of any
  cause, are retried (the HUD's `failedPreviousRun`): a flaky one to green, a broken one fails again.
- breakages: about 3.5% of commits break 1 to 10 jobs of one family (mostly one) until a fix
  lands 1 to about 30 commits later (a revert or a forward fix); every broken job fails with
  the same test line. (PyTorch's reverts: a few percent of landed commits, most within hours.)
- dependency breakages, once a week: every job of one family finishing during 6 to 10 hours
  fails, whatever the commit, with one error line (which may look like any test failure).
- runner outages, once a week: every job on one runner type finishing during 1 to 2 hours
  fails, without failure lines.
- about 3% of cells are absent (the job did not run on that commit).
- the result: red (any failed job) on about half of the commits; PyTorch reports its trunk red
  68% of the time over 28 days (its "trunk health" metrics), the reference description of this
  trunk (not in the repository) says 42-60% of commits.

Each finished cell also carries `"rerun": {"conclusion", "durationS"}`, which the HUD API has
not: how re-running it then would end (`RedTrunk.rerun`), for a stand-in answering reruns.

The truth file lists per commit (by sha) and job column the cause of its result (`pass`,
`flaky`, `flaky-retried`, `code:<index of the breaking commit>`, `external`, `infra`) and when
that result finished; the breakages (`breaks`), `externals` and `outages` with their times;
and every job's flake rate. Job URLs encode the commit index and the column:
`.../actions/runs/<commit index>/job/<column index>`.

Everything is a function of the seed: structural draws come from one `random.Random(seed)`,
per-cell draws from a `random.Random` seeded with the cell's own name.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import hashlib
import io
import json
import random
import statistics
import sys
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import cached_property
from pathlib import Path
from typing import Any

REPO = "pytorch/pytorch"
START = datetime(2026, 10, 5, 2, 0, tzinfo=UTC)
DAYS = 14
COMMITS_PER_DAY = 37
DAYTIME_HOURS = range(14, 24)  # UTC: US daytime
DAYTIME_WEIGHT = 2.0  # commits per hour in US daytime, relative to the rest of the day
SNAPSHOT_EVERY = timedelta(minutes=30)
WINDOW = 25  # commits in every snapshot
BREAK_SHARE = 0.035
EXTERNALS_PER_WEEK = 1.0
OUTAGES_PER_WEEK = 1.0
RETRY_SHARE = 0.45
ABSENT_SHARE = 0.03
# Jobs broken by one breakage (weights of 1, 2, ... 10), mostly one.
BROKEN_JOBS_WEIGHTS = (50, 15, 10, 5, 4, 3, 3, 4, 3, 3)


@dataclass(frozen=True)
class Family:
    name: str
    workflow: str
    environment: str
    runner: str
    test_file: str
    configs: str  # its test configurations, in column order; `*`: run in 2 shards


FAMILIES = (
    Family("CPU", "pull", "linux-jammy-py3.10-gcc11", "linux.2xlarge", "test_cpu",
           "default* crossref* distributed* dynamo_wrapped* inductor* slow* jit_legacy nogpu"),
    Family("ASAN", "pull", "linux-jammy-py3.10-clang18-asan", "linux.4xlarge", "test_asan",
           "default crossref distributed dynamo_wrapped slow"),
    Family("CUDA", "trunk", "linux-jammy-cuda12.8-py3.10-gcc11", "linux.g5.4xlarge.nvidia.gpu", "test_cuda",
           "default* crossref distributed* dynamo_wrapped* inductor slow jit_legacy nogpu"),
    Family("ROCm", "trunk", "linux-jammy-rocm-py3.10", "linux.rocm.gpu.2", "test_rocm",
           "default crossref distributed dynamo_wrapped inductor slow nogpu"),
    Family("macOS", "trunk", "macos-py3-arm64", "macos-m1-stable", "test_mac",
           "default crossref distributed dynamo_wrapped slow"),
    Family("Windows", "trunk", "win-vs2022-cpu-py3", "windows.4xlarge", "test_win",
           "default crossref distributed dynamo_wrapped slow"),
    Family("inductor", "inductor", "linux-jammy-cuda12.8-py3.10-gcc11-sm86", "linux.g5.4xlarge.nvidia.gpu",
           "test_inductor", "inductor dynamo_wrapped distributed slow crossref default"),
)  # fmt: skip
EXTERNAL_LINES = (
    "ERROR: Could not find a version that satisfies the requirement triton==3.1.0",
    "FAILED test/test_nn.py::TestNN::test_conv6 - AssertionError: Tensor-likes are not close!",
    "ImportError: libcudnn.so.9: cannot open shared object file: No such file or directory",
    "error: could not download https://download.pytorch.org/whl/nightly/cpu/numpy-2.3.0.whl",
)


@dataclass(frozen=True)
class Column:
    index: int
    name: str
    family: str
    runner: str
    config: str  # "build" for the build
    duration: timedelta  # from the commit to the job's result
    flake_rate: float


@dataclass(frozen=True)
class CommitInfo:
    index: int
    sha: str
    time: datetime
    pr: int
    author: str


@dataclass(frozen=True)
class Break:
    culprit: int  # commit index
    fix: int  # the first commit that no longer fails
    family: str
    columns: tuple[int, ...]
    lines: dict[int, str]


@dataclass(frozen=True)
class Window:
    kind: str  # "external" or "infra"
    start: datetime
    end: datetime
    columns: tuple[int, ...]
    line: str | None  # None: no failure lines (an outage)
    what: str  # the family or the runner type


@dataclass(frozen=True)
class Result:
    """A cell's final result and its timeline."""

    cause: str  # pass, flaky, flaky-retried, code:<k>, external, infra
    conclusion: str  # success or failure
    first_finish: datetime  # the first attempt's result
    finish: datetime  # the final result (after a retry)
    retried: bool
    lines: tuple[str, ...] = ()


def failure_line(family: Family, config: str, test: int) -> str:
    return f"FAILED test/{family.test_file}_{test % 10}.py::Test{config.title()}::test_{test}"


def _rng(*parts: object) -> random.Random:
    return random.Random(":".join(map(str, parts)))


def _sha(seed: int, index: int) -> str:
    return hashlib.sha1(f"redtrunk:{seed}:{index}".encode(), usedforsecurity=False).hexdigest()


def timestamp(at: datetime) -> str:
    """A time as the replay and truth files write it: UTC, to the second, with a `Z`."""
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class RedTrunk:
    """The generated trunk: its commits, columns and episodes, and every cell's result."""

    seed: int = 100
    days: float = DAYS
    start: datetime = START
    commits: list[CommitInfo] = field(init=False)
    columns: list[Column] = field(init=False)
    breaks: list[Break] = field(init=False)
    windows: list[Window] = field(init=False)

    def __post_init__(self) -> None:
        rng = random.Random(self.seed)
        self.columns = self._columns(rng)
        self.commits = self._commits(rng)
        self.breaks = self._breaks(rng)
        self.windows = self._windows(rng)
        self._results = {
            (c.index, col.index): self._result(c.index, col) for c in self.commits for col in self.columns
        }

    @property
    def end(self) -> datetime:
        return self.start + timedelta(days=self.days)

    def _columns(self, rng: random.Random) -> list[Column]:
        names: list[tuple[Family, str, str]] = []
        for family in FAMILIES:
            names.append((family, "build", f"{family.workflow} / {family.environment} / build"))
            for config in family.configs.split():
                shards = 2 if config.endswith("*") else 1
                for shard in range(1, shards + 1):
                    test = f"{config.rstrip('*')}, {shard}, {shards}, {family.runner}"
                    names.append(
                        (
                            family,
                            config.rstrip("*"),
                            f"{family.workflow} / {family.environment} / test ({test})",
                        )
                    )
        # Flake rates: 3 chronic flakers (6-9%, one up to 15%), 12 at 0.5-3%, the rest under 0.5%.
        order = list(range(len(names)))
        rng.shuffle(order)
        rates = [0.0] * len(names)
        for rank, i in enumerate(order):
            low, high = (0.06, 0.09) if rank < 3 else (0.005, 0.03) if rank < 15 else (0.0, 0.005)
            rates[i] = round(rng.triangular(low, 0.15 if rank == 0 else high, low), 4)
        minutes = [rng.randint(40, 80 if config == "build" else 170) for _, config, _ in names]
        return [
            Column(i, name, family.name, family.runner, config, timedelta(minutes=minutes[i]), rates[i])
            for i, (family, config, name) in enumerate(names)
        ]

    def _commits(self, rng: random.Random) -> list[CommitInfo]:
        # A Poisson process thinned by the hour of day, at COMMITS_PER_DAY on average.
        day_share = (len(DAYTIME_HOURS) * DAYTIME_WEIGHT + (24 - len(DAYTIME_HOURS))) / 24
        peak = COMMITS_PER_DAY * DAYTIME_WEIGHT / day_share / 24  # commits an hour, US daytime
        commits: list[CommitInfo] = []
        at = self.start
        while True:
            at += timedelta(hours=rng.expovariate(peak))
            if at >= self.end:
                return commits
            if at.hour not in DAYTIME_HOURS and rng.random() > 1 / DAYTIME_WEIGHT:
                continue
            index = len(commits)
            at = at.replace(microsecond=0)
            author = f"dev{rng.randint(1, 150)}"
            commits.append(CommitInfo(index, _sha(self.seed, index), at, 1_170_000 + index, author))

    def _family_columns(self, family: str) -> list[int]:
        return [c.index for c in self.columns if c.family == family]

    def _breaks(self, rng: random.Random) -> list[Break]:
        breaks = []
        for commit in self.commits[1:]:
            if rng.random() >= BREAK_SHARE:
                continue
            family = rng.choice(FAMILIES)
            candidates = self._family_columns(family.name)
            count = min(len(candidates), rng.choices(range(1, 11), BROKEN_JOBS_WEIGHTS)[0])
            columns = tuple(sorted(rng.sample(candidates, count)))
            # A revert within a few commits, or a forward fix up to a few dozen later.
            distance = rng.choice((1, 1, 2, 3, 4, 5)) if rng.random() < 0.5 else rng.randint(6, 24)
            test = rng.randint(0, 40)
            lines = {c: failure_line(family, "common", test) for c in columns}
            breaks.append(Break(commit.index, commit.index + distance, family.name, columns, lines))
        return breaks

    def _windows(self, rng: random.Random) -> list[Window]:
        windows = []
        span = (self.end - self.start).total_seconds()
        for kind, per_week in (("external", EXTERNALS_PER_WEEK), ("infra", OUTAGES_PER_WEEK)):
            count = max(1, round(per_week * (self.days / 7)))
            part = span / count
            for n in range(count):  # one per equal part of the period, away from its edges
                start = self.start + timedelta(seconds=part * n + rng.uniform(0.15, 0.6) * part)
                start = start.replace(microsecond=0)
                if kind == "external":
                    family = rng.choice(FAMILIES)
                    hours = rng.uniform(6, 10)
                    columns = tuple(self._family_columns(family.name))
                    line: str | None = rng.choice(EXTERNAL_LINES)
                    what = family.name
                else:
                    runner = rng.choice(sorted({c.runner for c in self.columns}))
                    hours = rng.uniform(1, 2)
                    columns = tuple(c.index for c in self.columns if c.runner == runner)
                    line, what = None, runner
                end = (start + timedelta(hours=hours)).replace(microsecond=0)
                windows.append(Window(kind, start, end, columns, line, what))
        return windows

    def _window_at(self, column: int, at: datetime) -> Window | None:
        """The outage (first) or dependency breakage that fails `column` at `at`."""
        failing = [w for w in self.windows if column in w.columns and w.start <= at < w.end]
        return min(failing, key=lambda window: window.kind != "infra", default=None)

    def broken_by(self, commit: int, column: int) -> Break | None:
        """The breakage (the oldest one) that fails `column` on `commit`."""
        for brk in self.breaks:
            if column in brk.columns and brk.culprit <= commit < brk.fix:
                return brk
        return None

    def result(self, commit: int, column: int) -> Result | None:
        """The cell's result (None: the job did not run on that commit)."""
        return self._results[(commit, column)]

    def _result(self, commit: int, col: Column) -> Result | None:
        if _rng(self.seed, "runs", commit, col.index).random() < ABSENT_SHARE:
            return None
        rng = _rng(self.seed, "cell", commit, col.index)
        first = self.commits[commit].time + col.duration + timedelta(minutes=rng.randint(-10, 15))
        retried = rng.random() < RETRY_SHARE
        final = first + col.duration if retried else first  # a retry runs as long
        window = self._window_at(col.index, first)
        if window is not None:
            return Result(
                window.kind, "failure", first, final, retried, (window.line,) if window.line else ()
            )
        brk = self.broken_by(commit, col.index)
        if brk is not None:
            return Result(f"code:{brk.culprit}", "failure", first, final, retried, (brk.lines[col.index],))
        if rng.random() < col.flake_rate:
            if retried:
                return Result("flaky-retried", "success", first, final, True)
            family = next(f for f in FAMILIES if f.name == col.family)
            line = failure_line(family, col.config, rng.randint(0, 99))
            return Result("flaky", "failure", first, first, False, (line,))
        return Result("pass", "success", first, first, False)

    def rerun(self, commit: int, column: int, at: datetime) -> tuple[str, int]:
        """(conclusion, duration in seconds) of re-running `column` on `commit`, requested at `at`."""
        col = self.columns[column]
        duration = int(col.duration.total_seconds())
        if self._window_at(column, at) is not None or self.broken_by(commit, column) is not None:
            return "failure", duration
        result = self.result(commit, column)
        if result is not None and result.cause == "flaky":
            return "success", duration
        flaked = _rng(self.seed, "rerun", commit, column, timestamp(at)).random() < col.flake_rate
        return ("failure" if flaked else "success"), duration

    def url(self, commit: int, column: int) -> str:
        return f"https://github.com/{REPO}/actions/runs/{commit}/job/{column}"

    def _cell(self, commit: int, column: int, at: datetime) -> dict[str, Any]:
        result = self.result(commit, column)
        if result is None:
            return {}
        sha = self.commits[commit].sha
        job_id = int(hashlib.sha1(f"{sha}:{column}".encode(), usedforsecurity=False).hexdigest()[:10], 16)
        cell: dict[str, Any] = {"sha": sha, "id": job_id, "htmlUrl": self.url(commit, column)}
        if at < result.first_finish or at < result.finish:  # running, or its retry is
            return {**cell, "conclusion": "pending", "status": "in_progress"}
        rerun, duration = self.rerun(commit, column, at)
        cell.update(conclusion=result.conclusion, status="completed")
        cell["rerun"] = {"conclusion": rerun, "durationS": duration}
        if result.retried:
            cell["failedPreviousRun"] = True
        if result.lines:
            cell["failureLines"] = list(result.lines)
            cell["failureCaptures"] = [line.removeprefix("FAILED ").split(" - ")[0] for line in result.lines]
        return cell

    def snapshot_times(self) -> Iterator[datetime]:
        """Every SNAPSHOT_EVERY, from the first that shows a commit."""
        at = self.start + SNAPSHOT_EVERY
        while at <= self.end:
            if self.commits and self.commits[0].time <= at:
                yield at
            at += SNAPSHOT_EVERY

    def snapshot(self, at: datetime) -> dict[str, Any]:
        landed = [c for c in self.commits if c.time <= at][-WINDOW:]
        rows = [
            {
                "sha": info.sha,
                "time": timestamp(info.time),
                "prNum": info.pr,
                "commitTitle": f"[redtrunk] change {info.index}",
                "author": info.author,
                "commitUrl": f"https://github.com/{REPO}/commit/{info.sha}",
                "jobs": [self._cell(info.index, col.index, at) for col in self.columns],
            }
            for info in reversed(landed)
        ]
        return {"jobNames": [col.name for col in self.columns], "shaGrid": rows}

    def write(self, replay: Path, truth: Path | None = None, config: dict[str, Any] | None = None) -> None:
        """Write the replay (and the truth) gzipped, byte for byte the same for a seed; the
        header's rule `config` (e.g. `{"confirm": "rerun"}`) is empty unless given."""
        replay.parent.mkdir(parents=True, exist_ok=True)
        with _gzip_text(replay) as out:
            out.write(json.dumps({"repo": REPO, "branch": "main", "config": config or {}}) + "\n")
            for at in self.snapshot_times():
                out.write(
                    json.dumps({"at": timestamp(at), "hud": self.snapshot(at)}, separators=(",", ":")) + "\n"
                )
        if truth is not None:
            with _gzip_text(truth) as out:
                json.dump(self.truth(), out)

    def truth(self) -> dict[str, Any]:
        cells = {
            info.sha: {
                "idx": info.index,
                "time": timestamp(info.time),
                "causes": {
                    col.name: [result.cause, timestamp(result.finish)]
                    for col in self.columns
                    if (result := self.result(info.index, col.index)) is not None
                },
            }
            for info in self.commits
        }
        return {
            "seed": self.seed,
            "days": self.days,
            "commits": len(self.commits),
            "polls": len(list(self.snapshot_times())),
            "jobs": len(self.columns),
            "flake_rates": {col.name: col.flake_rate for col in self.columns},
            "breaks": [
                {
                    "kind": "code",
                    "culprit": brk.culprit,
                    "fix": brk.fix,
                    "culprit_sha": self.commits[brk.culprit].sha,
                    "family": brk.family,
                    "jobs": [self.columns[c].name for c in brk.columns],
                    "tests": {self.columns[c].name: line for c, line in brk.lines.items()},
                }
                for brk in self.breaks
            ],
            "externals": [self._window_json(w) for w in self.windows if w.kind == "external"],
            "outages": [self._window_json(w) for w in self.windows if w.kind == "infra"],
            "cells": cells,
        }

    def _window_json(self, window: Window) -> dict[str, Any]:
        return {
            "kind": window.kind,
            "start": timestamp(window.start),
            "end": timestamp(window.end),
            "what": window.what,
            "jobs": [self.columns[c].name for c in window.columns],
            **({"line": window.line} if window.line else {}),
        }

    @cached_property
    def stats(self) -> dict[str, Any]:
        """The figures the calibration is checked on (the module docstring's)."""
        causes: Counter[str] = Counter()
        red_commits = red_unretried = 0
        for info in self.commits:
            results = [self.result(info.index, col.index) for col in self.columns]
            kinds = [r.cause.split(":")[0] for r in results if r is not None]
            causes.update(kinds)
            red_commits += any(k != "pass" for k in kinds)
            red_unretried += any(k not in ("pass", "flaky-retried") for k in kinds)
        flaky = causes["flaky"] + causes["flaky-retried"]
        rates = sorted(col.flake_rate for col in self.columns)
        by_hour = Counter(c.time.hour in DAYTIME_HOURS for c in self.commits)
        return {
            "commits": len(self.commits),
            "commits_per_day": round(len(self.commits) / self.days, 1),
            "daytime_commits_per_hour": round(by_hour[True] / len(DAYTIME_HOURS) / self.days, 2),
            "night_commits_per_hour": round(by_hour[False] / (24 - len(DAYTIME_HOURS)) / self.days, 2),
            "jobs": len(self.columns),
            "families": len({col.family for col in self.columns}),
            "jobs_under_0.5pct": sum(r < 0.005 for r in rates),
            "jobs_0.5_to_3pct": sum(0.005 <= r <= 0.03 for r in rates),
            "jobs_6_to_15pct": sum(0.06 <= r <= 0.15 for r in rates),
            "flaky_retried_share": round(causes["flaky-retried"] / flaky, 3) if flaky else 0.0,
            "breaks": len(self.breaks),
            "break_share": round(len(self.breaks) / len(self.commits), 4),
            "break_jobs_median": statistics.median([len(b.columns) for b in self.breaks] or [0]),
            "break_length_median": statistics.median([b.fix - b.culprit for b in self.breaks] or [0]),
            "externals": sum(w.kind == "external" for w in self.windows),
            "outages": sum(w.kind == "infra" for w in self.windows),
            "red_share": round(red_commits / len(self.commits), 3),
            "red_share_without_retried": round(red_unretried / len(self.commits), 3),
            "absent_share": round(1 - sum(causes.values()) / (len(self.commits) * len(self.columns)), 3),
            "cells_by_cause": dict(sorted(causes.items())),
        }


@contextlib.contextmanager
def _gzip_text(path: Path) -> Iterator[io.TextIOWrapper]:
    """A gzip text stream without a time or a name in its header."""
    with (
        path.open("wb") as raw,
        gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") as zipped,
        io.TextIOWrapper(zipped, encoding="utf-8") as text,
    ):
        yield text


def paths(out: Path, seed: int) -> tuple[Path, Path]:
    return out / f"redtrunk-{seed}.jsonl.gz", out / f"redtrunk-{seed}.truth.json.gz"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.redtrunk", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--seed", type=int, default=100)
    parser.add_argument("--days", type=float, default=DAYS)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "out")
    parser.add_argument(
        "--confirm", action="store_true", help='the replay\'s header turns on `"confirm": "rerun"`'
    )
    args = parser.parse_args(argv)
    trunk = RedTrunk(args.seed, args.days)
    replay, truth = paths(args.out, args.seed)
    trunk.write(replay, truth, {"confirm": "rerun"} if args.confirm else None)
    print(json.dumps({"replay": str(replay), "truth": str(truth), **trunk.stats}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
