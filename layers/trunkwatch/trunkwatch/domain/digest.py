"""The daily digest (design.md §4.4): one report per trunk and UTC day, never a page (pure).

A day's digest tells the breakages fixed before anyone was paged that were first recorded
that day (design.md §3.7), one entry per breakage however many of its jobs failed, beside
the day's pages, the culprit verdicts of the job episodes it saw and the hours the trunk was
broken. It is due from `digest_hour` o'clock UTC the next day (`due_days`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from trunkwatch.domain.alerts import CommitSummary
from trunkwatch.domain.cells import line_ids
from trunkwatch.domain.clock import format_time
from trunkwatch.domain.history import JobEpisode, trunk_episodes

KIND = "digest"  # the body's `kind`, and the SNS message attribute telling it from alerts
VERSION = "1"
# A digest overdue longer than this (the notifier down for days) is not sent any more: the
# newest days' are.
CATCH_UP_DAYS = 7
DAY = timedelta(days=1)


def latest_due(now: datetime, hour: int) -> date:
    """The newest day whose digest is due at `now`: a day's is due from `hour` o'clock UTC
    the next day."""
    return (now.astimezone(UTC) - timedelta(hours=hour)).date() - DAY


def due_days(last_day: date, now: datetime, hour: int) -> list[date]:
    """The days after `last_day` (the last one a receiver was sent, or the day before its
    first) whose digest is due at `now`, oldest first, at most CATCH_UP_DAYS."""
    latest = latest_due(now, hour)
    first = max(last_day + DAY, latest - (CATCH_UP_DAYS - 1) * DAY)
    return [first + n * DAY for n in range((latest - first).days + 1)]


def day_start(day: date) -> datetime:
    return datetime.combine(day, time(), UTC)


@dataclass(frozen=True)
class FixedJob:
    """One job's breakage fixed before it could page, as recorded (design.md §3.7)."""

    job: str
    culprit: CommitSummary
    culprit_seq: int
    fix_sha: str
    fix_time: datetime
    fix_seq: int
    failed_commits: int
    detected_at: datetime
    last_pass_seq: int | None = None  # None: the run's start is not bounded by a pass
    failure_lines: frozenset[str] = frozenset()


@dataclass(frozen=True)
class FixedBreakage:
    """A breakage fixed before anyone was paged: its culprit, the first commit that passed
    after it, the jobs it broke, how many commits failed (on the job that failed most)."""

    culprit: CommitSummary
    fix_sha: str
    fix_time: datetime
    jobs: tuple[str, ...]
    failed_commits: int
    detected_at: datetime  # when its first job was recorded

    @property
    def broken_for(self) -> timedelta:
        """From the culprit's commit to the fix's."""
        return max(self.fix_time - self.culprit.time, timedelta(0))

    def as_data(self) -> dict[str, Any]:
        culprit = self.culprit
        return {
            "culprit_sha": culprit.sha,
            "fix_sha": self.fix_sha,
            "jobs": list(self.jobs),
            "failed_commits": self.failed_commits,
            "culprit_pr": culprit.pr,
            "culprit_title": culprit.title,
            "culprit_author": culprit.author,
            "culprit_time": format_time(culprit.time),
            "fix_time": format_time(self.fix_time),
            "broken_for_seconds": self.broken_for.total_seconds(),
        }


def fixed_breakages(fixed: Iterable[FixedJob], pages: Sequence[JobEpisode]) -> list[FixedBreakage]:
    """The jobs' records as breakages, by culprit: a record whose range (its last pass, its
    culprit] holds another record's culprit, sharing a failure line where both have lines,
    is that breakage's (a job that did not run on the breaking commit), as is one whose
    last pass ended an older run of its job failing its line (`_breaker`). A breakage one of
    whose records a job alert's episode (`pages`) paged, through another job, is left out
    (`_paged`). Oldest culprit first."""
    records = sorted(fixed, key=lambda f: (f.culprit_seq, f.job))
    groups: dict[int, list[FixedJob]] = {}
    for record in records:
        groups.setdefault(_breaker(record, records), []).append(record)
    found = []
    for seq, members in sorted(groups.items()):
        if any(_paged(member, pages) for member in members):
            continue
        culprit = next(member for member in records if member.culprit_seq == seq)
        # Each job's last run ends where it was fixed; the breakage, with its first job fixed.
        last_runs = {member.job: member for member in sorted(members, key=lambda member: member.fix_seq)}
        fix = min(last_runs.values(), key=lambda member: member.fix_seq)
        found.append(
            FixedBreakage(
                culprit=culprit.culprit,
                fix_sha=fix.fix_sha,
                fix_time=fix.fix_time,
                jobs=tuple(sorted({member.job for member in members})),
                failed_commits=max(member.failed_commits for member in members),
                detected_at=min(member.detected_at for member in members),
            )
        )
    return found


def _breaker(record: FixedJob, records: Sequence[FixedJob]) -> int:
    """The culprit seq of the breakage `record` belongs to: that of the job's run its last
    pass ended, failing the same line (one breakage, seen to pass on a commit where the
    failing shard did not run); else the oldest other culprit inside its range that shares
    a failure line with it; else its own."""
    if record.last_pass_seq is None:
        return record.culprit_seq
    low = record.last_pass_seq
    for before in records:
        if before.job == record.job and before.fix_seq == low and record.failure_lines & before.failure_lines:
            return _breaker(before, records)
    inside = [
        other.culprit_seq
        for other in records
        if low < other.culprit_seq < record.culprit_seq
        and (
            not record.failure_lines or not other.failure_lines or record.failure_lines & other.failure_lines
        )
    ]
    return min(inside, default=record.culprit_seq)


def _paged(record: FixedJob, pages: Sequence[JobEpisode]) -> bool:
    """Whether a job alert paged the record's breakage: one that named a commit of its range
    as culprit, or one open while it failed whose failures shared a line with it: the same
    breakage, seen through a pass of a shard that does not run the failing test, or the
    same failure of a dependency or a runner, which paged as such."""
    low = record.last_pass_seq if record.last_pass_seq is not None else record.culprit_seq - 1
    return any(
        (page.culprit_seq is not None and low < page.culprit_seq <= record.culprit_seq)
        or (
            line_ids(record.failure_lines) & page.failure_line_ids
            and page.starts_at <= record.detected_at
            and (page.ends_at is None or page.ends_at >= record.culprit.time)
        )
        for page in pages
    )


@dataclass(frozen=True)
class DigestPage:
    """A page of the day: the trunk-level alert starting to fire, with the jobs failing then
    and their culprits."""

    at: datetime
    alertname: str
    jobs: tuple[tuple[str, str], ...]  # (job, culprit sha)

    def as_data(self) -> dict[str, Any]:
        return {
            "at": format_time(self.at),
            "alertname": self.alertname,
            "jobs": [{"job": job, "culprit_sha": sha} for job, sha in self.jobs],
        }


@dataclass(frozen=True)
class DigestVerdict:
    """The culprit verdict of a job episode the day saw (confirm: rerun)."""

    job: str
    culprit_sha: str
    verdict: str
    starts_at: datetime

    def as_data(self) -> dict[str, Any]:
        return {
            "job": self.job,
            "culprit_sha": self.culprit_sha,
            "verdict": self.verdict,
            "startsAt": format_time(self.starts_at),
        }


@dataclass(frozen=True)
class Digest:
    repo: str
    branch: str
    day: date
    fixed_before_page: tuple[FixedBreakage, ...]
    pages: tuple[DigestPage, ...]
    verdicts: tuple[DigestVerdict, ...]
    hours_broken: float

    @property
    def trunk(self) -> str:
        return f"{self.repo}#{self.branch}"

    def body(self, receiver: str, external_url: str) -> dict[str, Any]:
        """The JSON every receiver but email gets (the SNS message's `default`)."""
        return {
            "kind": KIND,
            "version": VERSION,
            "receiver": receiver,
            "trunk": self.trunk,
            "repo": self.repo,
            "branch": self.branch,
            "day": self.day.isoformat(),
            "externalURL": external_url,
            "fixed_before_page": [breakage.as_data() for breakage in self.fixed_before_page],
            "pages": [page.as_data() for page in self.pages],
            "verdicts": [verdict.as_data() for verdict in self.verdicts],
            "hours_broken": self.hours_broken,
        }


def daily_digest(
    repo: str,
    branch: str,
    day: date,
    fixed: Sequence[FixedJob],
    episodes: Sequence[JobEpisode],
    alertname: Callable[[int], str | None],
    now: datetime,
) -> Digest:
    """The digest of `day` at `now`: the breakages fixed before a page first recorded that
    day (none a job alert paged, §3.7), the trunk's pages that day (`alertname(failing
    jobs)` names the trunk-level alert, as in `history`), the verdicts of the job episodes
    open during it, and the hours it was broken."""
    start = day_start(day)
    end = start + DAY
    breakages = [b for b in fixed_breakages(fixed, episodes) if start <= b.detected_at < end]
    broken = timedelta(0)
    pages: list[DigestPage] = []
    for episode in trunk_episodes(episodes, now, alertname):
        until = episode.ends_at or now
        broken += max(min(until, end, now) - max(episode.starts_at, start), timedelta(0))
        for at in episode.pages:
            if start <= at < end:
                jobs = tuple(
                    (job.job, job.culprit)
                    for job in episode.jobs
                    if job.starts_at <= at and (job.ends_at is None or at < job.ends_at)
                )
                pages.append(DigestPage(at, alertname(len(jobs)) or "", jobs))
    verdicts = tuple(
        DigestVerdict(e.job, e.culprit, e.verdict, e.starts_at)
        for e in sorted(episodes, key=lambda e: (e.starts_at, e.job))
        if e.verdict and e.starts_at < end and (e.ends_at is None or e.ends_at >= start)
    )
    return Digest(
        repo=repo,
        branch=branch,
        day=day,
        fixed_before_page=tuple(breakages),
        pages=tuple(pages),
        verdicts=verdicts,
        hours_broken=round(broken / timedelta(hours=1), 2),
    )
