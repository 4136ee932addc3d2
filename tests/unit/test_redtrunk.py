"""The red-trunk generator (benchmarks/redtrunk.py): deterministic per seed, calibrated, and a
replay the local runtime reads."""

import gzip
import itertools
import json
from pathlib import Path

import pytest

from benchmarks.redtrunk import RedTrunk, paths
from trunkwatch_local.replay import read_replay


def test_same_seed_same_files_other_seed_other_trunk(tmp_path: Path) -> None:
    written = []
    for run, seed in (("a", 3), ("b", 3), ("c", 4)):
        replay, truth = paths(tmp_path / run, seed)
        RedTrunk(seed, days=1).write(replay, truth)
        written.append((replay.read_bytes(), truth.read_bytes()))
    assert written[0] == written[1]
    assert written[0][0] != written[2][0] and written[0][1] != written[2][1]


def test_replay_format_and_rerun_field(tmp_path: Path) -> None:
    replay_path, truth_path = paths(tmp_path, 5)
    trunk = RedTrunk(5, days=1)
    trunk.write(replay_path, truth_path)
    replay = read_replay(replay_path)  # every line checked
    assert (replay.repo, replay.branch) == ("pytorch/pytorch", "main")
    events = list(replay.events)
    assert {event.kind for event in events} == {"hud"}
    assert all((b.at - a.at).total_seconds() == 1800 for a, b in itertools.pairwise(events))
    last = events[-1].payload
    assert len(last["shaGrid"]) == 25 and len(last["jobNames"]) == 60
    truth = json.loads(gzip.decompress(truth_path.read_bytes()))
    assert truth["commits"] == len(trunk.commits) and truth["polls"] == len(events)
    for row in last["shaGrid"]:
        causes = truth["cells"][row["sha"]]["causes"]
        for name, cell in zip(last["jobNames"], row["jobs"], strict=True):
            if not cell:
                assert name not in causes  # the job did not run
            elif cell["conclusion"] != "pending":
                assert cell["rerun"]["conclusion"] in ("success", "failure")
                cause = causes[name][0]
                assert (cell["conclusion"] == "success") == (cause in ("pass", "flaky-retried"))
                if cause in ("pass", "flaky", "flaky-retried"):
                    # Only a flaky failure retried to green carries failedPreviousRun.
                    assert bool(cell.get("failedPreviousRun")) == (cause == "flaky-retried")


def test_reruns_follow_the_cause() -> None:
    trunk = RedTrunk(7, days=7)
    brk = trunk.breaks[0]
    column = brk.columns[0]
    later = trunk.commits[brk.culprit].time
    assert trunk.rerun(brk.culprit, column, later)[0] == "failure"  # a real breakage fails again
    window = trunk.windows[0]
    inside = window.start + (window.end - window.start) / 2
    before = max(c.index for c in trunk.commits if c.time < window.start - (window.end - window.start))
    # During a dependency breakage or an outage, reruns fail also on commits that passed.
    assert trunk.rerun(before, window.columns[0], inside)[0] == "failure"
    flaky = [
        (commit.index, col.index)
        for commit in trunk.commits
        for col in trunk.columns
        if (r := trunk.result(commit.index, col.index)) is not None and r.cause == "flaky"
    ]
    assert flaky
    assert all(trunk.rerun(c, j, trunk.end)[0] == "success" for c, j in flaky)  # flaky failures pass


def test_statistics_land_in_the_calibrated_ranges() -> None:
    stats = RedTrunk(7, days=7).stats
    assert 30 <= stats["commits_per_day"] <= 45
    assert stats["daytime_commits_per_hour"] > 1.5 * stats["night_commits_per_hour"]
    assert (stats["jobs"], stats["families"]) == (60, 7)
    assert (stats["jobs_under_0.5pct"], stats["jobs_0.5_to_3pct"], stats["jobs_6_to_15pct"]) == (45, 12, 3)
    assert 0.35 <= stats["flaky_retried_share"] <= 0.55
    assert 0.02 <= stats["break_share"] <= 0.05
    assert 1 <= stats["break_jobs_median"] <= 3
    assert (stats["externals"], stats["outages"]) == (1, 1)
    assert 0.42 <= stats["red_share"] <= 0.60
    assert 0.02 <= stats["absent_share"] <= 0.04


@pytest.mark.parametrize("seed", [1, 2])
def test_episodes_have_the_published_shapes(seed: int) -> None:
    trunk = RedTrunk(seed, days=14)
    for brk in trunk.breaks:
        assert 1 <= len(brk.columns) <= 10
        assert len({trunk.columns[c].family for c in brk.columns}) == 1
        assert 1 <= brk.fix - brk.culprit <= 30
        assert len(set(brk.lines.values())) == 1  # the same failure line on each broken job
    for window in trunk.windows:
        hours = (window.end - window.start).total_seconds() / 3600
        if window.kind == "external":
            assert 6 <= hours <= 10 and window.line
        else:
            assert 1 <= hours <= 2 and window.line is None
            assert len({trunk.columns[c].runner for c in window.columns}) == 1
