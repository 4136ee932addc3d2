"""Evaluator: re-derive a job's alert from its stored cells whenever one of them changes.

Per changed cell: one Query, paged lazily, reads the job's cells newest first only as far as
the rule walks; for a firing job whose changed cells in the batch are all newer than its
alert's newest failure, only as far as that failure (its run has only grown, or the whole
walk decides). Per trunk and invocation: one GetItem of the trunk's state (recent commits,
failing jobs); an alert item is read only for a job that fires or was firing. It is written
only when its content changes, with a version check, in one transaction with the trunk's
set of failing jobs (K of design.md §3.3). Each invocation then counts its records towards
their poll's tick, once per record (a retried or bisected batch counts none twice). The one
that counts a poll's last record re-judges the trunk's other firing jobs at the poll's time
(what the scheduled sweep would change at that instant: failure age, staleness) and only
then settles the tick, so the notification that the settled tick runs sees the state at the
tick's end; the sweep the same schedule triggers then finds nothing new at that instant.
Only the evaluator writes alert items and the failing set. After each judgement, `fixed`
records the breakage a pass fixed before it could page, if any (design.md §3.7).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from aws_lambda_powertools import Logger

from trunkwatch import sources
from trunkwatch.app import fixed, stream
from trunkwatch.app.confirm import AlertVerdict, confirm_culprit
from trunkwatch.app.trunk_reads import TrunkReads
from trunkwatch.domain.cells import CellState
from trunkwatch.domain.config import Deployment, RuleConfig
from trunkwatch.domain.job_alerts import AlertCommit, JobAlert
from trunkwatch.domain.rule import (
    JobJudgement,
    clock_may_change_judgement,
    extend_firing_run,
    in_window,
    judge_job,
    may_change_judgement,
)
from trunkwatch.domain.verdict import CulpritVerdict
from trunkwatch.storage.errors import Conflict
from trunkwatch.storage.port import Storage

JOB_WINDOW = 100  # cells of one job the rule may walk back through
PAGE_SIZE = 8  # cells per Query page: a passing job's judgement needs the first few
# A firing job's judgement walks its whole run of failures (to the pass before it, the culprit's
# bound), which lasts days on a real trunk: one page for the window instead of a dozen.
FIRING_PAGE_SIZE = JOB_WINDOW
VERSION_RETRIES = 3

logger = Logger(child=True)


def evaluate_job(
    trunk: str,
    job: str,
    rule: RuleConfig,
    now: datetime,
    reads: TrunkReads,
    oldest_change: int | None = None,
    *,
    lines: bool,
) -> JobJudgement:
    """Judge `job` from its stored cells and store the resulting alert state. `oldest_change`
    is the lowest seq among the job's cells that changed since its last judgement (None:
    not known); when it is above a firing alert's newest failure, only the cells above that
    failure are read. `lines`: the trunk's failures carry failure lines
    (`sources.reports_failure_lines`), so that a failure without them tells something."""
    for attempt in range(VERSION_RETRIES):
        judgement = _extended(trunk, job, rule, now, reads, oldest_change)
        if judgement is None:
            page_size = FIRING_PAGE_SIZE if reads.failing(job) else PAGE_SIZE
            stored = reads.storage.cells.newest_first(trunk, job, JOB_WINDOW, page_size)
            judgement = judge_job(job, stored, reads.recent_seqs, rule, now)
        try:
            _store_judgement(trunk, judgement, rule, now, reads, lines)
            return judgement
        except Conflict:
            # Another evaluation of the same job won the race: re-read and re-judge.
            reads.forget()
            if attempt == VERSION_RETRIES - 1:
                raise
    raise AssertionError("unreachable")


def _extended(
    trunk: str, job: str, rule: RuleConfig, now: datetime, reads: TrunkReads, oldest_change: int | None
) -> JobJudgement | None:
    """The firing run extended by the cells above its alert's newest failure, when no cell at
    or below that failure changed (None: the whole walk decides)."""
    if oldest_change is None or not reads.failing(job):
        return None
    alert = reads.alert(job)
    if alert is None or alert.status != "firing" or oldest_change <= alert.newest_fail.seq:
        return None
    # The new cells of a batch are few: small pages, read only as far as the stored failure.
    stored = reads.storage.cells.newest_first(trunk, job, JOB_WINDOW, PAGE_SIZE)
    urls = list(alert.failing_urls)
    return extend_firing_run(job, stored, alert.newest_fail.seq, urls, reads.recent_seqs, rule, now)


def oldest_changes(records: list[dict[str, Any]]) -> dict[tuple[str, str], int | None]:
    """Per (trunk, job), the lowest seq among the batch's changed cells (None if a record has
    no seq: not known): the batch judges a job at its first record, so whether the stored
    run may be extended depends on them all."""
    oldest: dict[tuple[str, str], int | None] = {}
    for record in records:
        image = stream.image(record)
        if not image:
            continue
        key, seq = (str(image.get("trunk")), str(image.get("job"))), str(image.get("seq"))
        if key in oldest and oldest[key] is None:
            continue
        earlier = oldest.get(key)
        oldest[key] = None if not seq.isdigit() else int(seq) if earlier is None else min(int(seq), earlier)
    return oldest


@dataclass
class BatchEvaluation:
    """One evaluator invocation over a batch of cell stream records."""

    storage: Storage
    deployment: Deployment
    now: datetime
    oldest_change: dict[tuple[str, str], int | None]  # oldest_changes() of the batch
    reads: dict[str, TrunkReads] = field(default_factory=dict)
    judged: set[tuple[str, str]] = field(default_factory=set)
    unchanged: int = 0  # records that could not change their job's judgement

    def cell(self, image: dict[str, Any], old_image: dict[str, Any]) -> None:
        """Evaluate the job of one record's new image (once per job per batch: the
        evaluation reads every stored cell, so a second record of the job adds nothing),
        unless the change cannot alter the job's judgement (no read at all)."""
        trunk_id, job = str(image["trunk"]), str(image["job"])
        if (trunk_id, job) in self.judged:
            return
        trunk = self.deployment.trunk(trunk_id)
        if trunk is None:
            return
        rule = self.deployment.rule_for(trunk)
        if not rule.in_scope(job):
            return
        reads = self.reads.setdefault(trunk_id, TrunkReads(self.storage, trunk_id))
        old = CellState(old_image["state"]) if old_image else None
        prior = image.get("prior_seq")
        fresh_before = prior is not None and in_window(int(prior), reads.recent_seqs, rule)
        # A job whose newest failures have not paged is judged like a firing one: a pass may fix it.
        watched = reads.failing(job) or fixed.unpaged(reads, job)
        if not may_change_judgement(old, CellState(image["state"]), watched, fresh_before):
            self.unchanged += 1
            return
        changed_from = self.oldest_change.get((trunk_id, job))
        judgement = evaluate_job(
            trunk_id, job, rule, self.now, reads, changed_from, lines=sources.reports_failure_lines(trunk)
        )
        self.judged.add((trunk_id, job))
        fixed.after_judgement(trunk, judgement, self.now, reads, changed_from, JOB_WINDOW, PAGE_SIZE)

    def settle(self, records: list[dict[str, Any]], failed: set[str]) -> list[str]:
        """Count the records Lambda will not redeliver (those before the first failure)
        towards their polls' ticks; returns the polls this settled."""
        done: list[dict[str, Any]] = []
        for record in records:
            if record["dynamodb"]["SequenceNumber"] in failed:
                break
            done.append(record)
        # A log line, not metrics: nothing alarms on these counts, and a custom metric is a
        # monthly fee.
        logger.info(
            "cells evaluated", extra={"cells_evaluated": len(done), "cells_unchanged": self.unchanged}
        )
        groups: dict[tuple[str, str], list[str]] = defaultdict(list)
        for record in done:
            image = record["dynamodb"].get("NewImage") or {}
            poll = (image.get("poll") or {}).get("S")
            if poll:
                groups[(image["trunk"]["S"], poll)].append(record["dynamodb"]["SequenceNumber"])
        # A tick counts stream records, not batches: a retried or bisected batch adds none twice.
        counted = [
            (trunk, poll)
            for (trunk, poll), sequences in groups.items()
            if self.storage.ticks.count(trunk, poll, sequences, self.now)
        ]
        settled = []
        for trunk_id, poll in counted:
            # What changes with the clock alone is re-judged at the poll's time before its
            # tick settles, so that the tick's messages reflect the state at its end.
            self.rejudge_firing(trunk_id)
            if self.storage.ticks.settle(trunk_id, poll, self.now):
                settled.append(poll)
        return settled

    def rejudge_firing(self, trunk_id: str) -> int:
        """Re-judge the trunk's firing jobs that this invocation has not judged and whose
        judgement the clock may have changed (failure age, staleness); returns how many."""
        trunk = self.deployment.trunk(trunk_id)
        if trunk is None:
            return 0
        reads = self.reads.setdefault(trunk_id, TrunkReads(self.storage, trunk_id))
        rule, lines = self.deployment.rule_for(trunk), sources.reports_failure_lines(trunk)
        return rejudge_firing(trunk_id, rule, self.now, reads, self.judged, lines=lines)


def rejudge_firing(
    trunk: str,
    rule: RuleConfig,
    now: datetime,
    reads: TrunkReads,
    judged: set[tuple[str, str]],
    *,
    lines: bool,
) -> int:
    """Re-judge the firing jobs of `trunk` at `now` (but those in `judged`, adding them) whose
    judgement the clock may have changed; the others' cells are not read. Returns how many."""
    rejudged = 0
    for alert in reads.storage.alerts.of_trunk(trunk, firing_only=True):
        if (trunk, alert.job) in judged or not _clock_may_change(alert, rule, now, reads):
            continue
        evaluate_job(trunk, alert.job, rule, now, reads, lines=lines)
        judged.add((trunk, alert.job))
        rejudged += 1
    return rejudged


def _clock_may_change(alert: JobAlert, rule: RuleConfig, now: datetime, reads: TrunkReads) -> bool:
    """Also an alert whose culprit is not confirmed yet: a rerun's result may have come in
    (one that changes no cell, like a culprit failing again, causes no evaluation)."""
    if rule.confirms and alert.culprit_verdict in (None, CulpritVerdict.UNCONFIRMED):
        return True
    newest_fail = alert.newest_fail
    return clock_may_change_judgement(newest_fail.seq, newest_fail.time, reads.recent_seqs, rule, now)


def _store_judgement(
    trunk: str, judgement: JobJudgement, rule: RuleConfig, now: datetime, reads: TrunkReads, lines: bool
) -> None:
    if not judgement.firing and not reads.failing(judgement.job):
        return  # nothing fires and nothing is open to resolve: no alert read at all
    stored = reads.alert(judgement.job)
    was_firing = stored is not None and stored.status == "firing"
    if not judgement.firing:
        if stored is not None and was_firing:
            _resolve(trunk, stored, rule, now, reads, lines)
        return
    alert = firing_alert(judgement, stored)
    if rule.confirms:
        alert = _with_verdict(confirm_culprit(reads.storage, trunk, rule, alert, now, lines=lines), alert)
    if was_firing and alert == stored:
        return
    # Only when the alert is written anyway: a copy that outlives the culprit's commit item.
    culprit = reads.storage.commits.mark(trunk, alert.culprit.seq)
    if culprit is not None:
        alert = replace(alert, culprit_autoreverted_by=culprit.autoreverted_by)
    reads.remember(
        reads.storage.alerts.save_with_failing_set(trunk, alert, now_firing=None if was_firing else True)
    )


def _resolve(
    trunk: str, stored: JobAlert, rule: RuleConfig, now: datetime, reads: TrunkReads, lines: bool
) -> None:
    resolved = replace(stored, status="resolved", ends_at=now)
    if rule.confirms and stored.culprit_verdict is not None:
        # The results that ended it (a culprit passing on rerun) are its last verdict.
        verdict = confirm_culprit(reads.storage, trunk, rule, stored, now, plan=False, lines=lines)
        resolved = _with_verdict(verdict, resolved)
    reads.remember(reads.storage.alerts.save_with_failing_set(trunk, resolved, now_firing=False))


def firing_alert(judgement: JobJudgement, stored: JobAlert | None) -> JobAlert:
    """The alert a firing `judgement` makes of the `stored` one (None: none yet); what it does
    not judge (the culprit's verdict, its revert) stays as stored. A stored firing alert is
    the same episode: it keeps its start, and its culprit once the cells that showed it are
    gone (`_kept_culprit`)."""
    culprit = judgement.culprit
    assert culprit is not None
    first_fail, newest_fail = AlertCommit.of(culprit.first_fail), AlertCommit.of(judgement.failures[0])
    alert = replace(
        stored
        or JobAlert(judgement.job, "firing", first_fail.time, judgement.streak, first_fail, newest_fail),
        status="firing",
        starts_at=first_fail.time,
        ends_at=None,
        streak=judgement.streak,
        first_fail=first_fail,
        last_pass=AlertCommit.of(culprit.last_pass) if culprit.last_pass else None,
        newest_fail=newest_fail,
        failure_lines=judgement.failures[0].failure_lines,
        failing_urls=tuple(judgement.failing_urls[:10]),
    )
    if stored is None or stored.status != "firing":
        return alert
    return _kept_culprit(stored, judgement, replace(alert, starts_at=stored.starts_at))


def _kept_culprit(stored: JobAlert, judgement: JobJudgement, alert: JobAlert) -> JobAlert:
    """The episode keeps its culprit once the cells that showed it are gone (expired, or
    beyond JOB_WINDOW): a walk that ran out of cells (no last pass) and starts no earlier
    than the stored first failure cannot see where the run began, so the stored range
    stands and the streak counts on from it."""
    assert judgement.culprit is not None
    if not judgement.culprit.clipped or stored.first_fail.seq > judgement.culprit.first_fail.seq:
        return alert
    newer = sum(1 for cell in judgement.failures if cell.seq > stored.newest_fail.seq)
    return replace(
        alert, first_fail=stored.first_fail, last_pass=stored.last_pass, streak=stored.streak + newer
    )


def _with_verdict(verdict: AlertVerdict, alert: JobAlert) -> JobAlert:
    """`alert` saying the verdict on its culprit."""
    return replace(
        alert,
        culprit_verdict=verdict.decision.verdict.value,
        verdict_reason=verdict.decision.reason,
        confirmed_culprit=verdict.culprit,
    )
