"""`trunkwatch replay` on every scenario publishes exactly the expected messages.

The project's own scenarios live in tests/scenarios and replay here on the in-memory store
(the default); on moto's table (`--store dynamodb`) they replay in test_install, with the
package installed as the README says (with those of a `shared/scenarios` folder beside the
checkout, when present)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.scenarios import REAL_HISTORY, SCENARIOS, assert_publishes_expected, scenario_files
from trunkwatch_local.cli import main


def test_the_projects_own_scenarios_are_present() -> None:
    assert len(scenario_files(SCENARIOS)) >= 4, f"replay scenarios missing from {SCENARIOS}"


def replay_json(scenario: Path, capsys: pytest.CaptureFixture[str]) -> list[dict[str, Any]]:
    """`trunkwatch replay --json` on a scenario file (the command's `main`, in this process:
    test_install runs the installed command): its published messages."""
    capsys.readouterr()
    status = main(["replay", str(scenario), "--json"])
    printed = capsys.readouterr()
    assert status == 0, printed.err[-2000:]
    return [json.loads(line) for line in printed.out.splitlines()]


def test_an_autoreverted_culprit_is_named_in_its_alert(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The HUD flags the culprit (#160004) as already reverted by PyTorch's autorevert."""
    lines = (SCENARIOS / "basic-break.jsonl").read_text().splitlines()
    events = [json.loads(line) for line in lines[1:]]
    for event in events:
        for row in event.get("hud", {}).get("shaGrid", []):
            if row.get("prNum") == 160004:
                row.update(isAutoreverted=True, autorevertWorkflows=["pull"])
    scenario = tmp_path / "autoreverted.jsonl"
    scenario.write_text("\n".join([lines[0], *(json.dumps(e) for e in events)]) + "\n")
    job_alerts = [
        alert
        for message in replay_json(scenario, capsys)
        for alert in message["message"]["alerts"]
        if alert["labels"]["alertname"] == "TrunkJobFailing"
    ]
    assert [a["status"] for a in job_alerts] == ["firing", "resolved"]
    for alert in job_alerts:
        assert alert["annotations"]["culprit_pr"] == "160004"
        assert alert["annotations"]["culprit_autoreverted_by"] == "autorevert (pull)"
        assert "Already reverted: autorevert (pull)" in alert["annotations"]["description"]


MEMORY_FILES = [*scenario_files(SCENARIOS), REAL_HISTORY]


@pytest.mark.parametrize("scenario", MEMORY_FILES, ids=[p.name.split(".jsonl")[0] for p in MEMORY_FILES])
def test_a_replay_on_the_memory_store_publishes_the_expected_messages(
    scenario: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The default store: the same handlers on the in-memory store, its cells' and ticks'
    stream records pumped to the evaluator and notifier, publish what the moto replay does
    (the real history: its 159 messages, 7 of them daily digests)."""
    published = replay_json(scenario, capsys)
    assert_publishes_expected(scenario, published)
    if scenario == REAL_HISTORY:
        assert len(published) == 159
