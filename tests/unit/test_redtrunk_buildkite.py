"""A red trunk in Buildkite form (benchmarks/redtrunk_score.py `buildkite_form`, the converter of
tests/support/buildkite.py): every HUD snapshot a builds listing the Buildkite source reads,
each cell a job of its name with its result, retries and rerun data; build numbers scored as
their commits."""

import gzip
import json
from pathlib import Path
from typing import Any

from benchmarks.redtrunk import RedTrunk, paths
from benchmarks.redtrunk_score import CONFIRM, Page, Scorer, Truth, buildkite_form
from trunkwatch_local.replay import read_replay

TRUNK = RedTrunk(7, days=1)
TRUTH = Truth(TRUNK.truth())


def _lines(path: Path) -> list[dict[str, Any]]:
    with gzip.open(path, "rt", encoding="utf-8") as text:
        return [json.loads(line) for line in text]


def _converted(tmp_path: Path) -> tuple[Path, Path, dict[int, int]]:
    source, _ = paths(tmp_path, 7)
    TRUNK.write(source)
    target = tmp_path / "buildkite.jsonl.gz"
    return source, target, buildkite_form(source, target, TRUTH, CONFIRM)


def test_every_snapshot_is_a_builds_listing_the_buildkite_source_reads(tmp_path: Path) -> None:
    source, target, _ = _converted(tmp_path)
    replay = read_replay(target)  # every line checked against the source's shape
    assert (replay.source, replay.pipeline, replay.repo) == ("buildkite", "acme/ci", "pytorch/pytorch")
    assert replay.config == CONFIRM
    hud, buildkite = _lines(source)[1:], list(replay.events)
    assert [e.kind for e in buildkite] == ["buildkite"] * len(hud)
    assert [e.at.strftime("%Y-%m-%dT%H:%M:%SZ") for e in buildkite] == [line["at"] for line in hud]


def test_each_cell_is_a_job_with_its_result_retries_and_rerun(tmp_path: Path) -> None:
    source, target, numbers = _converted(tmp_path)
    hud, converted = _lines(source)[1:], _lines(target)[1:]
    seen = {"flaky": 0, "failed retry": 0, "rerun": 0}
    for snapshot, listing in zip(hud, converted, strict=True):
        grid = snapshot["hud"]
        builds = listing["buildkite"]
        assert [b["commit"] for b in builds] == [row["sha"] for row in grid["shaGrid"]]
        for row, build in zip(grid["shaGrid"], builds, strict=True):
            assert TRUTH.sha_index[row["sha"]] == numbers[build["number"]]
            for name, cell in zip(grid["jobNames"], row["jobs"], strict=True):
                jobs = [j for j in build["jobs"] if j["name"] == name]
                if not cell:
                    assert not jobs  # the job did not run
                    continue
                newest = jobs[-1]
                if cell["conclusion"] == "pending":
                    assert [j["state"] for j in jobs] == ["running"]
                    continue
                assert newest["state"] == {"success": "passed", "failure": "failed"}[cell["conclusion"]]
                assert (
                    newest["rerun"]["state"]
                    == {"success": "passed", "failure": "failed"}[cell["rerun"]["conclusion"]]
                )
                seen["rerun"] += 1
                if cell.get("failedPreviousRun"):
                    first, again = jobs
                    assert first["state"] == "failed" and first["retried"]
                    assert first["retried_in_job_id"] == again["id"] and not again["retried"]
                    seen["flaky" if again["state"] == "passed" else "failed retry"] += 1
                else:
                    assert len(jobs) == 1 and not newest["retried"]
    assert all(seen.values()), seen


def test_a_run_is_scored_on_the_commit_its_url_or_its_build_names(tmp_path: Path) -> None:
    _, _, numbers = _converted(tmp_path)
    scorer = Scorer(TRUTH, builds=numbers)
    number, index = next(iter(numbers.items()))
    retried = f"https://buildkite.com/acme/ci/builds/{number}#0190a2b4-2000-7000-8000-000000000009"
    page = Page(TRUNK.commits[0].time, "TrunkJobFailing", "job", {"failing_runs": retried})
    assert scorer.commits(page) == [index]
    assert scorer.run_commit(TRUNK.url(5, 3)) == 5
