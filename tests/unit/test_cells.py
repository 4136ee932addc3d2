"""Cells (design.md §3.1): job keys, conclusions, attempts and shard merging."""

import pytest

from trunkwatch.domain.cells import CellState, JobRun, build_cells, job_key, merge_shards, shard_state


@pytest.mark.parametrize(
    ("name", "key"),
    [
        (
            "pull / linux-jammy-py3.10-gcc11 / test (default, 2, 5, linux.2xlarge)",
            "pull / linux-jammy-py3.10-gcc11 / test (default, linux.2xlarge)",
        ),
        (
            "trunk / macos-py3-arm64 / test (default, 1, 1, macos-m1-stable)",
            "trunk / macos-py3-arm64 / test (default, macos-m1-stable)",
        ),
        (
            "trunk / rocm / test (default, 1, 2, linux.rocm.gpu.2) unstable",
            "trunk / rocm / test (default, linux.rocm.gpu.2) unstable",
        ),
        ("pull / linux-jammy-py3.10-gcc11 / build", "pull / linux-jammy-py3.10-gcc11 / build"),
        (
            "lint / lintrunner (1, 2)",
            "lint / lintrunner (1, 2)",
        ),  # no config name before the shard: not a shard
    ],
)
def test_job_key_strips_shard_numbers(name: str, key: str) -> None:
    assert job_key(name) == key


@pytest.mark.parametrize(
    ("conclusion", "state"),
    [
        ("success", CellState.PASS),
        ("failure", CellState.FAIL),
        ("timed_out", CellState.FAIL),
        ("startup_failure", CellState.FAIL),
        ("cancelled", CellState.NODATA),
        ("skipped", CellState.NODATA),
        ("neutral", CellState.NODATA),
        ("action_required", CellState.NODATA),
        ("stale", CellState.NODATA),
        ("queued", CellState.PENDING),
        ("in_progress", CellState.PENDING),
        ("pending", CellState.PENDING),
        (None, CellState.PENDING),
    ],
)
def test_conclusion_table(conclusion: str | None, state: CellState) -> None:
    assert shard_state(JobRun("j", conclusion)) == state


def test_cancelled_can_count_as_fail() -> None:
    assert shard_state(JobRun("j", "cancelled"), cancelled="fail") == CellState.FAIL


def test_retried_to_green_is_flaky() -> None:
    assert shard_state(JobRun("j", "success", failed_before=True)) == CellState.FLAKY


@pytest.mark.parametrize(
    ("shards", "state"),
    [
        ([CellState.FAIL, CellState.PENDING], CellState.FAIL),  # any fail, even while others run
        ([CellState.PASS, CellState.PENDING], CellState.PENDING),
        ([CellState.PASS, CellState.FLAKY], CellState.FLAKY),
        ([CellState.PASS, CellState.NODATA], CellState.PASS),
        ([CellState.NODATA, CellState.NODATA], CellState.NODATA),
    ],
)
def test_shard_merge(shards: list[CellState], state: CellState) -> None:
    assert merge_shards(shards) == state


def test_failure_moving_between_shards_is_one_job() -> None:
    first = build_cells(
        "a", [JobRun("t / x (default, 1, 2, r)", "failure"), JobRun("t / x (default, 2, 2, r)", "success")]
    )
    second = build_cells(
        "b", [JobRun("t / x (default, 1, 2, r)", "success"), JobRun("t / x (default, 2, 2, r)", "failure")]
    )
    assert list(first) == list(second) == ["t / x (default, r)"]
    assert first["t / x (default, r)"].state == second["t / x (default, r)"].state == CellState.FAIL


def test_cell_keeps_failing_shard_details_capped() -> None:
    runs = [
        JobRun(
            "t / x (default, 1, 2, r)",
            "failure",
            url="u1",
            failure_lines=tuple(f"line {i}" * 100 for i in range(9)),
        )
    ]
    cell = build_cells("a", runs)["t / x (default, r)"]
    assert cell.url == "u1"
    assert len(cell.failure_lines) == 3 and all(len(line) <= 200 for line in cell.failure_lines)
