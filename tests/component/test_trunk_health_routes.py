"""`GET /api/v2/trunks`, `/api/v2/trunks/grid` and `/api/v2/trunks/history` through the API
handler (API Gateway's proxy events), on three trunks replayed through the local pipeline
(tests/support/trunks.py): the overview broken first, the grids with their culprits, the
history from the stored episodes (after the cells and commits expired too), bad trunk ids."""

from __future__ import annotations

import json
import os
import urllib.parse
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.support.aws import table_items
from tests.support.trunks import BROKEN, BROKEN_JOB, FIXED, OTHER_JOB, QUIET, Trunks, three_trunks
from trunkwatch_local import apigw

START = datetime(2026, 11, 20, tzinfo=UTC)


@pytest.fixture(scope="module")
def replayed() -> Iterator[Trunks]:
    with three_trunks(START) as trunks:
        trunks.replay()
        yield trunks


def get(trunks: Trunks, path: str, trunk: str | None = None) -> tuple[int, Any]:
    query = urllib.parse.urlencode({"trunk": trunk}) if trunk is not None else ""
    response = trunks.runtime.invoke("api", apigw.proxy_event("GET", path, query=query))
    return response["statusCode"], json.loads(response["body"])


def at(hours: float) -> str:
    return (START + timedelta(hours=hours)).strftime("%Y-%m-%dT%H:%M:%S.000Z")


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


def test_history_from_the_episodes_outlives_the_cells(replayed: Trunks) -> None:
    status, before = get(replayed, "/api/v2/trunks/history", BROKEN)
    assert status == 200
    # The cells and commits expire (the rule's retention); the history is kept apart.
    client = replayed.runtime.dynamodb
    for kind in ("cell", "commit"):
        for item in table_items(kind):
            client.delete_item(TableName=os.environ["TABLE_NAME"], Key={"pk": item["pk"], "sk": item["sk"]})
    _, history = get(replayed, "/api/v2/trunks/history", BROKEN)
    assert history == before
    assert (history["since"], history["until"]) == ("2026-10-24T00:00:00.000Z", at(48 + 55 / 60))
    hours = {d["day"]: d["hours"] for d in history["hoursBrokenPerDay"]}
    assert len(hours) == 30
    # 08:00 (commit 8) to 14:55 (the poll that saw commit 14 pass); 16:00 (commit 40) on.
    broken_days = {day: h for day, h in hours.items() if h}
    assert broken_days == {"2026-11-20": 6.92, "2026-11-21": 8.0, "2026-11-22": 0.92}
    first, ongoing = history["episodes"]
    assert (first["start"], first["end"], first["timeToFixSeconds"]) == (at(8), at(14 + 55 / 60), 24900.0)
    assert [j["job"] for j in first["jobs"]] == [BROKEN_JOB, OTHER_JOB]
    assert (ongoing["start"], ongoing["end"], ongoing["timeToFixSeconds"]) == (at(40), None, None)
    assert ongoing["jobs"][0]["culprit"] == replayed.trunks[BROKEN].sha(40)
    assert history["pagesPerWeek"][-1] == {"week": "2026-11-16", "pages": 2}
    assert sum(w["pages"] for w in history["pagesPerWeek"]) == 2
    assert (history["medianTimeToFixSeconds"], history["worstTimeToFixSeconds"]) == (24900.0, 24900.0)
    # A break that spans midnight counts on both days.
    _, fixed = get(replayed, "/api/v2/trunks/history", FIXED)
    assert {d["day"]: d["hours"] for d in fixed["hoursBrokenPerDay"] if d["hours"]} == {
        "2026-11-20": 4.0,
        "2026-11-21": 2.92,
    }


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
