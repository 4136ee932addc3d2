"""Three trunks on one local runtime, each polled from its own HUD stand-in: one broken now
(after an earlier break that was fixed), one that broke and was fixed, one never broken.
For the trunk health routes and the status page's overview, grid and history."""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from trunkwatch import sources
from trunkwatch.channels import RECEIVER_TYPES
from trunkwatch.domain.cells import job_key
from trunkwatch.domain.config import load_deployment
from trunkwatch_local import apigw
from trunkwatch_local.hud_server import HudServer
from trunkwatch_local.runtime import LocalRuntime
from trunkwatch_local.scenario import Outcome, Trunk

START = datetime(2026, 11, 20, tzinfo=UTC)  # the API tests' first commit
BROKEN = "pytorch/pytorch#main"
FIXED = "pytorch/vision#main"
QUIET = "pytorch/audio#main"
BROKEN_JOB = "pull / linux-jammy-py3.10-gcc11 / test (default, linux.2xlarge)"
OTHER_JOB = "trunk / macos-py3-arm64 / test (default, macos-m1-stable)"
JOBS = (
    "lint / lintrunner-noclang / linux-job",
    "pull / linux-jammy-py3.10-gcc11 / build",
    "pull / linux-jammy-py3.10-gcc11 / test (default, 1, 2, linux.2xlarge)",
    "pull / linux-jammy-py3.10-gcc11 / test (default, 2, 2, linux.2xlarge)",
    "trunk / macos-py3-arm64 / test (default, 1, 1, macos-m1-stable)",
)
COMMIT_EVERY = timedelta(hours=1)
# Hourly polls, each just after the newest commit's jobs finished (they take 50 minutes).
FIRST_POLL = timedelta(minutes=55)
COMMITS = 48  # two days of commits
# Commits each trunk's jobs fail on, by job key.
FAILS: dict[str, dict[str, tuple[range, ...]]] = {
    # Broke at commit 8, fixed at 14 (the macOS job joined at 10 and was fixed at 13); broke
    # again at commit 40 and still failing. Before all that, commit 2 broke the macOS job for
    # two commits only: fixed before a page.
    BROKEN: {BROKEN_JOB: (range(8, 14), range(40, 99)), OTHER_JOB: (range(2, 4), range(10, 13))},
    FIXED: {BROKEN_JOB: (range(20, 26),)},
    QUIET: {},
}
# The culprit commits: where each break started.
CULPRITS = {BROKEN: (8, 40), FIXED: (20,)}


def _outcome(trunk_id: str) -> Outcome:
    fails = FAILS[trunk_id]

    def outcome(job: str, index: int) -> str:
        return "failure" if any(index in run for run in fails.get(job_key(job), ())) else "success"

    return outcome


@dataclass
class Trunks:
    runtime: LocalRuntime
    trunks: dict[str, Trunk]
    huds: dict[str, HudServer]
    start: datetime

    @property
    def end(self) -> datetime:
        """The last poll: the last commit's jobs have finished."""
        return self.start + COMMITS * COMMIT_EVERY + FIRST_POLL

    def replay(self) -> None:
        """Every trunk's commits landing and finishing, polled once a commit until `end`."""
        at = self.start + FIRST_POLL
        while at <= self.end:
            for trunk_id, trunk in self.trunks.items():
                self.huds[trunk_id].serve(trunk.snapshot(at))
            self.runtime.tick(at)
            self.runtime.published(at)
            at += COMMIT_EVERY


@contextmanager
def three_trunks(start: datetime, store: str = "memory") -> Iterator[Trunks]:
    """The three trunks' runtime, started and not yet replayed (`replay()` runs it); its
    items on `store` (the local runtime's)."""
    huds = {trunk_id: HudServer() for trunk_id in FAILS}
    trunks = {
        trunk_id: Trunk(jobs=JOBS, outcome=_outcome(trunk_id), start=start, commit_every=COMMIT_EVERY)
        for trunk_id in FAILS
    }
    config = {
        "trunks": [
            {"repo": trunk_id.split("#")[0], "branch": "main", "source": "hud", "url": hud.url}
            for trunk_id, hud in huds.items()
        ]
    }
    runtime = LocalRuntime(store=store)
    try:
        runtime.start(load_deployment(config, RECEIVER_TYPES, sources=sources.REGISTRY))
        yield Trunks(runtime, trunks, huds, start)
    finally:
        runtime.stop()
        for hud in huds.values():
            hud.stop()


def get(trunks: Trunks, path: str, trunk: str | None = None) -> tuple[int, Any]:
    """The API's answer to `GET path?trunk=` (an API Gateway proxy event)."""
    query = urllib.parse.urlencode({"trunk": trunk}) if trunk is not None else ""
    response = trunks.runtime.invoke("api", apigw.proxy_event("GET", path, query=query))
    return response["statusCode"], json.loads(response["body"])


def at(hours: float) -> str:
    """The API's timestamp `hours` after START."""
    return (START + timedelta(hours=hours)).strftime("%Y-%m-%dT%H:%M:%S.000Z")
