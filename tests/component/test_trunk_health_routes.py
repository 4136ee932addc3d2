"""`GET /api/v2/trunks`, `/api/v2/trunks/grid` and `/api/v2/trunks/history` through the API
handler (API Gateway's proxy events), on three trunks replayed through the local pipeline
(tests/support/trunks.py) on the in-memory store: the overview broken first, the grids with
their culprits, bad trunk ids. The history: test_trunk_history_route.py."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.trunks import BROKEN, BROKEN_JOB, FIXED, QUIET, START, Trunks, at, get, three_trunks


@pytest.fixture(scope="module")
def replayed() -> Iterator[Trunks]:
    # The routes read through the storage port: the in-memory store answers as the table
    # does (the contract tests), in a quarter of the time.
    with three_trunks(START, store="memory") as trunks:
        trunks.replay()
        yield trunks


def test_the_overview_lists_every_trunk_broken_first(replayed: Trunks) -> None:
    status, trunks = get(replayed, "/api/v2/trunks")
    assert status == 200
    assert [(t["trunk"], t["health"]) for t in trunks] == [
        (BROKEN, "broken"),
        (QUIET, "healthy"),
        (FIXED, "healthy"),
    ]
    broken = trunks[0]
    assert (broken["repo"], broken["branch"]) == ("pytorch/pytorch", "main")
    assert broken["alertname"] == "TrunkBroken"
    assert broken["brokenSince"] == at(40)
    (failing,) = broken["failingJobs"]
    assert failing["job"] == BROKEN_JOB
    assert failing["culprit"]["sha"] == replayed.trunks[BROKEN].sha(40)
    assert failing["streak"] == 9  # commits 40..48
    assert all(t["failingJobs"] == [] and t["brokenSince"] is None for t in trunks[1:])


def test_a_broken_trunks_grid_shows_its_failing_job_and_culprit(replayed: Trunks) -> None:
    status, grid = get(replayed, "/api/v2/trunks/grid", BROKEN)
    assert status == 200
    trunk = replayed.trunks[BROKEN]
    # The newest 30 commits, newest first; only the firing job (the macOS job's break is
    # older than the rows).
    assert [c["sha"] for c in grid["commits"]] == [trunk.sha(i) for i in range(48, 18, -1)]
    assert [c["sha"] for c in grid["commits"] if c["culprit"]] == [trunk.sha(40)]
    (job,) = grid["jobs"]
    assert (job["job"], job["firing"]) == (BROKEN_JOB, True)
    states = [cell["state"] for cell in job["cells"]]
    assert states == ["failure"] * 9 + ["success"] * 21
    assert [i for i, cell in enumerate(job["cells"]) if cell["culprit"]] == [8]  # commit 40
    # Each cell links to its job's run on that commit (the shard that decided it).
    assert job["cells"][0]["url"] == "https://github.com/pytorch/pytorch/actions/runs/49/job/3"


def test_a_fixed_break_stays_in_the_grid_with_its_culprit(replayed: Trunks) -> None:
    _, grid = get(replayed, "/api/v2/trunks/grid", FIXED)
    (job,) = grid["jobs"]
    assert (job["job"], job["firing"]) == (BROKEN_JOB, False)
    failed = [grid["commits"][i]["sha"] for i, cell in enumerate(job["cells"]) if cell["state"] == "failure"]
    assert failed == [replayed.trunks[FIXED].sha(i) for i in range(25, 19, -1)]
    assert [c["sha"] for c in grid["commits"] if c["culprit"]] == [replayed.trunks[FIXED].sha(20)]
    _, quiet = get(replayed, "/api/v2/trunks/grid", QUIET)
    assert quiet["jobs"] == [] and len(quiet["commits"]) == 30


@pytest.mark.parametrize("path", ["/api/v2/trunks/grid", "/api/v2/trunks/history"])
def test_a_bad_trunk_id_is_a_clear_error(replayed: Trunks, path: str) -> None:
    for unknown in ("pytorch/pytorch", "pytorch/pytorch#nope", "", "../../etc#passwd"):
        status, body = get(replayed, path, unknown)
        assert (status, body) == (
            404,
            {"error": f"no trunk {unknown!r} is configured (GET /api/v2/trunks lists them)"},
        )
    status, body = get(replayed, path)
    assert status == 400 and "trunk" in body["error"]
