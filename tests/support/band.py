"""A trunk of eight jobs that walks the 5/6 trunk band (TrunkBroken, TrunkBadlyBroken), run
through the local pipeline: for the trunk-alert and retention tests."""

from __future__ import annotations

from collections import defaultdict
from datetime import timedelta

from trunkwatch_local.hud_server import HudServer
from trunkwatch_local.runtime import LocalRuntime
from trunkwatch_local.scenario import Trunk

JOBS = tuple(f"pull / job{i}" for i in range(8))
# job -> commits it fails on
FAILS = {
    "pull / job0": range(4, 8),  # fixed by commit 8
    "pull / job1": range(4, 99),
    "pull / job2": range(4, 99),
    "pull / job3": range(4, 99),
    "pull / job4": range(4, 99),
    "pull / job5": range(5, 8),
    "pull / job6": range(5, 99),
}


def outcome(job: str, index: int) -> str:
    return "failure" if index in FAILS.get(job, ()) else "success"


def run(
    runtime: LocalRuntime, hud: HudServer, trunk: Trunk, hours: float
) -> dict[int, list[tuple[str, str, str]]]:
    """Messages per commit whose completion triggered them: (status, alertname, job or '')."""
    by_commit: dict[int, list[tuple[str, str, str]]] = defaultdict(list)
    for at, snapshot in trunk.polls(timedelta(minutes=10), trunk.start + timedelta(hours=hours)):
        hud.serve(snapshot)
        runtime.tick(at)
        done = int((at - trunk.start - trunk.job_duration) / trunk.commit_every)
        for published in runtime.published(at):
            labels = published.message["commonLabels"]
            by_commit[done].append((published.message["status"], labels["alertname"], labels.get("job", "")))
    return {commit: sorted(messages) for commit, messages in by_commit.items()}
