"""A trunk's history over a window of days, from its job alert episodes (pure).

The trunk is broken while at least one of its jobs' TrunkJobFailing episodes is open
(design.md §3.3: a trunk-level alert fires with the first failing job): overlapping job
episodes merge into one trunk episode, from the first culprit commit's time to the fix.
A page is the trunk-level alert starting to fire: at a trunk episode's start, and again
each time its name changes (TrunkBroken <-> TrunkBadlyBroken are two alerts).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta


@dataclass(frozen=True)
class JobEpisode:
    """One job's failing episode: what the trunk's history is made of."""

    job: str
    starts_at: datetime
    ends_at: datetime | None  # None: still failing
    culprit: str  # the culprit commit's sha
    culprit_seq: int | None = None  # its place on the branch
    verdict: str = ""  # the culprit's verdict (confirm: rerun)
    failure_line_ids: frozenset[str] = frozenset()  # its failure lines' (cells.line_ids)


@dataclass
class TrunkEpisode:
    """A stretch of time the trunk was broken: the union of overlapping job episodes."""

    starts_at: datetime
    ends_at: datetime | None
    jobs: list[JobEpisode] = field(default_factory=list)
    pages: list[datetime] = field(default_factory=list)

    @property
    def time_to_fix(self) -> timedelta | None:
        return None if self.ends_at is None else self.ends_at - self.starts_at


@dataclass(frozen=True)
class History:
    since: datetime
    until: datetime
    episodes: list[TrunkEpisode]
    hours_broken: list[tuple[date, float]]  # per UTC day of the window, oldest first
    pages_per_week: list[tuple[date, int]]  # per week (its Monday), oldest first
    median_time_to_fix: timedelta | None
    worst_time_to_fix: timedelta | None


def trunk_episodes(
    jobs: Iterable[JobEpisode], now: datetime, alertname: Callable[[int], str | None]
) -> list[TrunkEpisode]:
    """The trunk's episodes, oldest first; `alertname(failing jobs)` names the trunk-level
    alert for a count of failing jobs (None for none)."""
    # +1 at a start, -1 at an end. The alert is judged once per instant, after all of its
    # changes (jobs that fail from one commit page once, at the band they reach together),
    # and starts come before ends: a job that fires as another resolves keeps the trunk broken.
    events: list[tuple[datetime, int, JobEpisode]] = []
    for job in jobs:
        events.append((job.starts_at, 1, job))
        events.append((min(job.ends_at or now, now), -1, job))
    events.sort(key=lambda event: (event[0], -event[1]))
    episodes: list[TrunkEpisode] = []
    open_jobs = 0
    name: str | None = None
    for at, changes in itertools.groupby(events, key=lambda event: event[0]):
        for _, step, job in changes:
            if step > 0 and open_jobs == 0:
                episodes.append(TrunkEpisode(starts_at=at, ends_at=None))
            open_jobs += step
            if step > 0:
                episodes[-1].jobs.append(job)
        current = alertname(open_jobs)
        if current is not None and current != name:
            episodes[-1].pages.append(at)
        name = current
        if open_jobs == 0:
            episodes[-1].ends_at = at
    # What still fires at `now` stays open.
    for episode in episodes:
        if episode.ends_at == now and any(job.ends_at is None for job in episode.jobs):
            episode.ends_at = None
    return episodes


def history(
    jobs: Iterable[JobEpisode], now: datetime, days: int, alertname: Callable[[int], str | None]
) -> History:
    """The last `days` UTC days up to `now`: trunk episodes that overlap them, hours broken
    per day, pages per week, and the median and worst time to fix of the episodes that
    ended in the window."""
    first_day = now.date() - timedelta(days=days - 1)
    since = datetime.combine(first_day, time(), UTC)
    episodes = [e for e in trunk_episodes(jobs, now, alertname) if e.ends_at is None or e.ends_at >= since]
    hours = []
    for offset in range(days):
        day = first_day + timedelta(days=offset)
        start = datetime.combine(day, time(), UTC)
        end = min(start + timedelta(days=1), now)
        broken = sum((_overlap(e.starts_at, e.ends_at or now, start, end) for e in episodes), timedelta())
        hours.append((day, round(broken / timedelta(hours=1), 2)))
    monday = first_day - timedelta(days=first_day.weekday())
    weeks: dict[date, int] = {}
    while monday <= now.date():
        weeks[monday] = 0
        monday += timedelta(days=7)
    for episode in episodes:
        for page in episode.pages:
            if page >= since:
                weeks[page.date() - timedelta(days=page.weekday())] += 1
    fixes = sorted(e.time_to_fix for e in episodes if e.time_to_fix is not None)
    return History(
        since=since,
        until=now,
        episodes=episodes,
        hours_broken=hours,
        pages_per_week=sorted(weeks.items()),
        median_time_to_fix=_median(fixes),
        worst_time_to_fix=fixes[-1] if fixes else None,
    )


def _overlap(start: datetime, end: datetime, window_start: datetime, window_end: datetime) -> timedelta:
    return max(min(end, window_end) - max(start, window_start), timedelta())


def _median(values: list[timedelta]) -> timedelta | None:
    """Of sorted values (statistics.median is typed for numbers only)."""
    if not values:
        return None
    middle = len(values) // 2
    return values[middle] if len(values) % 2 else (values[middle - 1] + values[middle]) / 2
