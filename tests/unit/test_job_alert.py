"""A job alert (TrunkJobFailing) as the notifier builds it from the stored one: its streak,
culprit and verdict as fields (`Alert.failing`), which the receivers read, and its
annotations telling the same as text; a failing job kept in the notification log as data,
read back also as entries written before the links and the reason were kept."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from trunkwatch.app.views import job_alert
from trunkwatch.domain.alerts import Alert, CommitSummary, FailingJob, Links
from trunkwatch.domain.clock import format_time
from trunkwatch.domain.config import RuleConfig, TrunkConfig
from trunkwatch.domain.job_alerts import AlertCommit, JobAlert

NOW = datetime(2026, 11, 18, 20, 0, tzinfo=UTC)
SHA = "0123456789abcdef0123456789abcdef01234567"
COMMIT_URL = f"https://github.com/pytorch/pytorch/commit/{SHA}"
PR_URL = "https://github.com/pytorch/pytorch/pull/4242"
FIRST_FAIL = AlertCommit(12, SHA, NOW - timedelta(hours=3), "Make x faster", "octocat", 4242, COMMIT_URL)
NEWEST_FAIL = AlertCommit(14, "e" * 40, NOW - timedelta(hours=1), "Later", "monalisa", None, "")
LAST_PASS = AlertCommit(11, "a" * 40, NOW - timedelta(hours=4), "Before", "hubot", 4241, "")
CULPRIT = CommitSummary(SHA, "Make x faster", 4242, "octocat", NOW - timedelta(hours=3), COMMIT_URL, PR_URL)


def built(verdict: str | None = None, reason: str = "") -> Alert:
    item = JobAlert(
        job="pull / a",
        status="firing",
        starts_at=NOW - timedelta(hours=2),
        streak=3,
        first_fail=FIRST_FAIL,
        newest_fail=NEWEST_FAIL,
        last_pass=LAST_PASS,
        culprit_verdict=verdict,
        verdict_reason=reason,
    )
    return job_alert(item, TrunkConfig(repo="pytorch/pytorch"), RuleConfig(), Links("http://127.0.0.1:9093"))


def test_a_job_alert_carries_its_streak_culprit_and_verdict_as_its_annotations_tell_them() -> None:
    alert = built("confirmed", "3 of 3 reruns fail")
    assert alert.failing == FailingJob(3, CULPRIT, "confirmed", "3 of 3 reruns fail")
    notes = alert.annotations
    assert {name: notes[name] for name in notes if name.startswith(("culprit_", "streak"))} == {
        "streak": "3",
        "culprit_verdict": "confirmed",
        "culprit_verdict_reason": "3 of 3 reruns fail",
        "culprit_sha": SHA,
        "culprit_pr": "4242",
        "culprit_title": "Make x faster",
        "culprit_author": "octocat",
        "culprit_time": format_time(CULPRIT.time),
        "culprit_url": COMMIT_URL,
        "culprit_pr_url": PR_URL,
        "culprit_range": f"{'a' * 12}..{SHA[:12]}",
    }
    assert alert.authors == ("octocat",) and alert.jobs == {}


def test_without_confirmation_the_job_alert_has_no_verdict() -> None:
    alert = built()
    assert alert.failing == FailingJob(3, CULPRIT)
    assert "culprit_verdict" not in alert.annotations and alert.authors == ("octocat",)


def test_a_suspect_reruns_cleared_is_kept_as_the_commit_but_blames_no_one() -> None:
    alert = built("environmental", "the last green commit fails too")
    assert alert.failing == FailingJob(3, CULPRIT, "environmental", "the last green commit fails too")
    assert alert.failing is not None and not alert.failing.blamed
    assert alert.authors == ()
    notes = alert.annotations
    assert (notes["suspect_sha"], notes["suspect_pr"], notes["suspect_title"]) == (
        SHA,
        "4242",
        "Make x faster",
    )
    assert not {"culprit_sha", "culprit_author", "culprit_url", "culprit_pr_url"} & set(notes)


def test_a_failing_job_reads_back_from_the_log_as_written_and_as_written_before() -> None:
    failing = FailingJob(3, CULPRIT, "confirmed", "3 of 3 reruns fail")
    assert FailingJob.from_data(failing.as_data()) == failing
    # A trunk-level alert's job as the log kept it before: no links, no reason.
    before = {
        "streak": 3,
        "culprit": {
            "sha": SHA,
            "title": "Make x faster",
            "pr": 4242,
            "author": "octocat",
            "time": "2026-11-18T17:00:00.000Z",
        },
        "verdict": "confirmed",
    }
    unlinked = CommitSummary(SHA, "Make x faster", 4242, "octocat", NOW - timedelta(hours=3))
    assert FailingJob.from_data(before) == FailingJob(3, unlinked, "confirmed")
    assert FailingJob(3, unlinked, "confirmed").as_data() == before  # what it writes is unchanged
