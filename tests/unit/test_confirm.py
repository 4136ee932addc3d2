"""Confirmation by reruns (app/confirm.py) on the in-memory storage: what the evaluator plans
within the budgets, what ingest requests and records from a snapshot."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from trunkwatch.app.confirm import (
    MAX_TRIES,
    AlertVerdict,
    advance_reruns,
    confirm_culprit,
    requests_waiting,
    runner_of,
)
from trunkwatch.domain.cells import Commit, JobRun
from trunkwatch.domain.commits import StoredCommit
from trunkwatch.domain.config import RuleConfig, TrunkConfig
from trunkwatch.domain.job_alerts import AlertCommit, JobAlert
from trunkwatch.domain.verdict import CulpritVerdict
from trunkwatch.sources.base import CommitRuns
from trunkwatch.storage.memory import memory_storage
from trunkwatch.storage.port import Storage

NOW = datetime(2026, 11, 18, 20, 0, tzinfo=UTC)
HOUR = timedelta(hours=1)
TRUNK = TrunkConfig(repo="pytorch/pytorch")
RULE = RuleConfig(confirm="rerun", reruns_per_hour=6)
JOB = "pull / test (default, linux.2xlarge)"
SHARD = "pull / test (default, 1, 2, linux.2xlarge)"
OTHER_SHARD = "pull / test (default, 2, 2, linux.2xlarge)"
LAST_PASS = AlertCommit(10, "a" * 40, NOW - timedelta(hours=3))
CULPRIT = AlertCommit(11, "c" * 40, NOW - timedelta(hours=2))
LINES = ("FAILED test/test_ops.py::test_x",)


def _alert(
    first_fail: AlertCommit = CULPRIT,
    last_pass: AlertCommit | None = LAST_PASS,
    *,
    job: str = JOB,
    episode: datetime | None = None,
    lines: tuple[str, ...] = LINES,
) -> JobAlert:
    """The firing alert judged; its episode starts at its first failure unless said."""
    return JobAlert(
        job, "firing", episode or first_fail.time, 3, first_fail, first_fail, last_pass, failure_lines=lines
    )


def _decide(storage: Storage, job: str = JOB, rule: RuleConfig = RULE, now: datetime = NOW) -> str:
    decision = confirm_culprit(storage, TRUNK.trunk_id, rule, _alert(job=job), now).decision
    return f"{decision.verdict.value}: {decision.reason}"


def _commit(ref: AlertCommit, *runs: JobRun) -> CommitRuns:
    return CommitRuns(Commit(ref.sha, ref.time), runs, complete=True)


def _snapshot(last_pass: str, culprit: str, last_id: int = 1, culprit_id: int = 2) -> list[CommitRuns]:
    """The job's two shards on the last pass and the culprit; the first shard as given."""
    return [
        _commit(
            LAST_PASS,
            JobRun(OTHER_SHARD, "success", job_id=100),
            JobRun(SHARD, last_pass, job_id=last_id, failed_before=last_pass == "success" and last_id > 1000),
        ),
        _commit(
            CULPRIT,
            JobRun(OTHER_SHARD, "success", job_id=200),
            JobRun(SHARD, culprit, job_id=culprit_id, failed_before=culprit == "success"),
        ),
    ]


class Requests:
    def __init__(self, *answers: str | None) -> None:
        self.answers = list(answers)
        self.sent: list[int | str | None] = []

    def __call__(self, run: JobRun) -> str | None:
        self.sent.append(run.job_id)
        return self.answers.pop(0) if self.answers else None


def test_the_first_judgement_plans_both_reruns_and_waits() -> None:
    storage = memory_storage()
    assert _decide(storage) == "unconfirmed: waiting for the last pass and culprit reruns"
    records = storage.reruns.of_episode(TRUNK.trunk_id, JOB, CULPRIT.time)
    assert sorted((r.role, r.sha) for r in records) == [
        ("culprit", CULPRIT.sha),
        ("last_pass", LAST_PASS.sha),
    ]
    assert all(r.requested_at is None for r in records)
    _decide(storage, now=NOW + timedelta(minutes=5))  # judged again: nothing more planned
    assert len(storage.reruns.of_episode(TRUNK.trunk_id, JOB, CULPRIT.time)) == 2


def test_the_hourly_cap_holds_reruns_back_until_the_hour_has_room() -> None:
    storage = memory_storage()
    rule = RuleConfig(confirm="rerun", reruns_per_hour=3)
    _decide(storage, "job one", rule)
    assert _decide(storage, "job two", rule).startswith("unconfirmed: waiting for the last pass rerun")
    assert (
        _decide(storage, "job three", rule) == "unconfirmed: the trunk's cap of 3 reruns an hour is reached"
    )
    assert storage.reruns.of_episode(TRUNK.trunk_id, "job three", CULPRIT.time) == []
    # An hour on, the episode gets its reruns.
    later = NOW + timedelta(hours=1, minutes=1)
    assert _decide(storage, "job three", rule, later).startswith("unconfirmed: waiting for the last pass")


def test_ingest_requests_the_failing_shard_and_its_namesake_on_the_last_pass() -> None:
    storage = memory_storage()
    _decide(storage)
    requests = Requests()
    accepted = advance_reruns(storage, TRUNK, RULE, _snapshot("success", "failure"), requests, NOW)
    assert accepted == 2 and requests.sent == [1, 2]  # the last pass first
    records = storage.reruns.of_episode(TRUNK.trunk_id, JOB, CULPRIT.time)
    assert {r.shard for r in records} == {SHARD} and all(r.requested_at == NOW for r in records)
    # Nothing new until a newer attempt replaces the one rerun: no second request.
    advance_reruns(
        storage, TRUNK, RULE, _snapshot("success", "failure"), requests, NOW + timedelta(minutes=30)
    )
    assert requests.sent == [1, 2]
    assert _decide(storage).startswith("unconfirmed: waiting for the last pass and culprit reruns")


OLDER = AlertCommit(9, "9" * 40, NOW - timedelta(hours=4))


def _without_the_failing_shard(older: str | None, older_id: int = 3) -> list[CommitRuns]:
    """Newest first: the culprit, the last pass where only the other shard ran, and an older
    commit where the failing shard ended `older` (None: it did not run there either)."""
    shard = (JobRun(SHARD, older, job_id=older_id),) if older else ()
    return [
        _commit(CULPRIT, JobRun(OTHER_SHARD, "success", job_id=200), JobRun(SHARD, "failure", job_id=2)),
        _commit(LAST_PASS, JobRun(OTHER_SHARD, "success", job_id=100)),
        _commit(OLDER, JobRun(OTHER_SHARD, "success", job_id=90), *shard),
    ]


def test_a_last_pass_without_the_failing_shard_is_not_rerun_on_another() -> None:
    for older in (None, "failure"):  # no commit where the failing shard passed before
        storage = memory_storage()
        _decide(storage)
        requests = Requests()
        shown = _without_the_failing_shard(older)
        assert advance_reruns(storage, TRUNK, RULE, shown, requests, NOW) == 1
        assert requests.sent == [2]  # the culprit's only
        assert _decide(storage) == (
            f"unconfirmed: the last pass rerun could not be requested: the shard that failed on the "
            f"culprit ({SHARD}) did not run on the last pass"
        )


def test_the_failing_shard_is_rerun_where_it_last_passed_and_never_confirms() -> None:
    outcomes = {
        "failure": f"environmental: the last pass {OLDER.sha[:12]} fails on rerun too",
        "success": "unconfirmed: the last pass passes on rerun and the culprit fails again on rerun, "
        "but the job did not run on the 1 commit between them: any of the range may have broken it",
    }
    for older_rerun, verdict in outcomes.items():
        storage = memory_storage()
        _decide(storage)
        requests = Requests()
        assert advance_reruns(storage, TRUNK, RULE, _without_the_failing_shard("success"), requests, NOW) == 2
        assert requests.sent == [3, 2]  # the failing shard on the older commit, then the culprit
        (last_pass,) = [
            r for r in storage.reruns.of_episode(TRUNK.trunk_id, JOB, CULPRIT.time) if r.role == "last_pass"
        ]
        assert (last_pass.sha, last_pass.last_pass_sha, last_pass.shard) == (OLDER.sha, LAST_PASS.sha, SHARD)
        later = NOW + timedelta(hours=1)
        newer = _without_the_failing_shard(older_rerun, older_id=1003)
        newer[0] = _commit(
            CULPRIT, JobRun(OTHER_SHARD, "success", job_id=200), JobRun(SHARD, "failure", job_id=1002)
        )
        advance_reruns(storage, TRUNK, RULE, newer, Requests(), later)
        assert _decide(storage, now=later) == verdict


def test_newer_attempts_bring_each_verdict() -> None:
    cases = {
        ("success", "failure"): CulpritVerdict.CONFIRMED,
        ("failure", "failure"): CulpritVerdict.ENVIRONMENTAL,
        ("success", "success"): CulpritVerdict.FLAKY,
    }
    for (last_pass, culprit), verdict in cases.items():
        storage = memory_storage()
        _decide(storage)
        advance_reruns(storage, TRUNK, RULE, _snapshot("success", "failure"), Requests(), NOW)
        later = NOW + timedelta(hours=1)
        newer = _snapshot(last_pass, culprit, last_id=1001, culprit_id=1002)
        advance_reruns(storage, TRUNK, RULE, newer, Requests(), later)
        assert _decide(storage, now=later).startswith(f"{verdict.value}: "), (last_pass, culprit)


def test_a_run_that_moved_past_its_flaky_suspect_says_its_start_was_not_rerun() -> None:
    # The culprit passed on rerun: its cell is flaky now and the run starts at the next
    # failure, whose alert keeps the episode (and its spent reruns).
    storage = memory_storage()
    _decide(storage)
    advance_reruns(storage, TRUNK, RULE, _snapshot("success", "failure"), Requests(), NOW)
    advance_reruns(storage, TRUNK, RULE, _snapshot("success", "success", 1001, 1002), Requests(), NOW + HOUR)
    later = AlertCommit(12, "d" * 40, CULPRIT.time + HOUR)
    alert = _alert(later, CULPRIT, episode=CULPRIT.time)
    moved = confirm_culprit(storage, TRUNK.trunk_id, RULE, alert, NOW + HOUR).decision
    assert (moved.verdict, moved.reason) == (
        CulpritVerdict.FLAKY,
        f"the culprit {CULPRIT.sha[:12]} passes on rerun; the run now starts at {'d' * 12}, not rerun",
    )
    assert _decide(storage, now=NOW + HOUR) == f"flaky: the culprit {CULPRIT.sha[:12]} passes on rerun"


def test_a_refused_request_leaves_the_reason_and_is_retried_up_to_max_tries() -> None:
    storage = memory_storage()
    _decide(storage)
    refusal = (
        "GitHub reruns: POST /repos/pytorch/pytorch/actions/jobs/1/rerun answered 403: Must have admin rights"
    )
    requests = Requests(refusal, None, refusal, refusal, refusal)
    advance_reruns(storage, TRUNK, RULE, _snapshot("success", "failure"), requests, NOW)
    assert _decide(storage) == f"unconfirmed: the last pass rerun could not be requested: {refusal}"
    for poll in range(1, MAX_TRIES + 2):
        advance_reruns(
            storage, TRUNK, RULE, _snapshot("success", "failure"), requests, NOW + poll * timedelta(minutes=1)
        )
    # The culprit's went through at once; the last pass's was tried MAX_TRIES times in all.
    assert requests.sent == [1, 2] + [1] * (MAX_TRIES - 1)
    (last_pass,) = [
        r for r in storage.reruns.of_episode(TRUNK.trunk_id, JOB, CULPRIT.time) if r.role == "last_pass"
    ]
    assert last_pass.tries == MAX_TRIES and last_pass.reason == refusal


def test_a_newer_attempt_already_running_is_waited_for_not_rerun() -> None:
    storage = memory_storage()
    _decide(storage)
    requests = Requests()
    advance_reruns(storage, TRUNK, RULE, _snapshot("success", "in_progress", culprit_id=1002), requests, NOW)
    assert requests.sent == [1]  # only the last pass: the culprit's newer attempt runs
    later = NOW + timedelta(hours=1)
    advance_reruns(storage, TRUNK, RULE, _snapshot("success", "failure", 1001, 1002), requests, later)
    assert _decide(storage, now=later).startswith("confirmed: ")


def test_a_range_with_commits_the_job_did_not_run_on_is_not_confirmed() -> None:
    storage = memory_storage()
    gap = AlertCommit(13, CULPRIT.sha, CULPRIT.time)  # seq 12 between the last pass and it
    storage.commits.place(TRUNK.trunk_id, _stored(12, "b" * 40), RULE.retention, None)
    decide = confirm_culprit(storage, TRUNK.trunk_id, RULE, _alert(gap), NOW).decision
    advance_reruns(storage, TRUNK, RULE, _snapshot("success", "failure"), Requests(), NOW)
    later = NOW + timedelta(hours=1)
    advance_reruns(storage, TRUNK, RULE, _snapshot("success", "failure", 1001, 1002), Requests(), later)
    decision = confirm_culprit(storage, TRUNK.trunk_id, RULE, _alert(gap), later).decision
    assert decide.verdict == CulpritVerdict.UNCONFIRMED
    assert (
        decision.verdict == CulpritVerdict.UNCONFIRMED
        and "did not run on the 1 commit between them" in decision.reason
    )


def _gap_confirmed_by_reruns(storage: Storage) -> AlertCommit:
    """The job's reruns confirm its range (the last pass passes, the first failure fails
    again), a range with a commit (seq 12) it did not run on; returns its first failure."""
    gap = AlertCommit(13, CULPRIT.sha, CULPRIT.time, job_url="https://github.com/job/13")
    storage.commits.place(TRUNK.trunk_id, _stored(12, "b" * 40), RULE.retention, None)
    _judge(storage, gap, NOW)
    advance_reruns(storage, TRUNK, RULE, _snapshot("success", "failure"), Requests(), NOW)
    advance_reruns(storage, TRUNK, RULE, _snapshot("success", "failure", 1001, 1002), Requests(), NOW + HOUR)
    return gap


def _judge(
    storage: Storage, first_fail: AlertCommit, now: datetime, lines: tuple[str, ...] = LINES
) -> AlertVerdict:
    return confirm_culprit(storage, TRUNK.trunk_id, RULE, _alert(first_fail, lines=lines), now)


SKIPPED = AlertCommit(
    12, "b" * 40, NOW - timedelta(hours=2, minutes=30), pr=12, job_url="https://github.com/job/12"
)
SIBLING = JobAlert(
    "pull / test (crossref, linux.2xlarge)",
    "firing",
    NOW,
    3,
    SKIPPED,
    SKIPPED,
    failure_lines=LINES,
    culprit_verdict="confirmed",
)


def test_a_sibling_confirmed_on_a_commit_the_job_skipped_names_it() -> None:
    storage = memory_storage()
    gap = _gap_confirmed_by_reruns(storage)
    assert _judge(storage, gap, NOW + HOUR).decision.verdict == CulpritVerdict.UNCONFIRMED
    storage.alerts.save_with_failing_set(TRUNK.trunk_id, SIBLING, now_firing=True)
    judged = _judge(storage, gap, NOW + HOUR)
    assert judged.decision.verdict == CulpritVerdict.CONFIRMED
    assert judged.culprit == AlertCommit(12, "b" * 40, SKIPPED.time, pr=12)  # no run of this job on it
    assert f"which reruns of {SIBLING.job} confirm broke the same test" in judged.decision.reason
    # Failing another way, it is not the sibling's breakage.
    assert _judge(storage, gap, NOW + HOUR, ("FAILED test/test_nn.py::test_y",)).culprit is None


def test_a_culprit_named_by_a_sibling_stands_when_the_sibling_resolves() -> None:
    storage = memory_storage()
    gap = _gap_confirmed_by_reruns(storage)
    sibling = storage.alerts.save_with_failing_set(TRUNK.trunk_id, SIBLING, now_firing=True)
    judged = _judge(storage, gap, NOW + HOUR)
    own = JobAlert(
        JOB,
        "firing",
        gap.time,
        3,
        gap,
        gap,
        LAST_PASS,
        failure_lines=LINES,
        culprit_verdict=judged.decision.verdict.value,
        verdict_reason=judged.decision.reason,
        confirmed_culprit=judged.culprit,
    )
    storage.alerts.save_with_failing_set(TRUNK.trunk_id, own, now_firing=True)
    storage.alerts.save_with_failing_set(
        TRUNK.trunk_id, replace(sibling, status="resolved"), now_firing=False
    )
    assert _judge(storage, gap, NOW + 2 * HOUR) == judged


def _stored(seq: int, sha: str) -> StoredCommit:
    return StoredCommit(seq, Commit(sha, NOW - timedelta(hours=2, minutes=30)), "")


def test_without_failure_lines_beside_other_jobs_on_its_runner_it_is_environmental() -> None:
    """A runner outage: jobs on one runner type fail without failure lines at the same time."""
    storage = memory_storage()
    ref = AlertCommit(11, CULPRIT.sha, CULPRIT.time)
    peer = JobAlert("trunk / test (slow, linux.2xlarge)", "firing", NOW, 3, ref, ref)
    other_runner = JobAlert("trunk / test (slow, linux.g5.4xlarge)", "firing", NOW, 3, ref, ref)
    for alert in (peer, other_runner):
        storage.alerts.save_with_failing_set(TRUNK.trunk_id, alert, now_firing=True)
    decision = confirm_culprit(storage, TRUNK.trunk_id, RULE, _alert(lines=()), NOW).decision
    assert decision.verdict == CulpritVerdict.ENVIRONMENTAL
    assert decision.reason == "no failure lines while 1 other job(s) on linux.2xlarge failed at the same time"
    assert _decide(storage).startswith("unconfirmed: ")  # with failure lines: reruns decide
    assert runner_of("lint / lintrunner") == "" and runner_of(JOB) == "linux.2xlarge"


def test_on_a_trunk_whose_failures_carry_no_lines_missing_lines_tell_nothing() -> None:
    """A GitHub- or Buildkite-fed trunk: no failure has lines, so jobs of one runner type
    failing together from one commit are no sign of an outage (a breakage fails its jobs
    from its commit); reruns decide. Failing together from other commits, they are."""
    storage = memory_storage()
    ref = AlertCommit(11, CULPRIT.sha, CULPRIT.time)
    peer = JobAlert("trunk / test (slow, linux.2xlarge)", "firing", NOW, 3, ref, ref)
    storage.alerts.save_with_failing_set(TRUNK.trunk_id, peer, now_firing=True)
    decision = confirm_culprit(storage, TRUNK.trunk_id, RULE, _alert(lines=()), NOW, lines=False).decision
    assert decision.verdict == CulpritVerdict.UNCONFIRMED
    # A job that did not run on the culprit, failing from the next commit: one breakage may
    # have broken both (its range holds the culprit).
    later = AlertCommit(12, "d" * 40, CULPRIT.time + timedelta(minutes=30))
    skipped = JobAlert("trunk / test (jit, linux.2xlarge)", "firing", NOW, 3, later, later, LAST_PASS)
    storage.alerts.save_with_failing_set(TRUNK.trunk_id, skipped, now_firing=True)
    decision = confirm_culprit(storage, TRUNK.trunk_id, RULE, _alert(lines=()), NOW, lines=False).decision
    assert decision.verdict == CulpritVerdict.UNCONFIRMED
    # One failing from a commit this job passed on: no one breakage broke both.
    earlier = AlertCommit(10, "e" * 40, LAST_PASS.time)
    elsewhere = JobAlert("trunk / test (nogpu, linux.2xlarge)", "firing", NOW, 4, earlier, earlier)
    storage.alerts.save_with_failing_set(TRUNK.trunk_id, elsewhere, now_firing=True)
    decision = confirm_culprit(storage, TRUNK.trunk_id, RULE, _alert(lines=()), NOW, lines=False).decision
    assert decision.verdict == CulpritVerdict.ENVIRONMENTAL
    assert decision.reason == (
        "1 other job(s) on linux.2xlarge failed at the same time from commits no one breakage spans: "
        "the runner, not a commit"
    )


def test_a_culprit_whose_failure_is_a_failed_retry_is_not_rerun() -> None:
    storage = memory_storage()
    _decide(storage)
    retried = [
        _commit(LAST_PASS, JobRun(SHARD, "success", job_id=1)),
        _commit(CULPRIT, JobRun(SHARD, "failure", job_id=2, failed_before=True)),
    ]
    requests = Requests()
    assert advance_reruns(storage, TRUNK, RULE, retried, requests, NOW) == 1
    assert requests.sent == [1]  # the last pass only
    later = NOW + timedelta(hours=1)
    advance_reruns(
        storage, TRUNK, RULE, [_commit(LAST_PASS, JobRun(SHARD, "success", job_id=1001))], requests, later
    )
    assert _decide(storage, now=later) == (
        f"confirmed: the last pass {LAST_PASS.sha[:12]} passes on rerun and the culprit {CULPRIT.sha[:12]} "
        "fails again on its retry"
    )


def test_a_rerun_request_waits_for_the_page_until_a_poll_has_tried_it() -> None:
    """What makes ingest read an unchanged page: a rerun planned since the last good poll, or
    a refused one with tries left; not one a poll has tried (its commit was not on the page)."""
    storage = memory_storage()
    assert not requests_waiting(storage, TRUNK.trunk_id, None, NOW)
    _decide(storage)  # plans both at NOW, at the poll of NOW
    assert requests_waiting(storage, TRUNK.trunk_id, NOW, NOW + timedelta(minutes=1))
    later = NOW + timedelta(minutes=1)
    advance_reruns(storage, TRUNK, RULE, [], Requests(), later)  # neither commit on the page
    assert not requests_waiting(storage, TRUNK.trunk_id, later, later + timedelta(minutes=1))
    refusal = "answered 403: Must have admin rights"
    advance_reruns(storage, TRUNK, RULE, _snapshot("success", "failure"), Requests(refusal, None), later)
    assert requests_waiting(storage, TRUNK.trunk_id, later, later + timedelta(minutes=1))
