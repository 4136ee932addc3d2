"""Synthetic PyTorch-style trunks: HUD snapshots of commits landing and jobs finishing.

Used by `trunkwatch demo` and the benchmarks. Deterministic: the same arguments give the
same snapshots.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from trunkwatch.domain.clock import format_time
from trunkwatch_local.replay import Replay, ReplayEvent

DEMO_JOBS = (
    "docs-build / build-docs-python-false",
    "lint / lintrunner-noclang / linux-job",
    "pull / linux-jammy-py3.10-gcc11 / build",
    "pull / linux-jammy-py3.10-gcc11 / test (default, 1, 3, linux.2xlarge)",
    "pull / linux-jammy-py3.10-gcc11 / test (default, 2, 3, linux.2xlarge)",
    "pull / linux-jammy-py3.10-gcc11 / test (default, 3, 3, linux.2xlarge)",
    "trunk / linux-jammy-cuda12.8-py3.10-gcc11 / test (default, 1, 2, linux.g5.4xlarge.nvidia.gpu)",
    "trunk / linux-jammy-cuda12.8-py3.10-gcc11 / test (default, 2, 2, linux.g5.4xlarge.nvidia.gpu)",
    "trunk / linux-jammy-rocm-py3.10 / test (default, 1, 2, linux.rocm.gpu.2) unstable",
    "trunk / macos-py3-arm64 / test (default, 1, 1, macos-m1-stable)",
)

# What a job did on a commit: success, failure, flaky (failed, retried green), cancelled.
Outcome = Callable[[str, int], str]


@dataclass
class Trunk:
    jobs: tuple[str, ...]
    outcome: Outcome
    start: datetime = field(default_factory=lambda: datetime(2026, 11, 18, 15, 0, tzinfo=UTC))
    commit_every: timedelta = timedelta(minutes=30)
    job_duration: timedelta = timedelta(minutes=50)
    window: int = 50

    def sha(self, index: int) -> str:
        return hashlib.sha1(f"commit-{index}".encode()).hexdigest()  # noqa: S324 - an id, not security

    def snapshot(self, now: datetime) -> dict[str, Any]:
        """The HUD API response at `now`: landed commits, newest first, jobs done or running."""
        landed = int((now - self.start) / self.commit_every) + 1 if now >= self.start else 0
        rows = []
        for index in range(landed - 1, max(landed - self.window, 0) - 1, -1):
            time = self.start + index * self.commit_every
            done = now >= time + self.job_duration
            rows.append(
                {
                    "sha": self.sha(index),
                    "time": format_time(time).replace(".000Z", "Z"),
                    "prNum": 160000 + index,
                    "commitTitle": f"[demo] change number {index}",
                    "author": f"dev{index % 4}",
                    "commitUrl": f"https://github.com/pytorch/pytorch/commit/{self.sha(index)}",
                    "jobs": [self._cell(job, column, index, done) for column, job in enumerate(self.jobs)],
                }
            )
        return {"jobNames": list(self.jobs), "shaGrid": rows}

    def _cell(self, job: str, column: int, index: int, done: bool) -> dict[str, Any]:
        url = f"https://github.com/pytorch/pytorch/actions/runs/{index + 1}/job/{column + 1}"
        cell: dict[str, Any] = {"id": index * 10_000 + column, "htmlUrl": url, "status": "completed"}
        if not done:
            return {**cell, "conclusion": "pending", "status": "in_progress"}
        outcome = self.outcome(job, index)
        if outcome == "flaky":
            return {**cell, "conclusion": "success", "failedPreviousRun": True}
        cell["conclusion"] = outcome
        if outcome == "failure":
            test = f"test/test_ops.py::TestCommon::test_case_{column}"
            cell.update(failureLines=[f"FAILED {test}"], failureCaptures=[test])
        return cell

    def polls(self, every: timedelta, until: datetime) -> Iterator[tuple[datetime, dict[str, Any]]]:
        at = self.start + every
        while at <= until:
            yield at, self.snapshot(at)
            at += every


def _demo_outcome(job: str, index: int) -> str:
    if job.endswith("(default, 2, 3, linux.2xlarge)") and 4 <= index <= 8:
        return "failure"  # a real break: commit 4 broke it, commit 9 fixed it
    if "unstable" in job and 3 <= index <= 9:
        return "failure"  # an unstable job: out of scope, never alerts
    if job.startswith("trunk / macos") and index == 6:
        return "flaky"
    return "success"


def demo_replay() -> Replay:
    """A trunk that breaks for five commits and is fixed: TrunkBroken fires and resolves."""
    trunk = Trunk(jobs=DEMO_JOBS, outcome=_demo_outcome)
    events = [
        ReplayEvent(line=n, at=at, kind="hud", payload=snapshot)
        for n, (at, snapshot) in enumerate(
            trunk.polls(timedelta(minutes=10), trunk.start + timedelta(hours=7)), start=2
        )
    ]
    return Replay(repo="pytorch/pytorch", branch="main", config={}, events=events)
