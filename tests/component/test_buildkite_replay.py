"""Buildkite replays: the project's scenarios turned into Buildkite form (one build per commit
on main, each HUD cell a job of the same name, a retried-green cell a failed job retried
into a passing one, a HUD outage a Buildkite one: `tests/support/buildkite.py`) publish
exactly what their HUD form does, read by the `buildkite` source from the Buildkite stand-in
(on the in-memory store); with `confirm: rerun`, culprits confirmed by job retries through
the stand-in's retry endpoint, with the verdicts GitHub reruns give the HUD form."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.support.buildkite import buildkite_replay
from tests.support.scenarios import SCENARIOS, assert_publishes_expected
from trunkwatch_local.replay import ReplayError, parse_replay, read_replay
from trunkwatch_local.session import run_replay

SIBLING_BASIS = re.compile(r" confirm broke (the same test|in another configuration)$")


def _confirms(path: Path) -> bool:
    header = json.loads(path.read_text().splitlines()[0])
    return (header.get("config") or {}).get("confirm") == "rerun"


SCENARIO_FILES = [p for p in sorted(SCENARIOS.glob("*.jsonl")) if not p.name.endswith(".expected.jsonl")]


def test_the_scenarios_have_a_buildkite_form_with_and_without_confirmation() -> None:
    assert len(SCENARIO_FILES) >= 9
    assert sum(map(_confirms, SCENARIO_FILES)) >= 2
    assert any("hud_status" in p.read_text() for p in SCENARIO_FILES)


def _verdicts(published: list[dict[str, Any]]) -> list[tuple[str, str, str | None, dict[str, str]]]:
    """Each message's time, status, job and what it says of the culprit (verdict included)."""
    said = []
    for message in published:
        if message["message"].get("kind") == "digest":
            continue  # the day's digest: no alert
        alert = message["message"]["alerts"][0]
        culprit = {k: v for k, v in alert["annotations"].items() if k.startswith("culprit")}
        if "culprit_verdict_reason" in culprit:  # a sibling is named by lines or by configuration
            culprit["culprit_verdict_reason"] = SIBLING_BASIS.sub("", culprit["culprit_verdict_reason"])
        said.append((message["at"], message["message"]["status"], alert["labels"].get("job"), culprit))
    return sorted(said, key=lambda row: (row[0], row[1], row[2] or ""))


@pytest.mark.parametrize("scenario", SCENARIO_FILES, ids=[p.stem for p in SCENARIO_FILES])
def test_a_scenario_in_buildkite_form_publishes_what_its_hud_form_does(
    scenario: Path, tmp_path: Path
) -> None:
    converted = tmp_path / scenario.name
    converted.write_text("\n".join(buildkite_replay(scenario.read_text().splitlines())) + "\n")
    shutil.copy(scenario.with_name(scenario.stem + ".expected.jsonl"), tmp_path)
    replay = read_replay(converted)
    assert replay.source == "buildkite" and {e.kind for e in replay.events} >= {"buildkite"}
    assert not {e.kind for e in replay.events} & {"hud", "hud_status"}
    published = [m.as_json() for m in run_replay(replay, store="memory")]
    assert_publishes_expected(converted, published)
    if _confirms(scenario):  # the verdicts by job retries are those by GitHub reruns
        hud_form = [m.as_json() for m in run_replay(read_replay(scenario), store="memory")]
        assert _verdicts(published) == _verdicts(hud_form)


def test_a_buildkite_line_the_source_would_refuse_is_the_files_error() -> None:
    header = json.dumps({"repo": "acme/engine", "source": "buildkite", "pipeline": "acme/ci"})
    bad = json.dumps({"at": "2026-06-01T10:00:00Z", "buildkite": [{"number": 1, "commit": "abc"}]})
    with pytest.raises(ReplayError, match=r"^replay:2: 'buildkite' is not a valid builds listing: .*state"):
        parse_replay([header, bad])


def test_a_hud_line_in_a_buildkite_file_is_refused() -> None:
    header = json.dumps({"repo": "acme/engine", "source": "buildkite", "pipeline": "acme/ci"})
    hud = json.dumps({"at": "2026-06-01T10:00:00Z", "hud": {"jobNames": [], "shaGrid": []}})
    with pytest.raises(
        ReplayError, match=r"^replay:2: a 'hud' event needs \"source\": \"hud\" in the header"
    ):
        parse_replay([header, hud])


def test_a_buildkite_file_without_its_pipeline_is_refused() -> None:
    header = json.dumps({"repo": "acme/engine", "source": "buildkite"})
    with pytest.raises(ReplayError, match=r"^replay:1: .*pipeline: Field required for source 'buildkite'"):
        parse_replay([header])


def test_a_buildkite_outage_line_needs_a_status_code_and_a_buildkite_file() -> None:
    header = json.dumps({"repo": "acme/engine", "source": "buildkite", "pipeline": "acme/ci"})
    bad = json.dumps({"at": "2026-06-01T10:00:00Z", "buildkite_status": "down"})
    with pytest.raises(ReplayError, match=r"^replay:2: 'buildkite_status' must be an HTTP status code"):
        parse_replay([header, bad])
    outage = json.dumps({"at": "2026-06-01T10:00:00Z", "buildkite_status": 503})
    with pytest.raises(
        ReplayError, match=r"^replay:2: a 'buildkite_status' event needs \"source\": \"buildkite\""
    ):
        parse_replay([json.dumps({"repo": "acme/engine"}), outage])
