"""A job's shards as webhook deliveries report them (pure rules of domain/shards)."""

from __future__ import annotations

from functools import reduce
from itertools import permutations

import pytest

from trunkwatch.domain.cells import CellState, build_cells
from trunkwatch.domain.shards import Shard, ShardReport, merge, sharded

JOB = "pull / linux-jammy / test (default, {}, 3, {}linux.2xlarge)"
SHA = "a" * 40


def report(attempt: int, conclusion: str, name: str = "pull / j", completed: bool = True) -> ShardReport:
    return ShardReport(SHA, name, 7, attempt, completed, conclusion, url=f"run/{attempt}")


def queued(attempt: int, name: str = "pull / j") -> ShardReport:
    return report(attempt, "queued", name, completed=False)


def shard(*reports: ShardReport) -> Shard:
    first: Shard | None = None
    return reduce(merge, reports, first)  # type: ignore[arg-type]


def state(*reports: ShardReport) -> CellState:
    (cell,) = build_cells(SHA, [shard(*reports).run(reports[0].name)]).values()
    return cell.state


def test_a_queued_shard_keeps_its_job_pending_across_runner_fleets() -> None:
    runs = [
        shard(report(1, "success", JOB.format(1, "lf."))).run(JOB.format(1, "lf.")),
        shard(queued(1, JOB.format(2, ""))).run(JOB.format(2, "")),
        shard(report(1, "success", JOB.format(3, ""))).run(JOB.format(3, "")),
    ]
    (cell,) = build_cells(SHA, runs).values()
    assert cell.state == CellState.PENDING


def test_the_reported_shards_decide_when_the_name_counts_more_than_run() -> None:
    # `1, 3` and `3, 3` reported and done; shard 2 never ran on this commit.
    runs = [shard(report(1, "success", JOB.format(i, ""))).run(JOB.format(i, "")) for i in (1, 3)]
    (cell,) = build_cells(SHA, runs).values()
    assert cell.state == CellState.PASS


def test_a_pass_after_a_failed_attempt_is_flaky_and_a_fail_stays_a_fail() -> None:
    assert state(report(1, "failure"), report(2, "success")) == CellState.FLAKY
    assert state(report(1, "failure"), report(2, "failure")) == CellState.FAIL
    assert state(report(1, "timed_out"), report(2, "success")) == CellState.FLAKY


def test_a_retry_still_queued_keeps_the_result_it_retries() -> None:
    # A result never goes back to pending: the retry's result replaces it when it comes.
    assert state(report(1, "failure"), queued(2)) == CellState.FAIL
    assert state(report(1, "success"), queued(2)) == CellState.PASS
    assert state(queued(1)) == CellState.PENDING


HISTORIES = {
    "retried to green": [queued(1), report(1, "failure"), queued(2), report(2, "success")],
    "retried, still failing": [queued(1), report(1, "failure"), queued(2), report(2, "failure")],
    "retry running": [queued(1), report(1, "failure"), queued(2)],
    "passed, rerun failing": [queued(1), report(1, "success"), queued(2), report(2, "failure")],
}


@pytest.mark.parametrize("history", HISTORIES.values(), ids=HISTORIES.keys())
def test_every_arrival_order_and_redelivery_gives_the_same_shard(history: list[ShardReport]) -> None:
    expected = shard(*history)
    for order in permutations([*history, history[1]]):  # one report delivered twice
        assert shard(*order) == expected


def test_a_report_hidden_by_newer_ones_is_not_reflected() -> None:
    done = shard(queued(1), report(1, "success"), report(2, "success"))
    assert not done.reflects(queued(1)) and not done.reflects(report(1, "success"))
    assert done.reflects(report(2, "success"))
    assert shard(report(2, "success"), report(1, "failure")).reflects(report(1, "failure"))  # made it flaky


def test_a_name_says_whether_the_job_is_one_of_several_shards() -> None:
    assert sharded(JOB.format(2, "lf.")) and sharded("pull / x / test (default, 1, 2)")
    assert not sharded("pull / x / test (default, 1, 1, linux.2xlarge)")
    assert not sharded("pull / x / build") and not sharded("pull / x / test (default, linux.2xlarge)")
