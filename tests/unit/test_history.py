"""A trunk's history from its job episodes (domain/history.py)."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

from trunkwatch.domain.history import JobEpisode, history, trunk_episodes

T0 = datetime(2026, 11, 18, 22, 0, tzinfo=UTC)
HOUR = timedelta(hours=1)


def band(failing: int) -> str | None:
    """TrunkBroken for 1..2 failing jobs, TrunkBadlyBroken above (a band of 2)."""
    return None if failing == 0 else "TrunkBroken" if failing <= 2 else "TrunkBadlyBroken"


def job(name: str, start: float, end: float | None) -> JobEpisode:
    return JobEpisode(name, T0 + start * HOUR, T0 + end * HOUR if end is not None else None, f"sha-{name}")


def test_overlapping_job_episodes_are_one_trunk_episode() -> None:
    now = T0 + 10 * HOUR
    episodes = trunk_episodes([job("a", 0, 3), job("b", 2, 5), job("c", 6, None)], now, band)
    assert [(e.starts_at, e.ends_at, [j.job for j in e.jobs]) for e in episodes] == [
        (T0, T0 + 5 * HOUR, ["a", "b"]),
        (T0 + 6 * HOUR, None, ["c"]),
    ]
    assert [e.time_to_fix for e in episodes] == [5 * HOUR, None]


def test_a_job_failing_as_another_is_fixed_keeps_the_episode_and_a_band_change_pages_again() -> None:
    now = T0 + 10 * HOUR
    jobs = [job("a", 0, 1), job("b", 1, 4), job("c", 2, 3), job("d", 2, 3)]
    (episode,) = trunk_episodes(jobs, now, band)
    assert (episode.starts_at, episode.ends_at) == (T0, T0 + 4 * HOUR)
    # a fires (TrunkBroken); b takes over (no page); c and d together make it
    # TrunkBadlyBroken (one page), then back to TrunkBroken (another).
    assert episode.pages == [T0, T0 + 2 * HOUR, T0 + 3 * HOUR]


def test_jobs_failing_from_one_commit_page_once_at_their_band() -> None:
    (episode,) = trunk_episodes([job(name, 0, 2) for name in "abc"], T0 + 5 * HOUR, band)
    assert episode.pages == [T0]
    assert [j.job for j in episode.jobs] == ["a", "b", "c"]


def test_hours_per_day_split_at_midnight_and_times_to_fix() -> None:
    now = T0 + 30 * HOUR  # 2026-11-20 04:00
    drawn = history([job("a", 0, 4), job("b", 10, 12), job("c", 29, None)], now, 3, band)
    assert drawn.since == datetime(2026, 11, 18, tzinfo=UTC)
    days = [date(2026, 11, 18), date(2026, 11, 19), date(2026, 11, 20)]
    assert drawn.hours_broken == list(zip(days, [2.0, 4.0, 1.0], strict=True))
    assert drawn.pages_per_week == [(date(2026, 11, 16), 3)]
    assert (drawn.median_time_to_fix, drawn.worst_time_to_fix) == (3 * HOUR, 4 * HOUR)


def test_what_ended_before_the_window_is_left_out() -> None:
    now = T0 + 48 * HOUR
    drawn = history([job("a", 0, 1)], now, 1, band)
    assert drawn.episodes == [] and drawn.median_time_to_fix is None
    assert drawn.hours_broken == [(now.date(), 0.0)]
