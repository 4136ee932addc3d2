"""Buildkite replays: the project's scenarios turned into Buildkite form (one build per commit
on main, each HUD cell a job of the same name, a retried-green cell a failed job retried
into a passing one: `tests/support/buildkite.py`) publish exactly what their HUD form does,
read by the `buildkite` source from the Buildkite stand-in (on the in-memory store)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.support.buildkite import buildkite_replay
from tests.support.scenarios import SCENARIOS, assert_publishes_expected
from trunkwatch_local.replay import ReplayError, parse_replay, read_replay
from trunkwatch_local.session import run_replay


def _convertible(path: Path) -> bool:
    """A scenario the Buildkite form says the same of: HUD snapshots only (a scripted HUD
    outage has no Buildkite line), and no culprit confirmation (reruns go to GitHub)."""
    text = path.read_text()
    header = json.loads(text.splitlines()[0])
    return "hud_status" not in text and (header.get("config") or {}).get("confirm") != "rerun"


SCENARIO_FILES = [
    p for p in sorted(SCENARIOS.glob("*.jsonl")) if not p.name.endswith(".expected.jsonl") and _convertible(p)
]


def test_most_scenarios_have_a_buildkite_form() -> None:
    assert len(SCENARIO_FILES) >= 6


@pytest.mark.parametrize("scenario", SCENARIO_FILES, ids=[p.stem for p in SCENARIO_FILES])
def test_a_scenario_in_buildkite_form_publishes_what_its_hud_form_does(
    scenario: Path, tmp_path: Path
) -> None:
    converted = tmp_path / scenario.name
    converted.write_text("\n".join(buildkite_replay(scenario.read_text().splitlines())) + "\n")
    shutil.copy(scenario.with_name(scenario.stem + ".expected.jsonl"), tmp_path)
    replay = read_replay(converted)
    assert replay.source == "buildkite" and {e.kind for e in replay.events} >= {"buildkite"}
    published = [m.as_json() for m in run_replay(replay, store="memory")]
    assert_publishes_expected(converted, published)


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
