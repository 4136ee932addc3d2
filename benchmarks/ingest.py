"""Workload 1: one trunk's first poll and a steady-state poll (the same data again).

`trunkwatch.app.ingest.poll_trunk` runs with the real sources against stand-ins on 127.0.0.1
(`HudServer`, `GitHubServer`) and the template's table on moto's in-process mock. HUD
requests without If-None-Match are counted in the sources' HTTP client (`HudServer` does
not see headers), GitHub's at the stand-in. Peak memory: see `benchmarks.memory`.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from benchmarks.github_trunk import LIMIT, serve_at
from benchmarks.harness import InProcessAws
from benchmarks.memory import Peak, peak_growth
from benchmarks.trunk import Day
from benchmarks.usage import Meter, Usage
from trunkwatch.app.ingest import PollResult, poll_trunk
from trunkwatch.domain.config import PYTORCH_INCLUDE, Deployment, load_deployment
from trunkwatch.net.http import HttpClient, Response
from trunkwatch.sources.github import GitHubSource
from trunkwatch.sources.hud import HudSource
from trunkwatch.storage.port import Storage
from trunkwatch_local.github_server import GitHubServer
from trunkwatch_local.hud_server import HudServer


class ConditionalCountingClient(HttpClient):
    """The sources' HTTP client, counting the requests sent without If-None-Match."""

    def __init__(self) -> None:
        super().__init__()
        self.unconditional = 0

    def get(self, url: str, headers: dict[str, str] | None = None) -> Response:
        self.unconditional += not any(name.lower() == "if-none-match" for name in headers or {})
        return super().get(url, headers)


def deployment(source: str, url: str, per_page: int) -> Deployment:
    """One PyTorch trunk with the PyTorch preset's job scope."""
    trunk = {
        "repo": "pytorch/pytorch",
        "branch": "main",
        "source": source,
        "url": url,
        "per_page": per_page,
        "config": {"include": PYTORCH_INCLUDE},
    }
    return load_deployment({"trunks": [trunk]})


# On the table's storage -> result, http requests, unconditional
Poll = Callable[[Storage], tuple[PollResult, int, int]]


def poll_figures(
    usage: Usage, result: PollResult, http: int, unconditional: int, peak: Peak
) -> dict[str, Any]:
    return {
        "http_requests": http,
        "http_unconditional_requests": unconditional,
        "ddb_write_requests": usage.ddb_write_requests,
        "items_written": usage.items_written,
        "items_read": usage.items_read,
        "wall_s": round(usage.wall_seconds, 4),
        "peak_mb": peak.mb,
        # What explains the figures above: the part of the peak still resident after the poll
        # (moto's copy of the items), and where the requests and request units go.
        "retained_mb": peak.retained_mb,
        "cells_written": result.cells_written,
        "ddb_requests": {
            k.removeprefix("dynamodb."): n
            for k, n in sorted(usage.calls.items())
            if k.startswith("dynamodb.")
        },
        "read_units": usage.read_units,
        "write_units": usage.write_units,
        "code_s": round(usage.code_seconds, 4),
        "emulator_s": round(usage.emulator_seconds, 4),
    }


def _two_polls(dep: Deployment, poll: Poll) -> dict[str, dict[str, Any]]:
    """The first poll into an empty table, then the same data again."""
    meter = Meter()
    figures: dict[str, dict[str, Any]] = {}
    with meter, InProcessAws(dep, meter) as aws:
        for phase in ("first_poll", "steady_poll"):
            outcome: list[tuple[PollResult, int, int]] = []
            with peak_growth() as peak:
                meter.invoke(phase, lambda: outcome.append(poll(aws.storage)))  # noqa: B023 - called at once
            result, http, unconditional = outcome[0]
            figures[phase] = poll_figures(meter.get(phase), result, http, unconditional, peak)
        return figures


def ingest_hud(day: Day, at: datetime) -> dict[str, dict[str, Any]]:
    hud = HudServer()
    try:
        hud.serve(day.trunk.snapshot(at))
        dep = deployment("hud", hud.url, day.window)
        trunk = dep.trunks[0]
        rule = dep.rule_for(trunk)

        def poll(storage: Storage) -> tuple[PollResult, int, int]:
            http = ConditionalCountingClient()
            before = hud.requests
            result = poll_trunk(storage, trunk, rule, HudSource(trunk, None, http), at)
            return result, hud.requests - before, http.unconditional

        return _two_polls(dep, poll)
    finally:
        hud.stop()


def ingest_github(day: Day, at: datetime) -> dict[str, dict[str, Any]]:
    github = GitHubServer(limit=LIMIT)
    try:
        serve_at(github, day.trunk, at)
        dep = deployment("github", github.url, day.window)
        trunk = dep.trunks[0]
        rule = dep.rule_for(trunk)

        def poll(storage: Storage) -> tuple[PollResult, int, int]:
            github.take()
            source = GitHubSource(trunk, "bench-token", HttpClient(), window=trunk.per_page)
            result = poll_trunk(storage, trunk, rule, source, at)
            return result, len(github.requests), github.unconditional

        return _two_polls(dep, poll)
    finally:
        github.stop()
