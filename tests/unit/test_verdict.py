"""Culprit verdicts confirmed by reruns (issue #27): every branch of `decide` and `plan_reruns`."""

from dataclasses import replace

import pytest

from trunkwatch.domain.cells import CellState
from trunkwatch.domain.verdict import (
    MAX_RERUNS_PER_EPISODE,
    ConfirmedAlert,
    CulpritVerdict,
    Evidence,
    Rerun,
    RerunRequest,
    RerunStatus,
    Role,
    Suspect,
    confirming_sibling,
    decide,
    plan_reruns,
    shard_last_pass,
    shard_to_rerun,
)

JOB = "pull / linux-jammy-py3.10-gcc11 / test (default, linux.2xlarge)"
SUSPECT = Suspect(JOB, culprit_sha="c" * 40, last_pass_sha="a" * 40)
CLIPPED = Suspect(JOB, culprit_sha="c" * 40, last_pass_sha=None)

OK = Rerun(RerunStatus.SUCCESS)
FAIL = Rerun(RerunStatus.FAILURE)
PENDING = Rerun(RerunStatus.PENDING)
REFUSED = Rerun(RerunStatus.REQUEST_FAILED, "403 Resource not accessible by integration")


@pytest.mark.parametrize(
    ("last_pass", "culprit", "failed_retry", "verdict", "reason"),
    [
        # Both reruns agree with the alert.
        (OK, FAIL, False, CulpritVerdict.CONFIRMED, "fails again on rerun"),
        # A failed retry stands in for a culprit rerun there is not...
        (OK, None, True, CulpritVerdict.CONFIRMED, "fails again on its retry"),
        (OK, REFUSED, True, CulpritVerdict.CONFIRMED, "fails again on its retry"),
        # ...but a pending one is waited for (no flip from confirmed to flaky).
        (OK, PENDING, True, CulpritVerdict.UNCONFIRMED, "waiting for the culprit rerun"),
        # The last pass fails too: environmental, whatever the culprit does.
        (FAIL, FAIL, False, CulpritVerdict.ENVIRONMENTAL, "fails on rerun too"),
        (FAIL, None, False, CulpritVerdict.ENVIRONMENTAL, "fails on rerun too"),
        (FAIL, PENDING, True, CulpritVerdict.ENVIRONMENTAL, "fails on rerun too"),
        # Disagreement: the last pass fails and the culprit passes: not the culprit.
        (FAIL, OK, False, CulpritVerdict.ENVIRONMENTAL, "the culprit passes on rerun (intermittent"),
        # The culprit passes on rerun: flaky, even after a failed retry (the newer result).
        (OK, OK, False, CulpritVerdict.FLAKY, "passes on rerun"),
        (PENDING, OK, False, CulpritVerdict.FLAKY, "passes on rerun"),
        (None, OK, True, CulpritVerdict.FLAKY, "its first failure was a failed retry"),
        # Nothing decisive yet.
        (OK, PENDING, False, CulpritVerdict.UNCONFIRMED, "waiting for the culprit rerun"),
        (PENDING, FAIL, False, CulpritVerdict.UNCONFIRMED, "waiting for the last pass rerun"),
        (PENDING, PENDING, False, CulpritVerdict.UNCONFIRMED, "waiting for the last pass and culprit reruns"),
        (PENDING, None, True, CulpritVerdict.UNCONFIRMED, "waiting for the last pass rerun"),
        (None, None, False, CulpritVerdict.UNCONFIRMED, "no rerun requested"),
        (None, FAIL, False, CulpritVerdict.UNCONFIRMED, "no rerun requested"),
        (OK, None, False, CulpritVerdict.UNCONFIRMED, "no rerun requested"),
        # A request that failed is named, before anything pending.
        (REFUSED, PENDING, False, CulpritVerdict.UNCONFIRMED, "last pass rerun could not be requested: 403"),
        (OK, REFUSED, False, CulpritVerdict.UNCONFIRMED, "culprit rerun could not be requested: 403"),
        (PENDING, Rerun(RerunStatus.REQUEST_FAILED), False, CulpritVerdict.UNCONFIRMED, "unknown error"),
    ],
)
def test_decide_from_reruns(
    last_pass: Rerun | None, culprit: Rerun | None, failed_retry: bool, verdict: CulpritVerdict, reason: str
) -> None:
    decision = decide(
        SUSPECT, Evidence(last_pass=last_pass, culprit=culprit, culprit_failed_retry=failed_retry)
    )
    assert decision.verdict == verdict
    assert reason in decision.reason
    assert decision.blames_culprit == (verdict == CulpritVerdict.CONFIRMED)


def test_confirmation_off_is_unconfirmed_whatever_the_evidence() -> None:
    evidence = Evidence(
        last_pass=OK, culprit=FAIL, confirmation=False, no_failure_lines=True, runner_peers_failing=3
    )
    decision = decide(SUSPECT, evidence)
    assert decision.verdict == CulpritVerdict.UNCONFIRMED
    assert decision.reason == "confirmation by reruns is off"


def test_runner_outage_pattern_decides_only_without_rerun_results() -> None:
    outage = {"no_failure_lines": True, "runner_peers_failing": 4, "runner": "windows.4xlarge"}
    decision = decide(SUSPECT, Evidence(**outage))
    assert decision.verdict == CulpritVerdict.ENVIRONMENTAL
    assert (
        decision.reason == "no failure lines while 4 other job(s) on windows.4xlarge failed at the same time"
    )
    assert (
        "the same runner type"
        in decide(SUSPECT, Evidence(no_failure_lines=True, runner_peers_failing=1)).reason
    )
    # Pending reruns: the pattern decides meanwhile.
    assert (
        decide(SUSPECT, Evidence(last_pass=PENDING, culprit=PENDING, **outage)).verdict
        == CulpritVerdict.ENVIRONMENTAL
    )
    # Reruns that decide beat it: the outage was over, the code broke the job.
    assert decide(SUSPECT, Evidence(last_pass=OK, culprit=FAIL, **outage)).verdict == CulpritVerdict.CONFIRMED
    assert decide(SUSPECT, Evidence(culprit=OK, **outage)).verdict == CulpritVerdict.FLAKY


def test_an_agent_failure_is_environmental_whatever_reruns_say() -> None:
    for reruns in ({}, {"last_pass": OK, "culprit": FAIL}, {"culprit": OK}):
        decision = decide(SUSPECT, Evidence(agent_failure="agent_stop", **reruns))
        assert decision.verdict == CulpritVerdict.ENVIRONMENTAL and not decision.blames_culprit
        assert decision.reason == "the CI's agent failed the job (agent_stop), not its code"
    off = Evidence(agent_failure="agent_stop", confirmation=False)
    assert decide(SUSPECT, off).verdict == CulpritVerdict.UNCONFIRMED


@pytest.mark.parametrize(
    "evidence",
    [
        Evidence(no_failure_lines=True, runner_peers_failing=0),  # alone on its runner
        Evidence(no_failure_lines=False, runner_peers_failing=5),  # it has failure lines
    ],
)
def test_no_runner_outage_without_both_signs(evidence: Evidence) -> None:
    assert decide(SUSPECT, evidence).verdict == CulpritVerdict.UNCONFIRMED


def test_clipped_run() -> None:
    assert decide(CLIPPED, Evidence()).reason == "no last pass in the window to rerun"
    assert decide(CLIPPED, Evidence(culprit=FAIL)).verdict == CulpritVerdict.UNCONFIRMED
    assert decide(CLIPPED, Evidence(culprit=OK)).verdict == CulpritVerdict.FLAKY
    # A failed request still comes first in the reason.
    assert "could not be requested" in decide(CLIPPED, Evidence(culprit=REFUSED)).reason


def _requested(requests: tuple[RerunRequest, ...]) -> list[tuple[Role, str]]:
    return [(request.role, request.sha) for request in requests]


def test_plan_asks_for_both_reruns_last_pass_first() -> None:
    plan = plan_reruns(SUSPECT, hourly_cap=10)
    assert _requested(plan.requests) == [(Role.LAST_PASS, "a" * 40), (Role.CULPRIT, "c" * 40)]
    assert all(request.job == JOB for request in plan.requests)
    assert plan.skipped == ()


def test_plan_at_most_two_per_episode() -> None:
    assert MAX_RERUNS_PER_EPISODE == 2
    plan = plan_reruns(SUSPECT, requested=frozenset({Role.LAST_PASS}), hourly_cap=10)
    assert _requested(plan.requests) == [(Role.CULPRIT, "c" * 40)]
    done = plan_reruns(SUSPECT, requested=frozenset({Role.LAST_PASS, Role.CULPRIT}), hourly_cap=10)
    assert done.requests == () and done.skipped == ()


def test_plan_budget_counts_what_was_requested() -> None:
    # A role requested counts against the episode even if the other is wanted again later.
    plan = plan_reruns(CLIPPED, requested=frozenset({Role.CULPRIT}), hourly_cap=10)
    assert plan.requests == ()
    assert plan.skipped == ((Role.LAST_PASS, "no last pass in the window"),)


def test_plan_skips_a_commit_with_a_newer_attempt() -> None:
    plan = plan_reruns(SUSPECT, newer_attempt=frozenset({Role.CULPRIT}), hourly_cap=10)
    assert _requested(plan.requests) == [(Role.LAST_PASS, "a" * 40)]
    assert plan.skipped == ((Role.CULPRIT, "a newer attempt of the job on the culprit exists or runs"),)
    both = plan_reruns(SUSPECT, newer_attempt=frozenset({Role.CULPRIT, Role.LAST_PASS}), hourly_cap=10)
    assert both.requests == ()
    assert [role for role, _ in both.skipped] == [Role.LAST_PASS, Role.CULPRIT]


def test_plan_no_culprit_rerun_after_a_failed_retry() -> None:
    plan = plan_reruns(SUSPECT, culprit_failed_retry=True, hourly_cap=10)
    assert _requested(plan.requests) == [(Role.LAST_PASS, "a" * 40)]
    assert plan.skipped == ((Role.CULPRIT, "the culprit's failure is already a failed retry"),)


def test_plan_clipped_run_reruns_only_the_culprit() -> None:
    plan = plan_reruns(CLIPPED, hourly_cap=10)
    assert _requested(plan.requests) == [(Role.CULPRIT, "c" * 40)]
    assert plan.skipped == ((Role.LAST_PASS, "no last pass in the window"),)


@pytest.mark.parametrize(
    ("used", "cap", "granted"), [(0, 1, 1), (9, 10, 1), (10, 10, 0), (12, 10, 0), (0, 0, 0)]
)
def test_plan_respects_the_hourly_cap(used: int, cap: int, granted: int) -> None:
    plan = plan_reruns(SUSPECT, requested_this_hour=used, hourly_cap=cap)
    assert len(plan.requests) == granted
    assert plan.requests[:granted] == plan_reruns(SUSPECT, hourly_cap=10).requests[:granted]
    assert [reason for _, reason in plan.skipped] == [
        f"the trunk's cap of {cap} reruns an hour is reached"
    ] * (2 - granted)


def test_plan_nothing_when_confirmation_is_off() -> None:
    plan = plan_reruns(SUSPECT, hourly_cap=10, confirmation=False)
    assert plan.requests == ()
    assert {reason for _, reason in plan.skipped} == {"confirmation by reruns is off"}


def test_reruns_confirm_a_range_not_a_commit_the_job_skipped() -> None:
    """The job did not run on 2 commits between the last pass and the culprit: any of the
    three may have broken it, so no pull request is blamed."""
    gapped = Suspect(JOB, culprit_sha="c" * 40, last_pass_sha="a" * 40, unrun_between=2)
    decision = decide(gapped, Evidence(last_pass=OK, culprit=FAIL))
    assert decision.verdict == CulpritVerdict.UNCONFIRMED and not decision.blames_culprit
    assert "did not run on the 2 commits between them" in decision.reason
    # What clears the culprit still does.
    assert decide(gapped, Evidence(last_pass=FAIL, culprit=FAIL)).verdict == CulpritVerdict.ENVIRONMENTAL
    assert decide(gapped, Evidence(last_pass=OK, culprit=OK)).verdict == CulpritVerdict.FLAKY


LINE = "FAILED test/test_ops.py::TestCommon::test_x"
SIBLING = ConfirmedAlert("pull / test (crossref, linux.2xlarge)", 11, "b" * 40, (LINE,))


def test_a_sibling_names_the_commit_of_the_range_the_job_skipped() -> None:
    gapped = Suspect(JOB, culprit_sha="c" * 40, last_pass_sha="a" * 40, unrun_between=1)
    decision = decide(gapped, Evidence(last_pass=OK, culprit=FAIL, sibling=SIBLING))
    assert decision.verdict == CulpritVerdict.CONFIRMED and decision.culprit_sha == "b" * 40
    assert decision.reason == (
        f"the last pass {'a' * 12} passes on rerun and the first failure {'c' * 12} fails again on "
        f"rerun; the job did not run on {'b' * 12}, which reruns of {SIBLING.job} confirm broke the "
        "same test"
    )
    # The sibling confirms the first failure itself: the commits before it are cleared.
    own = decide(gapped, Evidence(last_pass=OK, culprit=FAIL, sibling=replace(SIBLING, culprit_sha="c" * 40)))
    assert own.verdict == CulpritVerdict.CONFIRMED and own.culprit_sha == "c" * 40  # the sibling's, as judged
    assert own.reason.endswith(
        f"; the job did not run on the 1 commit before it; the first failure, which reruns of {SIBLING.job} "
        "confirm broke the same test"
    )
    # Where failures carry no lines, the sibling is the job in another configuration.
    lineless = decide(gapped, Evidence(last_pass=OK, culprit=FAIL, sibling=SIBLING, lineless=True))
    assert lineless.reason.endswith(f"reruns of {SIBLING.job} confirm broke in another configuration")
    # The job's own reruns still decide first: a sibling never overrides them.
    for last_pass, culprit, verdict in (
        (FAIL, FAIL, CulpritVerdict.ENVIRONMENTAL),
        (OK, OK, CulpritVerdict.FLAKY),
    ):
        assert decide(gapped, Evidence(last_pass, culprit, sibling=SIBLING)).verdict == verdict
    assert decide(gapped, Evidence(last_pass=OK, culprit=PENDING, sibling=SIBLING)).culprit_sha is None
    # Without a gap the job's own culprit is confirmed, whatever a sibling says.
    assert decide(SUSPECT, Evidence(last_pass=OK, culprit=FAIL, sibling=SIBLING)).culprit_sha is None


@pytest.mark.parametrize(
    ("confirmed", "found"),
    [
        ([SIBLING], SIBLING),
        # Its culprit must lie in the range (10, 12]: the first failure itself counts too.
        ([replace(SIBLING, culprit_seq=12)], replace(SIBLING, culprit_seq=12)),
        ([replace(SIBLING, culprit_seq=10)], None),
        ([replace(SIBLING, culprit_seq=13)], None),
        # It must fail the same way.
        ([replace(SIBLING, failure_lines=("FAILED test/test_nn.py::test_y",))], None),
        ([replace(SIBLING, failure_lines=())], None),
        # Two siblings naming two commits: which one broke this job is not known.
        ([SIBLING, replace(SIBLING, job="other", culprit_seq=12, culprit_sha="d" * 40)], None),
        ([SIBLING, replace(SIBLING, job="other")], SIBLING),
    ],
)
def test_confirming_sibling(confirmed: list[ConfirmedAlert], found: ConfirmedAlert | None) -> None:
    failing = ConfirmedAlert("pull / test (default, linux.2xlarge)", 12, "c" * 40, (LINE, "another line"))
    assert confirming_sibling(10, 12, failing, confirmed) == found


@pytest.mark.parametrize(
    ("job", "found"),
    [
        # The same job in another configuration: one breakage fails both alike.
        ("pull / test (default, linux.2xlarge)", SIBLING),
        # Another job, or a name without a configuration: nothing says they fail alike.
        ("pull / build (default, linux.2xlarge)", None),
        ("trunk / test (default, linux.2xlarge)", None),
        ("pull / test", None),
        ("Distributed Tests", None),
    ],
)
def test_without_failure_lines_a_sibling_is_the_job_in_another_configuration(
    job: str, found: ConfirmedAlert | None
) -> None:
    failing, lineless = ConfirmedAlert(job, 12, "c" * 40, ()), replace(SIBLING, failure_lines=())
    assert confirming_sibling(10, 12, failing, [lineless], lines=False) == (found and lineless)
    # Where failures carry lines, a job without one shares none.
    assert confirming_sibling(10, 12, failing, [SIBLING]) is None


SHARDS = ("test (default, 1, 2, linux.2xlarge)", "test (default, 2, 2, linux.2xlarge)")


@pytest.mark.parametrize("role", list(Role))
def test_rerun_the_shard_that_failed_on_the_culprit(role: Role) -> None:
    assert shard_to_rerun(role, SHARDS[1], SHARDS) == SHARDS[1]
    assert shard_to_rerun(role, None, SHARDS) == SHARDS[0]  # none known: the first
    assert shard_to_rerun(role, None, ()) is None


def test_no_other_shard_stands_in_for_the_failing_one_on_the_last_pass() -> None:
    # The job passed on the last pass with its failing shard absent: the other shard passing
    # again would confirm a commit that may not have broken it.
    assert shard_to_rerun(Role.LAST_PASS, SHARDS[1], SHARDS[:1]) is None
    assert shard_to_rerun(Role.CULPRIT, SHARDS[1], SHARDS[:1]) == SHARDS[0]


def test_the_failing_shard_last_passed_on_the_newest_older_commit_it_passed() -> None:
    shard, other = SHARDS[1], SHARDS[0]
    passed, failed = CellState.PASS, CellState.FAIL
    assert shard_last_pass(shard, [{other: passed}, {shard: CellState.PENDING}, {shard: passed}]) == 2
    assert shard_last_pass(shard, [{shard: CellState.FLAKY}]) == 0
    assert shard_last_pass(shard, [{other: passed}, {shard: failed}, {shard: passed}]) is None
    assert shard_last_pass(shard, [{other: passed}]) is None
