"""`trunkwatch replay` on every scenario publishes exactly the expected messages.

The project's own scenarios live in tests/scenarios; a `shared/scenarios` folder beside the
checkout, when present, is replayed too (never required)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.support.paths import ROOT
from tests.support.scenarios import REAL_HISTORY, SCENARIOS, expected_messages, published_row, summary

BESIDE = ROOT.parent / "shared" / "scenarios"


def _scenarios(folder: Path) -> list[Path]:
    return sorted(p for p in folder.glob("*.jsonl") if not p.name.endswith(".expected.jsonl"))


FILES = _scenarios(SCENARIOS) + [
    p for p in _scenarios(BESIDE) if p.name not in {f.name for f in _scenarios(SCENARIOS)}
]


def test_the_projects_own_scenarios_are_present() -> None:
    assert len(_scenarios(SCENARIOS)) >= 4, f"replay scenarios missing from {SCENARIOS}"


def replay_json(scenario: Path, *options: str) -> list[dict[str, Any]]:
    """`trunkwatch replay --json` on a scenario file: its published messages."""
    run = subprocess.run(
        [sys.executable, "-m", "trunkwatch_local.cli", "replay", str(scenario), "--json", *options],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    return [json.loads(line) for line in run.stdout.splitlines()]


@pytest.mark.parametrize("scenario", FILES, ids=[f"{p.parent.parent.name}/{p.stem}" for p in FILES])
def test_replay_matches_expected(scenario: Path) -> None:
    published = []
    for message in replay_json(scenario):
        assert set(message) == {"at", "subject", "attributes", "message", "email"}
        annotations = message["message"]["alerts"][0]["annotations"]
        assert all(value != "" for value in annotations.values()), annotations
        assert message["email"].startswith(("FIRING: ", "RESOLVED: "))
        assert message["attributes"]["fingerprint"] in message["email"]
        assert message["attributes"]["fingerprint"] == message["message"]["alerts"][0]["fingerprint"]
        assert len(message["subject"]) <= 100 and "\n" not in message["subject"]
        published.append(published_row(message))
    expected = expected_messages(scenario)
    # Messages of the same `at` may come in any order; nothing missing, nothing extra.
    assert Counter(map(summary, published)) == Counter(map(summary, expected))
    assert [p["at"] for p in published] == sorted(p["at"] for p in published)


def test_an_autoreverted_culprit_is_named_in_its_alert(tmp_path: Path) -> None:
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
        for message in replay_json(scenario)
        for alert in message["message"]["alerts"]
        if alert["labels"]["alertname"] == "TrunkJobFailing"
    ]
    assert [a["status"] for a in job_alerts] == ["firing", "resolved"]
    for alert in job_alerts:
        assert alert["annotations"]["culprit_pr"] == "160004"
        assert alert["annotations"]["culprit_autoreverted_by"] == "autorevert (pull)"
        assert "Already reverted: autorevert (pull)" in alert["annotations"]["description"]


def test_a_real_trunks_history_replays_to_exactly_its_messages() -> None:
    """The first 112 polls of a real trunk (gzipped): tools broken for days, breaking
    again, and a TrunkBroken that resolves while due a reminder."""
    published = replay_json(REAL_HISTORY)
    expected = expected_messages(REAL_HISTORY)
    got = [summary(published_row(message)) for message in published]
    assert len(expected) == 152
    assert Counter(got) == Counter(map(summary, expected))
    assert [p["at"] for p in published] == sorted(p["at"] for p in published)


MEMORY_FILES = [*_scenarios(SCENARIOS), REAL_HISTORY]


@pytest.mark.parametrize("scenario", MEMORY_FILES, ids=[p.name.split(".jsonl")[0] for p in MEMORY_FILES])
def test_a_replay_on_the_memory_store_publishes_the_expected_messages(scenario: Path) -> None:
    """`--store memory`: the same handlers on the in-memory store, its cells' and ticks'
    stream records pumped to the evaluator and notifier, publish what the moto replay does."""
    published = replay_json(scenario, "--store", "memory")
    expected = expected_messages(scenario)
    assert Counter(summary(published_row(m)) for m in published) == Counter(map(summary, expected))
    assert [p["at"] for p in published] == sorted(p["at"] for p in published)
    assert all(m["email"].startswith(("FIRING: ", "RESOLVED: ")) for m in published)
