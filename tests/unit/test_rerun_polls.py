"""When a replay polls between its snapshots for reruns (trunkwatch_local/session.py)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from trunkwatch.app.confirm import MAX_TRIES
from trunkwatch.domain.reruns import RerunRecord
from trunkwatch_local.session import next_rerun_poll

NOW = datetime(2026, 11, 18, 20, 0, tzinfo=UTC)
MINUTE = timedelta(minutes=1)
PLANNED = RerunRecord(
    job="pull / test (default, linux.2xlarge)",
    episode=NOW - timedelta(hours=1),
    role="last_pass",
    sha="a" * 40,
    culprit_sha="c" * 40,
    last_pass_sha="a" * 40,
    planned_at=NOW,
)


def test_nothing_planned_or_running_polls_nothing_extra() -> None:
    assert next_rerun_poll(NOW, MINUTE, [], []) is None
    # A rerun over already (its result was seen at that poll) and one tried at an earlier poll
    # whose commit was not on the page (the next page may show it) want no poll either.
    assert next_rerun_poll(NOW, MINUTE, [replace(PLANNED, planned_at=NOW - MINUTE)], [NOW]) is None


def test_a_rerun_planned_now_is_sent_at_the_next_tick() -> None:
    assert next_rerun_poll(NOW, MINUTE, [PLANNED], [NOW + timedelta(minutes=30)]) == NOW + MINUTE


def test_a_refused_request_is_tried_at_each_tick_until_its_tries_are_used() -> None:
    refused = replace(PLANNED, planned_at=NOW - MINUTE, status="request_failed", tries=1)
    assert next_rerun_poll(NOW, MINUTE, [refused], []) == NOW + MINUTE
    assert next_rerun_poll(NOW, MINUTE, [replace(refused, tries=MAX_TRIES)], []) is None
    # One that could not be requested for want of a run (no try counted) waits for a new page.
    assert next_rerun_poll(NOW, MINUTE, [replace(refused, tries=0)], []) is None


def test_a_running_rerun_is_seen_at_the_first_tick_after_it_is_over() -> None:
    due = [NOW + timedelta(minutes=42, seconds=10), NOW + timedelta(minutes=30)]
    assert next_rerun_poll(NOW, MINUTE, [], due) == NOW + timedelta(minutes=30)
    assert next_rerun_poll(NOW, MINUTE, [], [NOW + timedelta(seconds=1)]) == NOW + MINUTE
    assert next_rerun_poll(NOW, timedelta(minutes=5), [], due[:1]) == NOW + timedelta(minutes=45)
    requested = replace(PLANNED, requested_at=NOW - MINUTE)
    assert next_rerun_poll(NOW, MINUTE, [requested], due[:1]) == NOW + timedelta(minutes=43)
