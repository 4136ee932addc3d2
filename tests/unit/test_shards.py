"""A job's shards as webhook deliveries report them (pure rules of domain/shards)."""

from __future__ import annotations

from trunkwatch.domain.cells import CellState, build_cells
from trunkwatch.domain.shards import pending_shards, shard_run

JOB = "pull / linux-jammy / test (default, {}, 3, {}linux.2xlarge)"


def test_unreported_shards_are_pending_across_runner_fleets() -> None:
    reported = [JOB.format(1, "lf."), JOB.format(3, "")]
    assert [run.name for run in pending_shards(reported)] == [JOB.format(2, "lf.")]
    runs = [shard_run(name, 1, "success", "", []) for name in reported] + pending_shards(reported)
    (cell,) = build_cells("a" * 40, runs).values()
    assert cell.state == CellState.PENDING


def test_unsharded_and_complete_jobs_have_no_pending_shard() -> None:
    every = [JOB.format(i, "") for i in (1, 2, 3)]
    assert pending_shards(["pull / linux-jammy / build", "lint / lintrunner", *every]) == []


def test_a_pass_after_a_failed_attempt_is_flaky_and_a_fail_stays_a_fail() -> None:
    assert shard_run("j", 2, "success", "", [1]).failed_before
    assert not shard_run("j", 2, "failure", "", [1]).failed_before
