"""`GET /api/v2/trunks/history` through the API handler on the three replayed trunks
(tests/support/trunks.py), their items in the table: the history comes from the stored
episodes, the breakages fixed before a page apart from them, and stays the same after the
cells and commits expired."""

from __future__ import annotations

import os

from tests.support.aws import table_items
from tests.support.trunks import BROKEN, BROKEN_JOB, FIXED, OTHER_JOB, START, Trunks, at, get, three_trunks


def test_history_from_the_episodes_outlives_the_cells() -> None:
    with three_trunks(START) as replayed:
        replayed.replay()
        _history_outlives_the_cells(replayed)


def _history_outlives_the_cells(replayed: Trunks) -> None:
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
    # The macOS job's two-commit breakage, fixed before a page: apart from the episodes and
    # the pages, which it is not.
    trunk = replayed.trunks[BROKEN]
    (unpaged,) = history["fixedBeforePage"]
    assert (unpaged["culprit"]["sha"], unpaged["fix"]["sha"], unpaged["jobs"], unpaged["failedCommits"]) == (
        trunk.sha(2),
        trunk.sha(4),
        [OTHER_JOB],
        2,
    )
    assert (unpaged["culprit"]["author"], unpaged["brokenForSeconds"]) == ("dev2", 7200.0)
    assert unpaged["detectedAt"] == at(4 + 55 / 60)  # the poll that saw commit 4 pass
    # A break that spans midnight counts on both days.
    _, fixed = get(replayed, "/api/v2/trunks/history", FIXED)
    assert {d["day"]: d["hours"] for d in fixed["hoursBrokenPerDay"] if d["hours"]} == {
        "2026-11-20": 4.0,
        "2026-11-21": 2.92,
    }
    assert fixed["fixedBeforePage"] == []
