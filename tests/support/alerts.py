"""Alerts as the notifier sees them (AlertView), for the notification and trunk-gauge tests."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from trunkwatch.domain.alerts import Alert, AlertView, CommitSummary, FailingJob

NOW = datetime(2026, 11, 18, 20, 0, tzinfo=UTC)
HOUR = timedelta(hours=1)


def failing(
    streak: int = 3, title: str = "Make x faster", pr: int | None = 4242, author: str = "octocat"
) -> FailingJob:
    """A job of a trunk-level alert, failing since a culprit."""
    return FailingJob(streak, CommitSummary("0123456789abcdef0123", title, pr, author, NOW - 3 * HOUR))


def view(
    status: str = "firing",
    silenced: list[str] | None = None,
    inhibited: list[str] | None = None,
    jobs: dict[str, FailingJob] | None = None,
    summary: str = "pull / x failing",
    team: str = "ci-oncall",
    job: FailingJob | None = None,
) -> AlertView:
    """A TrunkJobFailing alert (failing as `job` says, when given); with `jobs`, the jobs of
    a trunk-level alert (its name set by the test)."""
    labels = {
        "alertname": "TrunkJobFailing",
        "repo": "pytorch/pytorch",
        "branch": "main",
        "priority": "P3",
        "team": team,
        "job": "pull / x",
        "workflow": "pull",
    }
    alert = Alert(
        labels,
        {"summary": summary, "culprit_sha": "abc"},
        starts_at=NOW - 2 * HOUR,
        ends_at=NOW if status == "resolved" else None,
        generator_url="https://hud/x",
        jobs=jobs or {},
        failing=job,
    )
    return AlertView(alert, "pytorch/pytorch#main", silenced or [], inhibited or [])
