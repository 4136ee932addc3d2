"""The daily digest (design.md §4.4): when a day's is due, one entry per breakage fixed before
a page (two jobs of one breakage are one entry; one another job paged is none), what a day's
says, and how the SNS topic, email and Slack carry it."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime, timedelta

import pytest

from trunkwatch.channels.base import DigestNotification
from trunkwatch.channels.digest import email_text, subject
from trunkwatch.channels.slack import digest_message
from trunkwatch.channels.sns import SUBJECT_MAX, digest_publish_arguments
from trunkwatch.domain.alerts import CommitSummary
from trunkwatch.domain.cells import line_ids
from trunkwatch.domain.digest import FixedJob, daily_digest, due_days, fixed_breakages, latest_due
from trunkwatch.domain.history import JobEpisode

DAY = date(2026, 11, 18)
T0 = datetime(2026, 11, 18, tzinfo=UTC)
HOUR = timedelta(hours=1)
LINE = "FAILED test/test_nn.py::TestNN::test_conv6"
BUILD, TEST, CUDA = "pull / build", "pull / test (default)", "trunk / cuda / test (default)"


def band(failing: int) -> str | None:
    return None if failing == 0 else "TrunkBroken" if failing <= 5 else "TrunkBadlyBroken"


@pytest.mark.parametrize(
    ("last_day", "now", "hour", "due"),
    [
        (DAY - timedelta(days=1), T0 + 8 * HOUR, 9, []),  # the 18th's is not due before 09:00 on the 19th
        (DAY - timedelta(days=1), T0 + 32 * HOUR, 9, []),  # 08:00 on the 19th: not yet
        (DAY - timedelta(days=1), T0 + 33 * HOUR, 9, [DAY]),  # 09:00 on the 19th: the 18th's
        (DAY, T0 + 33 * HOUR, 9, []),  # sent already
        (DAY, T0 + 24 * HOUR, 0, []),
        (DAY - timedelta(days=1), T0 + 24 * HOUR, 0, [DAY]),  # hour 0: at midnight
        (DAY - timedelta(days=2), T0 + 24 * HOUR, 0, [DAY - timedelta(days=1), DAY]),  # each day missed
        (DAY - timedelta(days=30), T0 + 24 * HOUR, 0, [DAY - timedelta(days=n) for n in range(6, -1, -1)]),
    ],
)
def test_a_days_digest_is_due_from_its_hour_the_next_day(
    last_day: date, now: datetime, hour: int, due: list[date]
) -> None:
    assert due_days(last_day, now, hour) == due
    assert latest_due(T0 + 33 * HOUR, 9) == DAY


def sha(seq: int, filler: str = "c") -> str:
    return f"{seq:02d}".ljust(40, filler)


def fixed(
    job: str,
    culprit: int,
    fix: int,
    failed: int = 2,
    last_pass: int | None = None,
    lines: frozenset[str] = frozenset({LINE}),
    detected: timedelta = 5 * HOUR,
) -> FixedJob:
    author = f"dev{culprit}"
    return FixedJob(
        job=job,
        culprit=CommitSummary(
            sha(culprit), f"change {culprit}", 1000 + culprit, author, T0 + culprit * HOUR / 4
        ),
        culprit_seq=culprit,
        fix_sha=sha(fix, "f"),
        fix_time=T0 + fix * HOUR / 4,
        fix_seq=fix,
        failed_commits=failed,
        detected_at=T0 + detected,
        last_pass_seq=culprit - 1 if last_pass is None else last_pass,
        failure_lines=lines,
    )


def test_two_jobs_of_one_breakage_are_one_entry() -> None:
    (breakage,) = fixed_breakages([fixed(TEST, 4, 7, failed=3), fixed(BUILD, 4, 6)], pages=[])
    assert breakage.culprit.sha == sha(4) and breakage.jobs == (BUILD, TEST)
    assert breakage.fix_sha == sha(6, "f") and breakage.failed_commits == 3  # the first fix, the most commits


def test_a_job_that_did_not_run_on_the_breaking_commit_joins_its_breakage() -> None:
    # The test job skipped commit 4: its first failure is 5, its last pass 3. It fails the
    # build's line: the same breakage, blamed on 4. Another test failing elsewhere is its own.
    skipped = fixed(TEST, 5, 7, last_pass=3)
    other = fixed(CUDA, 5, 7, last_pass=3, lines=frozenset({"FAILED test/test_cuda.py::test_1"}))
    found = fixed_breakages([fixed(BUILD, 4, 6), skipped, other], pages=[])
    assert [(b.culprit.sha, b.jobs) for b in found] == [(sha(4), (BUILD, TEST)), (sha(5), (CUDA,))]


def test_a_jobs_run_past_a_pass_of_a_shard_that_skipped_the_test_is_its_breakage() -> None:
    # The test job fails 4 and 5, passes at 6 (its failing shard did not run), fails 7 and
    # 8 with the same line, and passes at 9: one breakage, by 4, fixed by 9.
    first, second = fixed(TEST, 4, 6, last_pass=3), fixed(TEST, 7, 9, last_pass=6)
    (breakage,) = fixed_breakages([first, second], pages=[])
    assert (breakage.culprit.sha, breakage.fix_sha, breakage.jobs) == (sha(4), sha(9, "f"), (TEST,))
    other = fixed(TEST, 7, 9, last_pass=6, lines=frozenset({"FAILED test/test_cuda.py::test_1"}))
    assert [b.culprit.sha for b in fixed_breakages([first, other], pages=[])] == [sha(4), sha(7)]
    # Its first run named as a page's culprit (through another job): all of it paged.
    assert fixed_breakages([first, second], pages=[page(4, 1, 3)]) == []


def page(culprit: int, start: float, end: float | None, lines: frozenset[str] = frozenset()) -> JobEpisode:
    """A job alert's episode of CUDA from hour `start` to `end`, blaming commit `culprit`."""
    ends_at = T0 + end * HOUR if end is not None else None
    return JobEpisode(
        CUDA, T0 + start * HOUR, ends_at, sha(culprit), culprit, failure_line_ids=line_ids(lines)
    )


def test_a_breakage_another_job_paged_is_left_out() -> None:
    assert fixed_breakages([fixed(BUILD, 4, 6), fixed(TEST, 9, 11)], pages=[page(4, 1, 2)]) == [
        fixed_breakages([fixed(TEST, 9, 11)], [])[0]
    ]
    # Paged on a commit of the range the job did not run on: the same breakage, paged.
    assert fixed_breakages([fixed(TEST, 5, 7, last_pass=3)], pages=[page(4, 1, 2)]) == []


def test_a_breakage_whose_failure_line_paged_while_it_failed_is_left_out() -> None:
    # Commits 8 and 9 fail from 02:00 (commit 8's time) until the pass is seen at 05:00. A
    # page blaming commit 2 with the same line, open then (the same breakage, whose job
    # passed at 7 on a shard without the failing test; or a dependency failing every job),
    # paged it; a page with another line, or over before 02:00, did not.
    run = fixed(TEST, 8, 10)
    assert fixed_breakages([run], pages=[page(2, 0.5, None, frozenset({LINE}))]) == []
    assert fixed_breakages([run], pages=[page(2, 0.5, 2.5, frozenset({LINE}))]) == []
    assert fixed_breakages([run], pages=[page(2, 4.5, 6, frozenset({LINE}))]) == []  # opened before 05:00
    other = frozenset({"FAILED test/test_cuda.py::test_1"})
    for kept in (
        page(2, 0.5, None, other),
        page(2, 0.5, 1.5, frozenset({LINE})),
        page(2, 5.5, 6, frozenset({LINE})),
    ):
        assert [b.culprit.sha for b in fixed_breakages([run], pages=[kept])] == [sha(8)]


def test_a_days_digest_tells_that_days_breakages_pages_verdicts_and_hours_broken() -> None:
    now = T0 + 33 * HOUR
    records = [
        fixed(BUILD, 4, 6, detected=2 * HOUR),
        fixed(TEST, 4, 6, detected=2 * HOUR + timedelta(minutes=5)),
        fixed(TEST, 60, 62, detected=23 * HOUR),
        fixed(BUILD, 90, 92, detected=26 * HOUR),  # the next day's
        fixed(TEST, 0, 2, detected=-2 * HOUR),  # the day before's
    ]
    episodes = [
        JobEpisode(CUDA, T0 + 10 * HOUR, T0 + 13 * HOUR, sha(40), 40, "confirmed"),
        JobEpisode("trunk / rocm", T0 + 12 * HOUR, T0 + 30 * HOUR, sha(48), 48),
    ]
    digest = daily_digest("pytorch/pytorch", "main", DAY, records, episodes, band, now)
    assert [(b.culprit.sha, b.jobs) for b in digest.fixed_before_page] == [
        (sha(4), (BUILD, TEST)),
        (sha(60), (TEST,)),
    ]
    (page,) = digest.pages  # the second job joined a broken trunk: no page
    assert (page.at, page.alertname, page.jobs) == (T0 + 10 * HOUR, "TrunkBroken", ((CUDA, sha(40)),))
    assert [(v.job, v.verdict) for v in digest.verdicts] == [(CUDA, "confirmed")]
    assert digest.hours_broken == 14.0  # from 10:00 to the day's end
    body = digest.body("trunkwatch-sns", "https://status.example")
    assert (body["kind"], body["trunk"], body["day"]) == ("digest", "pytorch/pytorch#main", "2026-11-18")
    entry = body["fixed_before_page"][0]
    assert {k: entry[k] for k in ("culprit_sha", "fix_sha", "jobs", "failed_commits")} == {
        "culprit_sha": sha(4),
        "fix_sha": sha(6, "f"),
        "jobs": [BUILD, TEST],
        "failed_commits": 2,
    }
    assert entry["culprit_author"] == "dev4" and entry["broken_for_seconds"] == 1800
    assert body["pages"][0]["alertname"] == "TrunkBroken" and body["hours_broken"] == 14.0


def note() -> DigestNotification:
    records = [fixed(BUILD, 4, 6), fixed(TEST, 4, 6), fixed(CUDA, 60, 62, failed=3)]
    episodes = [JobEpisode(CUDA, T0 + 10 * HOUR, T0 + 13 * HOUR, sha(40), 40)]
    digest = daily_digest("pytorch/pytorch", "main", DAY, records, episodes, band, T0 + 33 * HOUR)
    return DigestNotification(digest, "trunkwatch-sns", "https://status.example")


def test_the_topic_carries_it_with_an_attribute_no_alert_has() -> None:
    arguments = digest_publish_arguments(note())
    attributes = {k: v["StringValue"] for k, v in arguments["MessageAttributes"].items()}
    assert attributes == {"kind": "digest", "repo": "pytorch/pytorch", "branch": "main"}
    assert arguments["Subject"] == (
        "[DIGEST] pytorch/pytorch@main 2026-11-18: 2 fixed before a page, 1 page, 3h broken"
    )
    message = json.loads(arguments["Message"])
    assert json.loads(message["default"]) == note().body and message["email"] == email_text(note())
    assert len(subject(note().digest, SUBJECT_MAX)) <= SUBJECT_MAX


def test_email_and_slack_render_a_short_report() -> None:
    text = email_text(note())
    assert text.startswith("Daily digest: pytorch/pytorch@main, 2026-11-18 (UTC)\n\n")
    assert "Fixed before anyone was paged: 2 breakages\n" in text
    fixed_by = f"fixed by {sha(6, 'f')[:12]} 30m later"
    assert f'- {sha(4)[:12]} #1004 "change 4" by dev4\n  2 commits failed, {fixed_by}\n' in text
    assert f"  {BUILD}\n  {TEST}\n" in text
    assert f"Pages: 1\n- 10:00 TrunkBroken: 1 job, culprit {sha(40)[:12]}\n" in text
    assert "Hours broken: 3\n" in text
    assert "Status page: https://status.example/#/trunk?id=pytorch%2Fpytorch%23main" in text
    slack = digest_message(note())
    (attachment,) = slack["attachments"]
    blocks = json.dumps(attachment["blocks"])
    assert attachment["blocks"][0]["text"]["text"] == "Daily digest: pytorch/pytorch@main, 2026-11-18 (UTC)"
    assert "*Fixed before anyone was paged: 2 breakages*" in blocks and "by dev4" in blocks
    assert "<@" not in blocks  # a report mentions no one
