"""Trunk health as the status page shows it: every trunk with its health, a trunk's grid of
recent commits by failing jobs, and its history over the last HISTORY_DAYS days, with the
breakages fixed before anyone was paged apart from its pages (the API's `/api/v2/trunks`
routes return these as JSON). Read-only."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from trunkwatch.domain.alerts import FIRING, CommitSummary
from trunkwatch.domain.cells import ABSENT_CODE, CellState
from trunkwatch.domain.clock import format_time
from trunkwatch.domain.config import Deployment, TrunkConfig
from trunkwatch.domain.digest import FixedBreakage, FixedJob, fixed_breakages
from trunkwatch.domain.episodes import HISTORY_DAYS, Episode, FixedEpisode
from trunkwatch.domain.history import History, JobEpisode, history
from trunkwatch.domain.job_alerts import AlertCommit, JobAlert
from trunkwatch.domain.rule import source_down, trunk_alertname
from trunkwatch.storage.port import Storage

GRID_COMMITS = 30  # rows: the trunk's newest commits
GRID_JOBS = 25  # columns at most: firing jobs first
# The grid's cell states, by the stored cell state.
CELL_STATES = {
    CellState.FAIL: "failure",
    CellState.PASS: "success",
    CellState.PENDING: "pending",
    CellState.FLAKY: "flaky",
    CellState.NODATA: "nodata",
}
NO_DATA = CELL_STATES[CellState.NODATA]
# The overview's order: broken trunks first.
HEALTH_ORDER = ("badly broken", "broken", "source down", "healthy")


class UnknownTrunk(LookupError):
    """A trunk id that no configured trunk has."""

    def __init__(self, trunk_id: str) -> None:
        super().__init__(f"no trunk {trunk_id!r} is configured (GET /api/v2/trunks lists them)")


def configured(deployment: Deployment, trunk_id: str) -> TrunkConfig:
    trunk = deployment.trunk(trunk_id)
    if trunk is None:
        raise UnknownTrunk(trunk_id)
    return trunk


def _firing(storage: Storage, deployment: Deployment, trunk: TrunkConfig) -> list[JobAlert]:
    rule = deployment.rule_for(trunk)
    return [a for a in storage.alerts.of_trunk(trunk.trunk_id, firing_only=True) if rule.in_scope(a.job)]


def _commit(ref: AlertCommit) -> dict[str, Any]:
    return {
        "seq": ref.seq,
        "sha": ref.sha,
        "title": ref.title,
        "author": ref.author,
        "pr": ref.pr,
        "url": ref.url,
    }


def trunks(storage: Storage, deployment: Deployment, now: datetime) -> list[dict[str, Any]]:
    """Every configured trunk with its health, broken ones first."""
    shown = []
    for trunk in deployment.trunks:
        rule = deployment.rule_for(trunk)
        firing = sorted(_firing(storage, deployment, trunk), key=lambda a: a.starts_at)
        state = storage.trunks.state(trunk.trunk_id)
        alertname = trunk_alertname(len(firing), rule)
        if alertname is not None:
            health = "badly broken" if alertname == "TrunkBadlyBroken" else "broken"
        else:
            health = "source down" if source_down(state.polls_failing_since, now, rule) else "healthy"
        shown.append(
            {
                "trunk": trunk.trunk_id,
                "repo": trunk.repo,
                "branch": trunk.branch,
                "health": health,
                "alertname": alertname,
                "brokenSince": format_time(firing[0].starts_at) if firing else None,
                "failingJobs": [
                    {"job": a.job, "streak": a.streak, "culprit": _commit(a.culprit)} for a in firing
                ],
                "lastPollOk": format_time(state.last_poll_ok_at) if state.last_poll_ok_at else None,
                "rejectedNotifications": _rejected(storage, trunk),
            }
        )
    return sorted(shown, key=lambda t: (HEALTH_ORDER.index(t["health"]), t["trunk"]))


def _rejected(storage: Storage, trunk: TrunkConfig) -> list[dict[str, Any]]:
    """The messages a receiver refused for good (never retried), newest first: which alert's,
    which receiver, when, and what it answered."""
    rejections = sorted(storage.logs.rejected(trunk.trunk_id), key=lambda r: r.at, reverse=True)
    return [
        {
            "receiver": r.receiver,
            "alertname": r.alertname,
            "job": r.job,
            "fingerprint": r.fingerprint,
            "status": r.status,
            "reason": r.reason,
            "at": format_time(r.at),
            "answer": r.answer,
        }
        for r in rejections
    ]


@dataclass(frozen=True)
class _Column:
    job: str
    firing: bool
    culprit_seq: int | None


def _columns(
    storage: Storage,
    deployment: Deployment,
    trunk: TrunkConfig,
    codes: dict[str, str],
    oldest: datetime | None,
) -> list[_Column]:
    """The grid's jobs: those firing, those whose alert resolved since the oldest row, and
    those with a failure in the rows; firing first, then by name."""
    rule = deployment.rule_for(trunk)
    alerts = {a.job: a for a in storage.alerts.of_trunk(trunk.trunk_id) if rule.in_scope(a.job)}
    recent = {job for job, alert in alerts.items() if alert.status == FIRING or _ended_since(alert, oldest)}
    failed = {job for job, states in codes.items() if CellState.FAIL.code in states and rule.in_scope(job)}
    columns = [
        _Column(
            job,
            job in alerts and alerts[job].status == FIRING,
            alerts[job].culprit.seq if job in alerts and job in recent else None,
        )
        for job in recent | failed
    ]
    return sorted(columns, key=lambda c: (not c.firing, c.job))[:GRID_JOBS]


def _ended_since(alert: JobAlert, oldest: datetime | None) -> bool:
    return oldest is not None and alert.ends_at is not None and alert.ends_at >= oldest


def grid(storage: Storage, deployment: Deployment, trunk_id: str) -> dict[str, Any]:
    """The trunk's newest commits (newest first) by its failing and recently failing jobs;
    each cell with its state and job link, the culprit commit of each job alert marked."""
    trunk = configured(deployment, trunk_id)
    commits = storage.commits.newest(trunk_id, GRID_COMMITS)
    names = storage.trunks.job_names(trunk_id)
    # Each job's states down the rows, from the commits' state strings (one code per column).
    codes = {
        name: "".join(c.states[column] if column < len(c.states) else ABSENT_CODE for c in commits)
        for column, name in enumerate(names)
    }
    oldest = commits[-1].commit.time if commits else None
    columns = _columns(storage, deployment, trunk, codes, oldest)
    seqs = {c.seq for c in commits}
    jobs = []
    for column in columns:
        cells = {
            cell.seq: cell
            for cell in storage.cells.newest_first(trunk_id, column.job, GRID_COMMITS, GRID_COMMITS)
            if cell.seq in seqs
        }
        row_cells = []
        for stored in commits:
            cell = cells.get(stored.seq)
            row_cells.append(
                {
                    "state": CELL_STATES[cell.state] if cell is not None else NO_DATA,
                    "url": cell.url if cell is not None else None,
                    "culprit": stored.seq == column.culprit_seq,
                }
            )
        jobs.append({"job": column.job, "firing": column.firing, "cells": row_cells})
    culprits = {c.culprit_seq for c in columns if c.culprit_seq is not None}
    return {
        "trunk": trunk_id,
        "repo": trunk.repo,
        "branch": trunk.branch,
        "commits": [
            {
                "seq": c.seq,
                "sha": c.commit.sha,
                "time": format_time(c.commit.time),
                "title": c.commit.title,
                "author": c.commit.author,
                "pr": c.commit.pr,
                "url": c.commit.url,
                "culprit": c.seq in culprits,
            }
            for c in commits
        ],
        "jobs": jobs,
    }


def _seconds(value: timedelta | None) -> float | None:
    return None if value is None else value.total_seconds()


def job_episode(episode: Episode, verdict: str | None = None) -> JobEpisode:
    """A stored job episode as the history and the digest read it (`verdict`: a newer one
    than it was stored with, its alert's while it fires)."""
    culprit = episode.culprit
    return JobEpisode(
        episode.job,
        episode.starts_at,
        episode.ends_at,
        culprit.sha,
        culprit.seq,
        verdict or episode.verdict or "",
        frozenset(episode.failure_line_ids),
    )


def fixed_job(record: FixedEpisode) -> FixedJob:
    """A stored breakage fixed before a page as the history and the digest read it."""
    culprit = record.culprit
    return FixedJob(
        job=record.job,
        culprit=CommitSummary(culprit.sha, culprit.title, culprit.pr, culprit.author, culprit.time),
        culprit_seq=culprit.seq,
        fix_sha=record.fix.sha,
        fix_time=record.fix.time,
        fix_seq=record.fix.seq,
        failed_commits=record.failed_commits,
        detected_at=record.detected_at,
        last_pass_seq=record.last_pass.seq if record.last_pass is not None else None,
        failure_lines=frozenset(record.failure_lines),
    )


def trunk_history(storage: Storage, deployment: Deployment, trunk_id: str, now: datetime) -> dict[str, Any]:
    """The trunk's last HISTORY_DAYS days, from its stored job episodes, and apart from them
    the breakages fixed before a page first recorded in that window."""
    trunk = configured(deployment, trunk_id)
    rule = deployment.rule_for(trunk)
    since = now - timedelta(days=HISTORY_DAYS)
    episodes = [job_episode(e) for e in storage.alerts.episodes(trunk_id, since) if rule.in_scope(e.job)]
    drawn: History = history(episodes, now, HISTORY_DAYS, lambda failing: trunk_alertname(failing, rule))
    fixed = fixed_breakages(
        [fixed_job(record) for record in storage.alerts.fixed(trunk_id) if rule.in_scope(record.job)],
        episodes,
    )
    return {
        "trunk": trunk_id,
        "since": format_time(drawn.since),
        "until": format_time(drawn.until),
        "hoursBrokenPerDay": [{"day": day.isoformat(), "hours": hours} for day, hours in drawn.hours_broken],
        "pagesPerWeek": [{"week": week.isoformat(), "pages": pages} for week, pages in drawn.pages_per_week],
        "episodes": [
            {
                "start": format_time(e.starts_at),
                "end": format_time(e.ends_at) if e.ends_at else None,
                "timeToFixSeconds": _seconds(e.time_to_fix),
                "pages": len(e.pages),
                "jobs": [
                    {
                        "job": j.job,
                        "start": format_time(j.starts_at),
                        "end": format_time(j.ends_at) if j.ends_at else None,
                        "culprit": j.culprit,
                    }
                    for j in e.jobs
                ],
            }
            for e in drawn.episodes
        ],
        "medianTimeToFixSeconds": _seconds(drawn.median_time_to_fix),
        "worstTimeToFixSeconds": _seconds(drawn.worst_time_to_fix),
        "fixedBeforePage": [_fixed(breakage) for breakage in fixed if breakage.detected_at >= drawn.since],
    }


def _fixed(breakage: FixedBreakage) -> dict[str, Any]:
    culprit = breakage.culprit
    return {
        "culprit": {
            "sha": culprit.sha,
            "title": culprit.title,
            "pr": culprit.pr,
            "author": culprit.author,
            "time": format_time(culprit.time),
        },
        "fix": {"sha": breakage.fix_sha, "time": format_time(breakage.fix_time)},
        "jobs": list(breakage.jobs),
        "failedCommits": breakage.failed_commits,
        "brokenForSeconds": breakage.broken_for.total_seconds(),
        "detectedAt": format_time(breakage.detected_at),
    }
