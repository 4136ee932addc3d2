"""Workload 1: one trunk's first poll and a steady-state poll (the same data again).

`trunkwatch.ingest.poll_trunk` runs with the real sources against stand-ins on 127.0.0.1
(`HudServer`, `GitHubServer`) and the template's table on moto's in-process mock. Wall time
is measured without tracemalloc; peak memory (tracemalloc, Python allocations including the
emulator's copy of the items written) in a second, identical run on a fresh table.
"""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

from trunkwatch.config import PYTORCH_INCLUDE, Deployment, load_deployment
from trunkwatch.ingest import PollResult, poll_trunk
from trunkwatch.local.hud_server import HudServer
from trunkwatch.sources.base import HttpClient, Response
from trunkwatch.sources.github import GitHubSource
from trunkwatch.sources.hud import HudSource

from benchmarks.github_server import GitHubServer
from benchmarks.harness import InProcessAws
from benchmarks.trunk import WINDOW, Day
from benchmarks.usage import Meter, Usage

MB = 1024 * 1024


class ConditionalCountingClient(HttpClient):
    """The sources' HTTP client, counting the requests sent without If-None-Match."""

    def __init__(self) -> None:
        super().__init__()
        self.unconditional = 0

    def get(self, url: str, headers: dict[str, str] | None = None) -> Response:
        self.unconditional += not any(name.lower() == "if-none-match" for name in headers or {})
        return super().get(url, headers)


@dataclass
class PollFigures:
    http_requests: int
    http_unconditional_requests: int
    ddb_write_requests: int
    items_written: int
    items_read: int
    wall_s: float
    peak_mb: float
    # beyond SPEC 8: where the requests and request units go
    cells_written: int = 0
    ddb_requests: dict[str, int] = field(default_factory=dict)
    read_units: float = 0.0
    write_units: float = 0.0
    code_s: float = 0.0
    emulator_s: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def deployment(source: str, url: str) -> Deployment:
    """One PyTorch trunk with the PyTorch preset's job scope."""
    trunk = {
        "repo": "pytorch/pytorch",
        "branch": "main",
        "source": source,
        "url": url,
        "per_page": WINDOW,
        "config": {"include": PYTORCH_INCLUDE},
    }
    return load_deployment({"trunks": [trunk]})


Poll = Callable[[], tuple[PollResult, int, int]]  # -> result, http requests, unconditional


def _figures(usage: Usage, result: PollResult, http: int, unconditional: int, peak: float) -> PollFigures:
    return PollFigures(
        http_requests=http,
        http_unconditional_requests=unconditional,
        ddb_write_requests=usage.ddb_write_requests,
        items_written=usage.items_written,
        items_read=usage.items_read,
        wall_s=round(usage.seconds, 4),
        peak_mb=round(peak / MB, 2),
        cells_written=result.cells_written,
        ddb_requests={k.removeprefix("dynamodb."): v for k, v in sorted(usage.calls.items()) if k.startswith("dynamodb.")},
        read_units=usage.read_units,
        write_units=usage.write_units,
        code_s=round(usage.code_seconds, 4),
        emulator_s=round(usage.emulator_seconds, 4),
    )


def _peak(poll: Poll) -> float:
    tracemalloc.start()
    try:
        poll()
        return float(tracemalloc.get_traced_memory()[1])
    finally:
        tracemalloc.stop()


def _measure(meter: Meter, label: str, poll: Poll) -> tuple[Usage, PollResult, int, int]:
    results: list[tuple[PollResult, int, int]] = []
    usage = meter.get(label)
    meter.invoke(label, lambda: results.append(poll()))
    return usage, *results[0]


def _two_polls(dep: Deployment, make_poll: Callable[[Any], Poll]) -> dict[str, PollFigures]:
    """First and steady poll, timed on one table and traced for memory on another."""
    meter = Meter()
    figures: dict[str, PollFigures] = {}
    with meter, InProcessAws(dep, meter):
        poll = make_poll(dep)
        for phase in ("first_poll", "steady_poll"):
            usage, result, http, unconditional = _measure(meter, phase, poll)
            figures[phase] = _figures(usage, result, http, unconditional, 0.0)
    with InProcessAws(dep, Meter()):
        poll = make_poll(dep)
        for phase in ("first_poll", "steady_poll"):
            figures[phase].peak_mb = round(_peak(poll) / MB, 2)
    return figures


def ingest_hud(day: Day, at: datetime) -> dict[str, PollFigures]:
    hud = HudServer()
    try:
        hud.serve(day.trunk.snapshot(at))
        dep = deployment("hud", hud.url)

        def make_poll(dep: Deployment) -> Poll:
            trunk = dep.trunks[0]
            rule = dep.rule_for(trunk)

            def poll() -> tuple[PollResult, int, int]:
                http = ConditionalCountingClient()
                before = hud.requests
                result = poll_trunk(trunk, rule, HudSource(trunk, None, http), at)
                return result, hud.requests - before, http.unconditional

            return poll

        return _two_polls(dep, make_poll)
    finally:
        hud.stop()


def ingest_github(day: Day, at: datetime) -> dict[str, PollFigures]:
    github = GitHubServer(day.trunk)
    try:
        github.serve_at(at)
        dep = deployment("github", github.url)

        def make_poll(dep: Deployment) -> Poll:
            trunk = dep.trunks[0]
            rule = dep.rule_for(trunk)

            def poll() -> tuple[PollResult, int, int]:
                github.reset_counts()
                source = GitHubSource(trunk, "bench-token", HttpClient(), window=trunk.per_page)
                result = poll_trunk(trunk, rule, source, at)
                return result, github.requests, github.unconditional

            return poll

        return _two_polls(dep, make_poll)
    finally:
        github.stop()

