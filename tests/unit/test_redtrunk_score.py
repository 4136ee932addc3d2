"""The redtrunk workload's scoring (benchmarks/redtrunk_score.py) on pages made by hand from a
small generated trunk's truth: what counts as a page, its kind, culprit and verdicts."""

import gzip
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from benchmarks.redtrunk import RedTrunk, paths
from benchmarks.redtrunk_score import Scorer, Truth, score, snapshot_times, verdict_scores, with_config
from trunkwatch.domain.cells import job_key

TRUNK = RedTrunk(7, days=7)
TRUTH = Truth(TRUNK.truth())  # what the scorer reads: the truth file's contents
DAY = RedTrunk(7, days=1)  # where a test writes the files: a week takes seconds to write


def _message(status: str, reason: str, at: datetime, job: str, **annotations: str) -> dict[str, Any]:
    return {
        "at": at.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "status": status,
        "reason": reason,
        "labels": {"alertname": "TrunkJobFailing", "job": job},
        "annotations": annotations,
    }


def _run(cause: str) -> tuple[int, list[int]]:
    """A column and three commits in a row whose cells fail with `cause` (prefix)."""
    for column in TRUNK.columns:
        for start in range(1, len(TRUNK.commits) - 3):
            results = [TRUNK.result(start + i, column.index) for i in range(3)]
            before = TRUNK.result(start - 1, column.index)
            if (
                before is not None
                and before.conclusion == "success"
                and all(r is not None and r.cause.startswith(cause) for r in results)
                and all(
                    TRUNK.result(start + i, other.index) is not None
                    for i in (-1, 0)
                    for other in TRUNK.columns
                    if job_key(other.name) == job_key(column.name)
                )
                and not any(  # its other shards pass: the page's runs are this column's
                    (r := TRUNK.result(start + i, other.index)) is not None and r.conclusion == "failure"
                    for i in range(3)
                    for other in TRUNK.columns
                    if job_key(other.name) == job_key(column.name) and other != column
                )
            ):
                return column.index, [start, start + 1, start + 2]
    raise AssertionError(f"no run of {cause}")


def _page(cause: str, culprit_offset: int = 0, url_names_column: bool = True) -> list[dict[str, Any]]:
    """A page of a run of `cause`; its failing runs' URLs name their column as the generator's
    do, or (`url_names_column` False) only their commit, as other generators' may."""
    column, commits = _run(cause)
    job = job_key(TRUNK.columns[column].name)
    finished = max(r.finish for c in commits if (r := TRUNK.result(c, column)) is not None)
    at = finished + timedelta(minutes=10)
    culprit = commits[0] + culprit_offset
    annotations = {
        "culprit_sha": TRUNK.commits[culprit].sha,
        "last_pass_sha": TRUNK.commits[commits[0] - 1].sha,
        "failing_runs": "\n".join(
            TRUNK.url(c, column) if url_names_column else TRUNK.url(c, 1) for c in reversed(commits)
        ),
        "failure_lines": "\n".join(TRUNK.result(commits[0], column).lines),  # type: ignore[union-attr]
    }
    return [
        _message("firing", "firing", at, job, **annotations),
        _message("firing", "reminder", at + timedelta(hours=4), job, **annotations),
        _message("resolved", "resolved", at + timedelta(hours=5), job),
    ]


def test_a_code_page_with_the_right_culprit() -> None:
    result = score(TRUTH, _page("code:"))
    assert result["job_pages"] == 1  # the reminder is not a page
    assert result["job_pages_by_kind"] == {"code": 1}
    assert result["precision_code"] == 1.0
    assert result["culprit_right"] == 1 and result["innocent_prs_named"] == 0
    assert result["delay_after_third_failure_s_p50"] == 600
    assert result["breaks_3plus_paged"] == 1


def test_the_wait_for_the_next_snapshot_is_scored_apart() -> None:
    messages = _page("code:")
    paged = datetime.strptime(messages[0]["at"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    third = paged - timedelta(minutes=10)
    polls = [third - timedelta(minutes=30), third + timedelta(minutes=4), paged]
    result = score(TRUTH, messages, polls)
    assert result["delay_after_third_failure_s_p50"] == 600
    assert result["delay_to_next_snapshot_s_p50"] == 240
    assert score(TRUTH, messages)["delay_to_next_snapshot_s_p50"] is None


def test_a_job_held_back_by_a_trunk_alert_is_heard_of_in_its_update() -> None:
    page = _page("code:")
    paged = datetime.strptime(page[0]["at"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    job, third = page[0]["labels"]["job"], paged - timedelta(minutes=10)
    line = f"- {job}: 3 commits, culprit {page[0]['annotations']['culprit_sha']} (#1)"
    update = {
        **_message("firing", "update", third + timedelta(minutes=2), job, description=line),
        "labels": {"alertname": "TrunkBadlyBroken"},
    }
    other = {**update, "annotations": {"description": "- another / job: 3 commits, culprit abcdef0 (#2)"}}
    result = score(TRUTH, [update, *page])
    assert result["delay_after_third_failure_s_p50"] == 600  # the job's own page
    assert result["delay_to_first_word_s_p50"] == 120  # the trunk alert's update listing it
    assert score(TRUTH, [other, *page])["delay_to_first_word_s_p50"] == 600


def test_a_code_page_blaming_a_later_commit_names_an_innocent() -> None:
    result = score(TRUTH, _page("code:", culprit_offset=1))
    assert result["culprit_right"] == 0
    assert result["innocent_prs_named"] == 1
    assert result["innocent_prs_named_by_kind"] == {"code (breaker in range)": 1}


def test_a_dependency_breakage_page_names_an_innocent() -> None:
    result = score(TRUTH, _page("external"))
    assert result["job_pages_by_kind"] == {"external": 1}
    assert result["precision_code"] == 0.0 and result["precision_any_breakage"] == 1.0
    assert result["innocent_prs_named_by_kind"] == {"external": 1}


def _with_verdicts(messages: list[dict[str, Any]], *verdicts: tuple[timedelta, str]) -> list[dict[str, Any]]:
    """The page's messages with `culprit_verdict`s: the page's own, then updates after it."""
    page, *rest = messages
    at = datetime.strptime(page["at"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    updates = [
        _message(
            "firing",
            f"update; {verdict}",
            at + after,
            page["labels"]["job"],
            **{**page["annotations"], "culprit_verdict": verdict},
        )
        for after, verdict in verdicts
    ]
    page["annotations"]["culprit_verdict"] = "unconfirmed"
    return [page, *updates, *rest]


def test_verdicts_of_the_confirmed_run_by_kind_now_and_3_hours_on() -> None:
    code = _with_verdicts(_page("code:"), (timedelta(hours=1), "confirmed"))
    external = _with_verdicts(_page("external"), (timedelta(hours=4), "environmental"))
    verdicts = verdict_scores(Scorer(TRUTH), code + external, [])
    assert verdicts["by_kind"] == {"code": {"confirmed": 1}, "external": {"environmental": 1}}
    assert verdicts["by_kind_at_3h"] == {
        "code": {"confirmed (right commit)": 1},
        "external": {"unconfirmed": 1},
    }
    assert verdicts["confirmed_right_at_3h_share"] == 1.0 and verdicts["environmental_at_3h_share"] == 0.0
    assert verdicts["innocent_prs_confirmed"] == 0 and verdicts["innocent_prs_unconfirmed"] == 1


def test_an_innocent_confirmed_and_the_reruns_of_an_episode_are_counted() -> None:
    messages = _with_verdicts(_page("code:", culprit_offset=1), (timedelta(hours=1), "confirmed"))
    at = messages[0]["at"]
    reruns = [{"at": at, "sha": "x", "job": messages[0]["labels"]["job"]}] * 2
    verdicts = verdict_scores(Scorer(TRUTH), messages, reruns)
    assert verdicts["innocent_prs_confirmed"] == 1
    # A code breakage still, whose page named a later commit: it counts against the share.
    assert verdicts["by_kind_at_3h"] == {"code (breaker in range)": {"confirmed": 1}}
    assert verdicts["confirmed_right_at_3h_share"] == 0.0
    assert verdicts["confirmed_right_at_3h_share_of_right_pages"] == 0.0
    assert verdicts["reruns"] == 2 and verdicts["reruns_per_episode_max"] == 2


def test_a_page_is_scored_from_its_commits_and_job_whatever_its_urls_column() -> None:
    assert score(TRUTH, _page("code:", url_names_column=False)) == score(TRUTH, _page("code:"))


def test_the_truth_file_round_trips(tmp_path: Path) -> None:
    replay, truth = paths(tmp_path, 7)
    DAY.write(replay, truth)
    loaded = Truth.load(truth)
    assert loaded.days == 1 and loaded.commits == len(DAY.commits)
    assert [(b.culprit, b.fix) for b in loaded.breaks] == [(b.culprit, b.fix) for b in DAY.breaks]
    column = DAY.columns[3]
    assert loaded.result(5, column.name) == Truth(DAY.truth()).result(5, column.name)
    assert loaded.result(5, column.name).cause == DAY.result(5, column.index).cause  # type: ignore[union-attr]


def test_a_file_that_is_no_truth_file_is_refused() -> None:
    with pytest.raises(ValueError, match="not a redtrunk truth file: no breaks, cells"):
        Truth({"days": 14})


def test_a_replay_is_copied_with_the_rule_config_asked_for(tmp_path: Path) -> None:
    source, target = tmp_path / "in.jsonl.gz", tmp_path / "out.jsonl.gz"
    DAY.write(source, config={"confirm": "rerun"})
    with_config(source, target, None)
    with gzip.open(source, "rt") as before, gzip.open(target, "rt") as after:
        assert json.loads(after.readline()) == {**json.loads(before.readline()), "config": {}}
        assert after.read() == before.read()


def test_a_file_without_a_replay_header_is_refused(tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl.gz"
    with gzip.open(source, "wt") as out:
        out.write('{"at": "2026-10-05T02:30:00Z"}\n')
    with pytest.raises(ValueError, match="not a replay file"):
        with_config(source, tmp_path / "out.jsonl.gz", None)


def _truth(finishes: dict[int, list[tuple[str, str, int]]]) -> Truth:
    """A hand-made truth: commit -> (column, cause, finished at minute) and one breakage,
    commit 1 broken by commit 1, fixed by commit 4."""
    start = datetime(2026, 11, 1, tzinfo=UTC)
    cells = {
        f"{commit:040x}": {
            "idx": commit,
            "causes": {
                column: [cause, (start + timedelta(minutes=at)).strftime("%Y-%m-%dT%H:%M:%SZ")]
                for column, cause, at in results
            },
        }
        for commit, results in finishes.items()
    }
    breaks = [{"culprit": 1, "fix": 4, "jobs": ["test (default, 1, 2, linux.2xlarge)"]}]
    return Truth({"days": 1, "breaks": breaks, "cells": cells})


SHARD, OTHER = "test (default, 1, 2, linux.2xlarge)", "test (default, 2, 2, linux.2xlarge)"


@pytest.mark.parametrize(
    ("fix_finishes_at", "visible"),
    [
        (100, True),  # the fix passes after the third failure: it was at the head before
        (25, False),  # the fix passed before the third failure finished: never 3 at the head
    ],
)
def test_a_breakage_is_at_the_head_only_if_its_failures_finish_before_the_fix_passes(
    fix_finishes_at: int, visible: bool
) -> None:
    truth = _truth(
        {
            0: [(SHARD, "pass", 0)],
            1: [(SHARD, "code:1", 10)],
            2: [(SHARD, "code:1", 20)],
            3: [(SHARD, "code:1", 30)],
            4: [(SHARD, "pass", fix_finishes_at)],
        }
    )
    assert truth.ever_at_head(truth.breaks[0], 3) is visible
    assert truth.ever_at_head(truth.breaks[0], 2) is True  # 1 and 2 were, before the fix passed


def test_a_failing_shard_fails_its_commit_while_another_runs_and_a_skipped_commit_is_skipped() -> None:
    truth = _truth(
        {
            0: [(SHARD, "pass", 0), (OTHER, "pass", 0)],
            1: [(SHARD, "code:1", 10), (OTHER, "pass", 90)],
            2: [(OTHER, "pass", 5)],  # the broken shard did not run: the job passes there
            3: [(SHARD, "code:1", 30), (OTHER, "pass", 95)],
        }
    )
    assert truth.ever_at_head(truth.breaks[0], 2) is False  # commit 2 passed first
    skipped = _truth({0: [(SHARD, "pass", 0)], 1: [(SHARD, "code:1", 10)], 3: [(SHARD, "code:1", 30)]})
    assert skipped.ever_at_head(skipped.breaks[0], 2) is True


def test_a_breakage_shows_at_a_poll_only_if_one_falls_while_it_is_at_the_head(tmp_path: Path) -> None:
    # 3 failures at the head from minute 30 until the fix passes at minute 100.
    truth = _truth(
        {
            0: [(SHARD, "pass", 0)],
            1: [(SHARD, "code:1", 10)],
            2: [(SHARD, "code:1", 20)],
            3: [(SHARD, "code:1", 30)],
            4: [(SHARD, "pass", 100)],
        }
    )
    start = datetime(2026, 11, 1, tzinfo=UTC)
    polls = [start + timedelta(minutes=m) for m in (0, 29, 120)]
    assert truth.ever_at_head(truth.breaks[0], 3, polls) is False  # between two polls
    assert truth.ever_at_head(truth.breaks[0], 3, [*polls, start + timedelta(minutes=60)]) is True
    replay = tmp_path / "trunk.jsonl.gz"
    with gzip.open(replay, "wt", encoding="utf-8") as out:
        out.write('{"repo": "pytorch/pytorch", "branch": "main"}\n')
        out.writelines(json.dumps({"at": f"2026-11-01T00:{m:02d}:00Z", "hud": {}}) + "\n" for m in (0, 29))
    assert snapshot_times(replay) == polls[:2]


def test_consecutive_failures_count_the_commits_a_job_ran_on() -> None:
    two = _truth({0: [(SHARD, "pass", 0)], 1: [(SHARD, "code:1", 10)], 2: [(SHARD, "code:1", 20)]})
    assert two.consecutive_failures(two.breaks[0]) == 2
    skipped = _truth({1: [(SHARD, "code:1", 10)], 3: [(SHARD, "code:1", 30)]})  # not run on 2
    assert skipped.consecutive_failures(skipped.breaks[0]) == 2
    apart = _truth(
        {1: [(SHARD, "code:1", 10)], 2: [(SHARD, "flaky-retried", 20)], 3: [(SHARD, "code:1", 30)]}
    )
    assert apart.consecutive_failures(apart.breaks[0]) == 1


def test_digests_are_scored_against_the_unpaged_breakages_of_two_commits() -> None:
    truth = _truth({0: [(SHARD, "pass", 0)], 1: [(SHARD, "code:1", 10)], 2: [(SHARD, "code:1", 20)]})
    culprit, innocent = f"{1:040x}", f"{0:040x}"

    def digest(*shas: str) -> dict[str, Any]:
        return {"day": "2026-11-01", "fixed_before_page": [{"culprit_sha": sha} for sha in shas]}

    told = score(truth, [], digests=[digest(culprit), digest(innocent)])["digest"]
    assert (told["breaks_2plus_unpaged"], told["breaks_2plus_unpaged_in_digest"]) == (1, 1)
    assert (told["entries_innocent"], told["entries_paged"], told["recall_unpaged_in_digest"]) == (1, 0, 1.0)
    assert told["innocent_per_week"] == 7.0  # one in a day
    missed = score(truth, [], digests=[])["digest"]
    assert missed["recall_unpaged_in_digest"] == 0.0 and [m["culprit"] for m in missed["unpaged_missed"]] == [
        1
    ]
    runs = "\n".join(f"https://github.com/pytorch/pytorch/actions/runs/{c}/job/7" for c in (2, 1))
    page = _message(
        "firing", "firing", datetime(2026, 11, 1, 1, tzinfo=UTC), job_key(SHARD), failing_runs=runs
    )
    paged = score(truth, [page], digests=[digest(culprit)])["digest"]
    assert (paged["breaks_2plus_unpaged"], paged["entries_paged"]) == (0, 1)
