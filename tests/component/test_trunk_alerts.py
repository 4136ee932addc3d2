"""Trunk-level alerts through the local pipeline: the 5/6 band, inhibition, reminders."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

from tests.support.band import JOBS, outcome, run
from trunkwatch_local.hud_server import HudServer
from trunkwatch_local.replay import Replay
from trunkwatch_local.runtime import LocalRuntime
from trunkwatch_local.scenario import Trunk


@pytest.fixture
def runtime_and_hud(request: pytest.FixtureRequest) -> Iterator[tuple[LocalRuntime, HudServer]]:
    hud = HudServer()
    config = getattr(request, "param", {})
    # The trunk-level alerts are the evaluator's and notifier's logic, not storage's: on the
    # in-memory store (held to the table's contract by the contract tests).
    runtime = LocalRuntime(store="memory").start(
        Replay("pytorch/pytorch", "main", config).deployment(hud.url)
    )
    try:
        yield runtime, hud
    finally:
        runtime.stop()
        hud.stop()


def test_band_moves_in_one_evaluation_and_inhibited_alerts_are_held(runtime_and_hud: Any) -> None:
    runtime, hud = runtime_and_hud
    messages = run(runtime, hud, Trunk(jobs=JOBS, outcome=outcome), hours=5)
    first_five = [("firing", "TrunkJobFailing", f"pull / job{i}") for i in range(5)]
    assert messages[6] == sorted([("firing", "TrunkBroken", ""), *first_five])
    # 5 -> 7 failing jobs: TrunkBroken resolves and TrunkBadlyBroken fires in the same tick;
    # job5 and job6 start firing but are inhibited.
    assert messages[7] == [("firing", "TrunkBadlyBroken", ""), ("resolved", "TrunkBroken", "")]
    # 7 -> 5: back to TrunkBroken; job6, held while inhibited, is sent now; job5 recovered
    # while held, so nothing is said about it.
    assert messages[8] == sorted(
        [
            ("firing", "TrunkBroken", ""),
            ("resolved", "TrunkBadlyBroken", ""),
            ("resolved", "TrunkJobFailing", "pull / job0"),
            ("firing", "TrunkJobFailing", "pull / job6"),
        ]
    )
    assert set(messages) == {6, 7, 8}


@pytest.mark.parametrize("runtime_and_hud", [{"repeat_interval": "1h"}], indirect=True)
def test_reminders_every_repeat_interval(runtime_and_hud: Any) -> None:
    runtime, hud = runtime_and_hud
    trunk = Trunk(jobs=("pull / job1",), outcome=outcome)
    messages = run(runtime, hud, trunk, hours=6.5)
    firing = [commit for commit, sent in messages.items() for m in sent if m[:2] == ("firing", "TrunkBroken")]
    # First at commit 6's completion, then once an hour (every second commit) while it fails.
    assert firing == [6, 8, 10]


@pytest.mark.parametrize("runtime_and_hud", [{"repeat_interval": "0"}], indirect=True)
def test_sweep_resolves_by_age_without_new_cells(runtime_and_hud: Any) -> None:
    runtime, hud = runtime_and_hud
    trunk = Trunk(jobs=("pull / job1", "pull / job7"), outcome=outcome)
    firing_at = trunk.start + timedelta(hours=4)
    hud.serve(trunk.snapshot(firing_at))
    runtime.tick(firing_at)
    assert {p.message["status"] for p in runtime.published(firing_at)} == {"firing"}
    # Trunk goes quiet: the same snapshot, ticks only. The newest failure ages past 24h.
    runtime.tick(firing_at + timedelta(hours=12))
    assert [p for p in runtime.published(firing_at) if not p.is_digest] == []  # past midnight: a digest
    late = firing_at + timedelta(hours=24)
    runtime.tick(late)
    resolved = runtime.published(late)
    assert sorted(p.message["commonLabels"]["alertname"] for p in resolved) == [
        "TrunkBroken",
        "TrunkJobFailing",
    ]
    assert {p.message["status"] for p in resolved} == {"resolved"}


def test_removed_job_resolves_as_stale(runtime_and_hud: Any) -> None:
    runtime, hud = runtime_and_hud
    trunk = Trunk(jobs=("pull / job1", "pull / job7"), outcome=outcome)
    removed = {trunk.sha(i) for i in range(8, 99)}  # job1 was deleted from the workflows at commit 8
    sent = []
    for at, snapshot in trunk.polls(timedelta(minutes=30), trunk.start + timedelta(hours=8)):
        for row in snapshot["shaGrid"]:
            if row["sha"] in removed:
                row["jobs"][0] = {}
        hud.serve(snapshot)
        runtime.tick(at)
        sent += [(p.message["status"], p.message["commonLabels"]["alertname"]) for p in runtime.published(at)]
    assert sent[:2] in (
        [("firing", "TrunkBroken"), ("firing", "TrunkJobFailing")],
        [("firing", "TrunkJobFailing"), ("firing", "TrunkBroken")],
    )
    assert sorted(sent[2:]) == [("resolved", "TrunkBroken"), ("resolved", "TrunkJobFailing")]
