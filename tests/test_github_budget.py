"""The GitHub source's time budget against a slow GitHub stand-in on 127.0.0.1 (every answer
150 ms late): a first poll too big for one budget completes over several polls, each within
its budget, with every run's jobs delivered exactly once."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

from benchmarks.github_server import GitHubServer
from benchmarks.trunk import DAY_START, Day
from trunkwatch.domain.cells import build_cells
from trunkwatch.domain.config import TrunkConfig
from trunkwatch.sources.base import Snapshot
from trunkwatch.sources.github import GitHubSource
from trunkwatch.sources.http import HttpClient

DELAY_S = 0.15
BUDGET_S = 1.5
# 4 environments (3 workflows) of 6 test configurations, 10-commit window: about 40 requests.
DAY = Day(environments=4, window=10, tests=6)
AT = DAY_START + timedelta(minutes=30)


@pytest.fixture(scope="module")
def github() -> Iterator[GitHubServer]:
    server = GitHubServer(DAY.trunk, delay_s=DELAY_S)
    server.serve_at(AT)
    yield server
    server.stop()


def source(github: GitHubServer, budget_s: float | None) -> GitHubSource:
    trunk = TrunkConfig.from_dict(
        {
            "repo": "pytorch/pytorch",
            "branch": "main",
            "source": "github",
            "url": github.url,
            "per_page": DAY.window,
        }
    )
    return GitHubSource(trunk, "bench-token", HttpClient(), window=DAY.window, budget_s=budget_s)


def cells(snapshots: list[Snapshot]) -> dict[str, dict[str, Any]]:
    """sha -> job key -> cell, the later snapshot's runs over the earlier ones'."""
    runs: dict[str, dict[str, Any]] = {}
    for snapshot in snapshots:
        for result in snapshot.commits:
            runs.setdefault(result.commit.sha, {}).update({r.name: r for r in result.runs})
    return {sha: build_cells(sha, by_name.values()) for sha, by_name in runs.items() if by_name}


def test_a_first_poll_over_budget_completes_across_polls(github: GitHubServer) -> None:
    github.reset_counts()
    one_shot = source(github, budget_s=None).poll({}, AT)
    one_shot_requests = github.requests
    assert one_shot_requests * DELAY_S > 2.5 * BUDGET_S  # it cannot fit in one budget

    src = source(github, budget_s=BUDGET_S)
    state: dict[str, Any] = {}
    snapshots: list[Snapshot] = []
    walls: list[float] = []
    for _ in range(20):
        started = time.monotonic()
        snapshot = src.poll(state, AT)
        walls.append(time.monotonic() - started)
        snapshots.append(snapshot)
        state = snapshot.state
        if src.out_of_time is None:
            break
    assert src.out_of_time is None, "never caught up"
    assert len(snapshots) >= 3
    # Each poll stays within its budget (the last answer is not cut off).
    assert max(walls) <= BUDGET_S + 0.1, walls
    # Every poll made progress and returned whole runs only (complete=False updates).
    assert all(r.runs for s in snapshots for r in s.commits if r.runs) and all(
        not r.complete for s in snapshots for r in s.commits
    )
    delivered = Counter((r.commit.sha, run.name) for s in snapshots for r in s.commits for run in r.runs)
    assert max(delivered.values()) == 1  # nothing delivered twice
    assert cells(snapshots) == cells([one_shot])  # nothing lost
    # Caught up: the next poll reads no job and keeps the state.
    github.reset_counts()
    steady = src.poll(state, AT)
    assert not any(r.runs for r in steady.commits) and steady.state == state
    assert github.requests <= 3
