"""Workload `github_budget`: a first GitHub poll at PyTorch scale against a slow stand-in.

The GitHub stand-in on 127.0.0.1 serves the synthetic trunk of `columns` job columns and answers
every request `delay_s` late (150 ms: GitHub's latency); the source polls with its default
time budget (`budget_s`, 40 s) until a poll ends within its budget without being cut short.
Reported: the polls it took, each poll's wall time and requests, and whether any job run was
delivered twice (it must not be) or left out (every run of the window delivered once).
"""

from __future__ import annotations

import time
from collections import Counter
from datetime import timedelta
from typing import Any

from benchmarks.github_trunk import LIMIT, serve_at
from benchmarks.trunk import DAY_START, PYTORCH_SCALE, Day
from trunkwatch.domain.config import TrunkConfig
from trunkwatch.net.http import HttpClient
from trunkwatch.sources.github import GitHubSource
from trunkwatch.sources.github.source import DEFAULT_BUDGET_S
from trunkwatch_local.github_server import GitHubServer

DELAY_S = 0.15
MAX_POLLS = 20


def github_budget(
    day: Day = PYTORCH_SCALE, delay_s: float = DELAY_S, budget_s: float = DEFAULT_BUDGET_S
) -> dict[str, Any]:
    at = DAY_START + timedelta(minutes=30)
    server = GitHubServer(limit=LIMIT, delay_s=delay_s)
    try:
        serve_at(server, day.trunk, at)
        trunk = TrunkConfig.from_dict(
            {
                "repo": "pytorch/pytorch",
                "branch": "main",
                "source": "github",
                "url": server.url,
                "per_page": day.window,
            }
        )
        source = GitHubSource(trunk, "bench-token", HttpClient(), window=day.window, budget_s=budget_s)
        state: dict[str, Any] = {}
        delivered: Counter[tuple[str, str]] = Counter()
        walls: list[float] = []
        requests: list[int] = []
        while len(walls) < MAX_POLLS and (not walls or source.out_of_time is not None):
            started = time.monotonic()
            snapshot = source.poll(state, at)
            walls.append(round(time.monotonic() - started, 2))
            requests.append(snapshot.http_requests)
            state = snapshot.state
            delivered.update((r.commit.sha, run.name) for r in snapshot.commits for run in r.runs)
        window = {record[0] for record in state["commits"]["list"]}
        runs = [
            record
            for page in state["runs"]
            for sha, records in page["runs"].items()
            if sha in window
            for record in records
        ]
        return {
            "job_columns": day.columns,
            "commits_per_page": day.window,
            "delay_s": delay_s,
            "budget_s": budget_s,
            "polls": len(walls),
            "caught_up": source.out_of_time is None,
            "http_requests": sum(requests),
            "poll_wall_s": walls,
            "poll_requests": requests,
            "runs_in_window": len({record[0] for record in runs}),
            "runs_delivered": len({record[0] for record in runs if record[4]}),
            "duplicated_job_runs": sum(1 for count in delivered.values() if count > 1),
            "over_budget_polls": sum(1 for wall in walls if wall > budget_s),
        }
    finally:
        server.stop()
