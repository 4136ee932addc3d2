"""The scenarios under tests/scenarios, and moving one onto the real clock."""

from __future__ import annotations

import json
import re
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from tests.support.paths import TESTS
from trunkwatch.domain.clock import format_time, parse_time
from trunkwatch_local.runtime import SUMMARY_KEYS, expected_rows, is_digest, summary_row

SCENARIOS = TESTS / "scenarios"
REAL_HISTORY = TESTS / "real-history" / "rust-toolstate-2018-04-first-112-polls.jsonl.gz"

_TIMESTAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$")


def scenario_files(folder: Path) -> list[Path]:
    """The replay files of a folder of scenarios (not their `.expected.jsonl`)."""
    return sorted(p for p in folder.glob("*.jsonl") if not p.name.endswith(".expected.jsonl"))


def scenario_ending_now(scenario: Path, directory: Path, before: timedelta = timedelta(hours=1)) -> Path:
    """A copy of `scenario` with every timestamp moved by one offset, so that its last event is
    `before` the real clock: for tests that replay a scenario and then use what it left on the
    real clock (`serve --scenario`), whatever today's date is."""
    lines = [json.loads(line) for line in scenario.read_text().splitlines() if line.strip()]
    offset = datetime.now(UTC) - before - parse_time(lines[-1]["at"])

    def shifted(value: Any) -> Any:
        if isinstance(value, str) and _TIMESTAMP.match(value):
            return format_time(parse_time(value) + offset)
        if isinstance(value, dict):
            return {key: shifted(item) for key, item in value.items()}
        if isinstance(value, list):
            return [shifted(item) for item in value]
        return value

    directory.mkdir(parents=True, exist_ok=True)
    copy = directory / scenario.name
    copy.write_text("".join(json.dumps(shifted(line)) + "\n" for line in lines))
    return copy


def expected_messages(replay_file: Path) -> list[dict[str, Any]]:
    """The rows of the replay file's `<name>.expected.jsonl` (for `.jsonl` and `.jsonl.gz` alike)."""
    rows = expected_rows(replay_file)
    assert rows is not None, f"{replay_file.name} has no expected file"
    return rows


def published_row(message: dict[str, Any]) -> dict[str, Any]:
    """A published message (`trunkwatch replay --json`) as an expected row: when, status and
    labels, or a digest's trunk and day."""
    return summary_row(message)


def summary(row: dict[str, Any]) -> tuple[object, ...]:
    """What an expected row and a published one are compared by (a digest: when, and its day)."""
    return tuple(row.get(key) for key in SUMMARY_KEYS)


def assert_publishes_expected(replay_file: Path, published: list[dict[str, Any]]) -> None:
    """`trunkwatch replay --json`'s messages for `replay_file` are its expected ones, each a
    well-formed SNS message: nothing missing, nothing extra, in time order (messages of the
    same `at` in any order)."""
    for message in published:
        assert set(message) == {"at", "subject", "attributes", "message", "email"}
        assert len(message["subject"]) <= 100 and "\n" not in message["subject"]
        if is_digest(message):
            assert message["message"]["kind"] == "digest" and message["email"].startswith("Daily digest: ")
            assert message["subject"].startswith("[DIGEST] ") and "priority" not in message["attributes"]
            continue
        annotations = message["message"]["alerts"][0]["annotations"]
        assert all(value != "" for value in annotations.values()), annotations
        assert message["email"].startswith(("FIRING: ", "RESOLVED: "))
        assert message["attributes"]["fingerprint"] in message["email"]
        assert message["attributes"]["fingerprint"] == message["message"]["alerts"][0]["fingerprint"]
        assert len(message["subject"]) <= 100 and "\n" not in message["subject"]
    expected = Counter(map(summary, expected_messages(replay_file)))
    assert Counter(summary(published_row(m)) for m in published) == expected, replay_file.name
    assert [m["at"] for m in published] == sorted(m["at"] for m in published), replay_file.name
