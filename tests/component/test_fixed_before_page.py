"""Breakages fixed before anyone was paged (design.md §3.7) on the local runtime: a trunk
whose jobs break for two commits and are fixed, beside a break that pages, polled every 10
minutes through the real handlers (in-memory store)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest

from trunkwatch_local.hud_server import HudServer
from trunkwatch_local.replay import Replay
from trunkwatch_local.runtime import LocalRuntime
from trunkwatch_local.scenario import DEMO_JOBS, Trunk

TRUNK_ID = "pytorch/pytorch#main"
TEST = "pull / linux-jammy-py3.10-gcc11 / test (default, linux.2xlarge)"
BUILD = "pull / linux-jammy-py3.10-gcc11 / build"
CUDA = "trunk / linux-jammy-cuda12.8-py3.10-gcc11 / test (default, linux.g5.4xlarge.nvidia.gpu)"


def outcome(job: str, index: int) -> str:
    """Commit 4 breaks the test and the build (both fail on 4 and 5, commit 6 fixes them);
    commit 10 breaks CUDA for four commits (it pages); a flaky macOS retry now and then."""
    if (
        job.startswith("pull / linux-jammy-py3.10-gcc11 / test (default, 2, 3") or job == BUILD
    ) and index in (
        4,
        5,
    ):
        return "failure"
    if job.startswith("trunk / linux-jammy-cuda12.8") and 10 <= index <= 13:
        return "failure"
    if job.startswith("trunk / macos") and index % 5 == 0:
        return "flaky"
    return "success"


@pytest.fixture
def runtime() -> Iterator[tuple[LocalRuntime, HudServer]]:
    hud = HudServer()
    runtime = LocalRuntime(store="memory").start(Replay("pytorch/pytorch", "main", {}).deployment(hud.url))
    try:
        yield runtime, hud
    finally:
        runtime.stop()
        hud.stop()


def test_a_two_commit_breakage_is_recorded_once_per_job_and_one_that_paged_is_not(
    runtime: tuple[LocalRuntime, HudServer],
) -> None:
    local, hud = runtime
    trunk = Trunk(jobs=DEMO_JOBS, outcome=outcome)
    sent = []
    for at, snapshot in trunk.polls(timedelta(minutes=10), trunk.start + timedelta(hours=10)):
        hud.serve(snapshot)
        local.tick(at)
        sent += local.published(at)
    storage = local.stack.storage()
    found = storage.alerts.fixed(TRUNK_ID)
    # Both jobs of the two-commit breakage, each once, naming its culprit and its fix.
    assert sorted((f.job, f.culprit.sha, f.fix.sha, f.failed_commits) for f in found) == [
        (BUILD, trunk.sha(4), trunk.sha(6), 2),
        (TEST, trunk.sha(4), trunk.sha(6), 2),
    ]
    assert all(f.last_pass is not None and f.last_pass.sha == trunk.sha(3) for f in found)
    assert all(f.culprit.author == "dev0" and f.culprit.pr == 160004 for f in found)
    # The CUDA break paged (it fired and resolved) and is not one of them; past midnight,
    # the day's digest tells the two-commit one.
    alerts = [m for m in sent if not m.is_digest]
    assert {m.attributes.get("alertname") for m in alerts} == {"TrunkJobFailing", "TrunkBroken"}
    assert {m.message["commonLabels"].get("job") for m in alerts} == {CUDA, None}
    (digest,) = [m.message for m in sent if m.is_digest]
    assert [b["culprit_sha"] for b in digest["fixed_before_page"]] == [trunk.sha(4)]
    # Nothing is left waiting for a fix.
    assert storage.trunks.state(TRUNK_ID).unpaged == set()
