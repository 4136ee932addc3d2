"""The GitHub source's time budget against a GitHub stand-in on 127.0.0.1 whose every answer
takes 125 ms of a clock the test keeps (the source's `time.monotonic()`): a first poll too big
for one budget completes over several polls, none of which sends a request that would end
after its budget, with every run's jobs delivered exactly once. No assertion on the wall
clock, so a busy machine cannot fail it."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from datetime import timedelta
from types import SimpleNamespace
from typing import Any

import pytest

from benchmarks.github_trunk import LIMIT, serve_at
from benchmarks.trunk import DAY_START, Day
from trunkwatch.domain.cells import build_cells
from trunkwatch.domain.config import TrunkConfig
from trunkwatch.net import rest as rest_api
from trunkwatch.net.http import HttpClient
from trunkwatch.sources.base import Snapshot
from trunkwatch.sources.github import GitHubSource
from trunkwatch.sources.github import source as github_source
from trunkwatch_local.github_server import GitHubServer

# Binary fractions, so the clock's sums are exact.
DELAY_S = 0.125
BUDGET_S = 1.4375  # 11.5 answers: a rule that ignored what an answer takes would overrun it
# 4 environments (3 workflows) of 6 test configurations, 10-commit window: about 40 requests.
DAY = Day(environments=4, window=10, tests=6)
AT = DAY_START + timedelta(minutes=30)


@pytest.fixture(scope="module")
def github() -> Iterator[GitHubServer]:
    server = GitHubServer(limit=LIMIT)
    serve_at(server, DAY.trunk, AT)
    yield server
    server.stop()


class SlowClock:
    """The source's monotonic clock: every request the HTTP client makes takes DELAY_S."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.answers: list[float] = []  # when each request was answered

    def monotonic(self) -> float:
        return self.now


class SlowHttpClient(HttpClient):
    def __init__(self, clock: SlowClock) -> None:
        super().__init__()
        self.clock = clock

    def get(self, url: str, headers: dict[str, str] | None = None) -> Any:
        response = super().get(url, headers)
        self.clock.now += DELAY_S
        self.clock.answers.append(self.clock.now)
        return response


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> SlowClock:
    clock = SlowClock()
    fake_time = SimpleNamespace(monotonic=clock.monotonic)
    monkeypatch.setattr(rest_api, "time", fake_time)
    monkeypatch.setattr(github_source, "time", fake_time)
    return clock


def source(github: GitHubServer, budget_s: float | None, clock: SlowClock) -> GitHubSource:
    trunk = TrunkConfig.from_dict(
        {
            "repo": "pytorch/pytorch",
            "branch": "main",
            "source": "github",
            "url": github.url,
            "per_page": DAY.window,
        }
    )
    http = SlowHttpClient(clock)
    return GitHubSource(trunk, "bench-token", http, window=DAY.window, budget_s=budget_s)


def cells(snapshots: list[Snapshot]) -> dict[str, dict[str, Any]]:
    """sha -> job key -> cell, the later snapshot's runs over the earlier ones'."""
    runs: dict[str, dict[str, Any]] = {}
    for snapshot in snapshots:
        for result in snapshot.commits:
            runs.setdefault(result.commit.sha, {}).update({r.name: r for r in result.runs})
    return {sha: build_cells(sha, by_name.values()) for sha, by_name in runs.items() if by_name}


def test_a_first_poll_over_budget_completes_across_polls(github: GitHubServer, clock: SlowClock) -> None:
    github.take()
    one_shot = source(github, budget_s=None, clock=clock).poll({}, AT)
    one_shot_requests = len(github.requests)
    assert one_shot_requests * DELAY_S > 2.5 * BUDGET_S  # it cannot fit in one budget

    src = source(github, budget_s=BUDGET_S, clock=clock)
    state: dict[str, Any] = {}
    snapshots: list[Snapshot] = []
    spans: list[tuple[float, float]] = []  # (start, end) of each poll on the source's clock
    for _ in range(20):
        started = clock.now
        snapshot = src.poll(state, AT)
        spans.append((started, clock.now))
        snapshots.append(snapshot)
        state = snapshot.state
        if src.out_of_time is None:
            break
    assert src.out_of_time is None, "never caught up"
    assert len(snapshots) >= 3
    # No request ends after its poll's budget: the source stops before one would...
    assert all(end - start <= BUDGET_S for start, end in spans), spans
    # ... and only then: each poll cut short sent every request that still fitted.
    assert all(end - start >= BUDGET_S - DELAY_S for start, end in spans[:-1]), spans
    assert sum(s.http_requests for s in snapshots) == len(clock.answers) - one_shot_requests
    # Every poll made progress and returned whole runs only (complete=False updates).
    assert all(r.runs for s in snapshots for r in s.commits if r.runs) and all(
        not r.complete for s in snapshots for r in s.commits
    )
    delivered = Counter((r.commit.sha, run.name) for s in snapshots for r in s.commits for run in r.runs)
    assert max(delivered.values()) == 1  # nothing delivered twice
    assert cells(snapshots) == cells([one_shot])  # nothing lost
    # Caught up: the next poll reads no job and keeps the state.
    github.take()
    steady = src.poll(state, AT)
    assert not any(r.runs for r in steady.commits) and steady.state == state
    assert len(github.requests) <= 3
