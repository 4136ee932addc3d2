"""Confirmation by reruns (`confirm: rerun`, design.md §3.6): the job alert's culprit judged by
re-running the job on the last pass and on the culprit (domain/verdict.py).

Two halves, each where its data is:

- the evaluator (`confirm_culprit`), when it stores a firing alert, reads the episode's
  records (and what else the verdict needs), decides the verdict from them alone (`alert_verdict`),
  then plans the reruns the episode still wants (`plan_reruns`, within the episode's 2 and
  the trunk's hourly cap) as records without a request, counted as planned in the verdict;
- ingest (`advance_reruns`), which holds the source's snapshot with the CI's job ids, sends
  the planned requests (a refused one again at the next polls, up to `MAX_TRIES`; none for
  a culprit whose failure is already a failed retry: that retry is its rerun), and records
  a rerun's result once a newer attempt of that job on that commit has finished.
  It runs before the poll writes its cells, so the evaluation they cause sees the results;
  a result that changes no cell (a last pass passing again, a culprit failing again) is
  picked up by the re-judging of unconfirmed alerts at the poll's tick or the sweep.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from trunkwatch.domain.cells import CellState, JobRun, agent_failure, job_key, shard_state
from trunkwatch.domain.config import RuleConfig, TrunkConfig
from trunkwatch.domain.job_alerts import AlertCommit, JobAlert
from trunkwatch.domain.reruns import RerunRecord
from trunkwatch.domain.verdict import (
    ConfirmedAlert,
    CulpritVerdict,
    Evidence,
    Plan,
    Rerun,
    RerunStatus,
    Role,
    Suspect,
    VerdictDecision,
    confirming_sibling,
    decide,
    plan_reruns,
    shard_last_pass,
    shard_to_rerun,
)
from trunkwatch.sources.base import CommitRuns
from trunkwatch.storage.port import Storage

HOUR = timedelta(hours=1)
COMMITS_READ = 200  # newest commit items read to count a range's commits (ingest's COMMITS_KEPT)
MAX_TRIES = 3  # requests of one rerun (the first and two retries) before its failure stands
# A rerun without a result this long after it was planned is given up (its commit left the
# source's page, or its result never came): its verdict stays `unconfirmed`.
OPEN_FOR = timedelta(hours=12)

# A culprit record's reason when its failure was already a failed retry (no rerun sent).
FAILED_RETRY = "its failure is already a failed retry"
# Requests a rerun of a job's attempt (its `job_id`, on Buildkite its `build` too) from the
# trunk's CI; returns None when the CI accepted it, else why not.
RequestRerun = Callable[[JobRun], "str | None"]


def confirm_culprit(
    storage: Storage,
    trunk_id: str,
    rule: RuleConfig,
    alert: JobAlert,
    now: datetime,
    *,
    plan: bool = True,
    lines: bool = True,
) -> AlertVerdict:
    """The verdict on the culprit of `alert`'s episode: what it reads (gathered), the
    decision from that alone (`alert_verdict`), then the reruns the episode still wants, planned
    (unless `plan` is False: the episode is over). `lines`: the trunk's failures carry failure
    lines; where none do, a failure without them is no sign of an outage."""
    records = storage.reruns.of_episode(trunk_id, alert.job, alert.starts_at)
    suspect = suspect_of(alert, records, _unrun(storage, trunk_id, alert))
    wanted = _plan(storage, trunk_id, rule, suspect, records, now) if plan else Plan(())
    firing = (
        storage.alerts.of_trunk(trunk_id, firing_only=True)
        if _reads_firing(alert, suspect, records)
        else None
    )
    planned = planned_records(alert, suspect, wanted, now)
    verdict = alert_verdict(alert, suspect, [*records, *planned], firing, wanted, lines)
    for record in planned:
        storage.reruns.add(trunk_id, record, rule.retention)
    return verdict


@dataclass(frozen=True)
class AlertVerdict:
    """A job alert's verdict, and the culprit a sibling's reruns confirm for it
    (`JobAlert.confirmed_culprit`; None when its own reruns decide on its first failure)."""

    decision: VerdictDecision
    culprit: AlertCommit | None = None


def suspect_of(alert: JobAlert, records: list[RerunRecord], unrun: int) -> Suspect:
    """The suspect the episode's first reruns were planned for (a last pass that fails on
    rerun moves the range back; the verdict is about the first suspect), else the alert's
    own. `unrun`: the commits between the alert's range's ends without a result of the job
    (they count while the range is still the suspect's)."""
    first_fail, last_pass = alert.first_fail, alert.last_pass
    if not records:
        return Suspect(alert.job, first_fail.sha, last_pass.sha if last_pass else None, unrun)
    first = records[0]
    same = (first.culprit_sha, first.last_pass_sha) == (first_fail.sha, last_pass and last_pass.sha)
    suspect = Suspect(alert.job, first.culprit_sha, first.last_pass_sha, unrun if same else 0)
    moved = next((r.sha for r in records if r.role == Role.LAST_PASS and r.sha != r.last_pass_sha), None)
    if moved is None:
        return suspect
    # The failing shard is rerun where it last passed, before the last pass (which it did not
    # run on): that commit is one of the range now.
    return replace(suspect, last_pass_sha=moved, unrun_between=suspect.unrun_between + 1)


def planned_records(alert: JobAlert, suspect: Suspect, wanted: Plan, now: datetime) -> list[RerunRecord]:
    """The records of the reruns `wanted` asks for, not requested yet (ingest sends them)."""
    return [
        RerunRecord(
            job=alert.job,
            episode=alert.starts_at,
            role=request.role.value,
            sha=request.sha,
            culprit_sha=suspect.culprit_sha,
            last_pass_sha=suspect.last_pass_sha,
            planned_at=now,
        )
        for request in wanted.requests
    ]


def _reads_firing(alert: JobAlert, suspect: Suspect, records: list[RerunRecord]) -> bool:
    """Whether the verdict needs the trunk's firing alerts: without failure lines, for the
    other jobs failing on its runner; once the job's own reruns say its range broke it but
    it did not run on every commit of the range, for the other jobs' confirmed culprits."""
    if not alert.failure_lines and runner_of(alert.job):
        return True
    last_rerun = _reruns(records).get(Role.LAST_PASS)
    range_broke = (
        bool(suspect.unrun_between) and last_rerun is not None and last_rerun.status == RerunStatus.SUCCESS
    )
    return range_broke and alert.last_pass is not None


def alert_verdict(
    alert: JobAlert,
    suspect: Suspect,
    records: list[RerunRecord],
    firing: list[JobAlert] | None,
    wanted: Plan,
    lines: bool = True,
) -> AlertVerdict:
    """The verdict on `suspect` from the episode's rerun `records` (those planned now
    included) and the trunk's `firing` alerts (None: not read, `_reads_firing`), saying why
    nothing could be planned (`wanted`: the hourly cap, a clipped range)."""
    named = _confirmed_culprits(alert.job, firing or [])
    last_pass, first_fail = alert.last_pass, alert.first_fail
    failing = ConfirmedAlert(alert.job, first_fail.seq, first_fail.sha, alert.failure_lines)
    sibling = (
        confirming_sibling(last_pass.seq, first_fail.seq, failing, named, lines)
        if last_pass is not None and named
        else None
    )
    decision = decide(suspect, _evidence(alert, records, firing, sibling, lines))
    if not records and wanted.skipped:
        decision = VerdictDecision(
            decision.verdict, "; ".join(dict.fromkeys(reason for _, reason in wanted.skipped))
        )
    if decision.verdict == CulpritVerdict.FLAKY and suspect.culprit_sha != first_fail.sha:
        # The flaky suspect's rerun passed: the run now starts later, at a commit not rerun.
        reason = f"{decision.reason}; the run now starts at {first_fail.sha[:12]}, not rerun"
        decision = replace(decision, reason=reason)
    if sibling is None or decision.culprit_sha is None:
        return AlertVerdict(decision)
    culprit, reason = named[sibling]
    if sibling.job == alert.job:
        # Named by a sibling before: its reason (which sibling) stands.
        decision = replace(decision, reason=reason)
    if sibling.culprit_sha == first_fail.sha:
        return AlertVerdict(decision, first_fail)
    # The job did not run on the culprit: named as the sibling names it, without a run.
    return AlertVerdict(decision, replace(culprit, job_url=""))


def _reruns(records: list[RerunRecord]) -> dict[Role, Rerun]:
    """The episode's reruns by role (a failed retry, which no rerun was sent for, aside)."""
    return {Role(r.role): Rerun(RerunStatus(r.status), r.reason) for r in records if r.reason != FAILED_RETRY}


def _evidence(
    alert: JobAlert,
    records: list[RerunRecord],
    firing: list[JobAlert] | None,
    sibling: ConfirmedAlert | None,
    lines: bool,
) -> Evidence:
    by_role, runner = _reruns(records), runner_of(alert.job)
    # No failure lines, and other jobs on its runner failing without lines now: an outage.
    # Where no failure carries lines, a missing one tells nothing: the others' runs must
    # have begun where no one commit can have broken both jobs (disjoint ranges).
    no_lines = not alert.failure_lines
    peers = sum(
        1
        for other in firing or ()
        if other.job != alert.job
        and not other.failure_lines
        and runner_of(other.job) == runner
        and (lines or _apart(alert, other))
    )
    return Evidence(
        last_pass=by_role.get(Role.LAST_PASS),
        culprit=by_role.get(Role.CULPRIT),
        culprit_failed_retry=any(r.reason == FAILED_RETRY for r in records),
        no_failure_lines=no_lines,
        runner_peers_failing=peers if no_lines and runner else 0,
        runner=runner,
        lineless=not lines,
        agent_failure=agent_failure(alert.failure_lines) or "",
        sibling=sibling,
    )


def _apart(one: JobAlert, other: JobAlert) -> bool:
    """Whether the two runs' ranges (last pass, first failure] share no commit: no one
    commit can have broken both jobs."""
    return (one.last_pass is not None and other.first_fail.seq <= one.last_pass.seq) or (
        other.last_pass is not None and one.first_fail.seq <= other.last_pass.seq
    )


def _confirmed_culprits(job: str, firing: list[JobAlert]) -> dict[ConfirmedAlert, tuple[AlertCommit, str]]:
    """Other jobs' confirmed culprits, and this job's own once a sibling named it (so that
    it stands when the sibling resolves first), with the reason each was confirmed for."""
    return {
        ConfirmedAlert(alert.job, ref.seq, ref.sha, alert.failure_lines): (ref, alert.verdict_reason)
        for alert in firing
        if alert.culprit_verdict == CulpritVerdict.CONFIRMED
        and (ref := alert.confirmed_culprit if alert.job == job else alert.culprit) is not None
    }


_RUNNER = re.compile(r"\(([^()]*)\)$")


def runner_of(job: str) -> str:
    """The runner label a job key ends with (`test (default, linux.2xlarge)`: `linux.2xlarge`),
    or "" for a job that names none."""
    found = _RUNNER.search(job)
    if not found or "," not in found.group(1):
        return ""
    return found.group(1).rsplit(",", 1)[1].strip()


def _unrun(storage: Storage, trunk_id: str, alert: JobAlert) -> int:
    """The trunk's commits strictly between the alert's last pass and first failure, on
    which the job has no result (seqs may have gaps: counted, not subtracted; read only
    when there is room for one)."""
    if alert.last_pass is None or alert.first_fail.seq - alert.last_pass.seq <= 1:
        return 0
    low, high = alert.last_pass.seq, alert.first_fail.seq
    return sum(1 for c in storage.commits.newest(trunk_id, COMMITS_READ) if low < c.seq < high)


def _plan(
    storage: Storage,
    trunk_id: str,
    rule: RuleConfig,
    suspect: Suspect,
    records: list[RerunRecord],
    now: datetime,
) -> Plan:
    recent = storage.reruns.open(trunk_id, now - OPEN_FOR, now - HOUR)
    return plan_reruns(
        suspect,
        requested=frozenset(Role(r.role) for r in records),
        requested_this_hour=sum(1 for r in recent if r.planned_at > now - HOUR),
        hourly_cap=rule.reruns_per_hour,
    )


def requests_waiting(storage: Storage, trunk_id: str, last_poll: datetime | None, now: datetime) -> bool:
    """Whether a rerun request waits for the source's page: one planned since the last good
    poll (`last_poll`, none tried it yet) or a refused one due another try. The poll then
    reads the page even when it is unchanged, for the job ids the request needs: else a
    quiet trunk's reruns would wait for its next new result."""
    return any(
        waits_for_request(record, last_poll) for record in storage.reruns.open(trunk_id, now - OPEN_FOR, now)
    )


def waits_for_request(record: RerunRecord, last_poll: datetime | None) -> bool:
    """A rerun not requested yet that the next poll sends: planned since `last_poll` (the
    last poll that could have sent it; None: none), or refused with tries left."""
    if record.requested_at is not None or record.tries >= MAX_TRIES:
        return False
    if record.status == RerunStatus.PENDING:
        return last_poll is None or record.planned_at >= last_poll
    return record.status == RerunStatus.REQUEST_FAILED and record.tries > 0


def advance_reruns(
    storage: Storage,
    trunk: TrunkConfig,
    rule: RuleConfig,
    commits: Iterable[CommitRuns],
    request: RequestRerun,
    now: datetime,
) -> int:
    """Send the planned rerun requests and record the results the snapshot shows; returns
    how many reruns the CI accepted."""
    commits = list(commits)
    by_sha = {result.commit.sha: result.runs for result in commits}
    order = [result.commit.sha for result in commits]  # newest first
    accepted = 0
    reruns = storage.reruns.open(trunk.trunk_id, now - OPEN_FOR, now - HOUR)
    # Oldest plans first, an episode's last pass before its culprit (as `plan_reruns` asks).
    for record in sorted(reruns, key=lambda r: (r.planned_at, r.role != Role.LAST_PASS)):
        if record.status not in (RerunStatus.PENDING, RerunStatus.REQUEST_FAILED):
            continue
        runs = by_sha.get(record.sha)
        if runs is None:
            continue  # the commit is not on this page: the next one may show it
        if record.requested_at is None:
            if record.tries >= MAX_TRIES:
                continue
            updated = _request(record, runs, by_sha, order, request, rule, now)
            accepted += updated.status == RerunStatus.PENDING and updated.job_id is not None
        else:
            updated = _result(record, runs, rule)
        if updated != record:
            storage.reruns.update(trunk.trunk_id, updated, rule.retention)
    return accepted


def _request(
    record: RerunRecord,
    runs: tuple[JobRun, ...],
    by_sha: dict[str, tuple[JobRun, ...]],
    order: list[str],
    request: RequestRerun,
    rule: RuleConfig,
    now: datetime,
) -> RerunRecord:
    failing, run = _shard(record, runs, by_sha, rule)
    if run is None and failing is not None and any(job_key(r.name) == record.job for r in runs):
        # The failing shard did not run on the last pass: rerun it where it last passed.
        older = order[order.index(record.sha) + 1 :]
        states = [{r.name: shard_state(r, rule.cancelled) for r in by_sha[sha]} for sha in older]
        found = shard_last_pass(failing, states)
        if found is None:
            reason = f"the shard that failed on the culprit ({failing}) did not run on the last pass"
            return replace(record, status=RerunStatus.REQUEST_FAILED.value, reason=reason)
        record = replace(record, sha=older[found])
        runs = by_sha[record.sha]
        run = next(r for r in runs if r.name == failing)
    if run is None:
        reason = "no run of the job on that commit"
        return replace(record, status=RerunStatus.REQUEST_FAILED.value, reason=reason)
    state = shard_state(run, rule.cancelled)
    if record.role == Role.CULPRIT and state == CellState.FAIL and run.failed_before:
        # Its failure is already a retry that failed again: that is its rerun (none is sent).
        return replace(record, status=RerunStatus.FAILURE.value, shard=run.name, reason=FAILED_RETRY)
    if state == CellState.PENDING:
        # A newer attempt already runs: its result is the rerun's (never rerun it again).
        return replace(record, status=RerunStatus.PENDING.value, requested_at=now, shard=run.name, reason="")
    if run.job_id is None:
        reason = "the source gives no job id to rerun"
        return replace(record, status=RerunStatus.REQUEST_FAILED.value, reason=reason, tries=MAX_TRIES)
    refused = request(run)
    tries = record.tries + 1
    if refused is not None:
        return replace(record, status=RerunStatus.REQUEST_FAILED.value, reason=refused, tries=tries)
    return replace(
        record,
        status=RerunStatus.PENDING.value,
        requested_at=now,
        job_id=run.job_id,
        shard=run.name,
        reason="",
        tries=tries,
    )


def _shard(
    record: RerunRecord, runs: tuple[JobRun, ...], by_sha: dict[str, tuple[JobRun, ...]], rule: RuleConfig
) -> tuple[str | None, JobRun | None]:
    """The shard that failed on the culprit (or, while a newer attempt of it runs, that one;
    None when none is known), and the job's run to rerun on the record's commit
    (`shard_to_rerun`)."""
    mine = [run for run in runs if job_key(run.name) == record.job]
    states = [
        (run.name, shard_state(run, rule.cancelled))
        for run in by_sha.get(record.culprit_sha, runs)
        if job_key(run.name) == record.job
    ]
    failing = next((name for name, state in states if state == CellState.FAIL), None) or next(
        (name for name, state in states if state == CellState.PENDING), None
    )
    target = shard_to_rerun(Role(record.role), failing, [run.name for run in mine])
    return failing, next((run for run in mine if run.name == target), None)


def _result(record: RerunRecord, runs: tuple[JobRun, ...], rule: RuleConfig) -> RerunRecord:
    """The rerun's result once an attempt newer than the one it re-ran has finished."""
    run = next((run for run in runs if run.name == record.shard), None)
    if run is None or (record.job_id is not None and run.job_id == record.job_id):
        return record
    state = shard_state(run, rule.cancelled)
    if state in (CellState.PASS, CellState.FLAKY):
        return replace(record, status=RerunStatus.SUCCESS.value)
    if state == CellState.FAIL:
        return replace(record, status=RerunStatus.FAILURE.value)
    if state == CellState.NODATA:
        reason = f"the rerun ended {run.conclusion or 'without a result'}"
        return replace(record, status=RerunStatus.REQUEST_FAILED.value, reason=reason, tries=MAX_TRIES)
    return record  # still running
