"""Breakages fixed before anyone was paged (design.md §3.7), found as the evaluator judges a
job: read, decide (`rule.fixed_run`, `recording`), write; on trunks whose cells carry
failure lines only (without them, two flaky failures in a row look alike).

A job whose newest failures (two or more commits of one breakage) have not paged is in its
trunk's unpaged set: a pass on it is then judged too, the pass that may fix it. After a
judgement that does not fire, the job's cells are read again (one lazily paged Query, no
further than the changed cells need) for the newest run a pass ended, only when the change
may have ended one: a pass on an unpaged job, or a failure below the job's newest passes. A
run that overlaps the job's alert fired: it paged. Any other is recorded, once per job and
culprit: recording it again (a third failure came in) replaces it, and a record of the same
run seen shorter, whose culprit an older failure has since moved, is removed with it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime

from trunkwatch import sources
from trunkwatch.app.trunk_reads import TrunkReads
from trunkwatch.domain.config import TrunkConfig
from trunkwatch.domain.episodes import FixedEpisode
from trunkwatch.domain.job_alerts import AlertCommit, JobAlert
from trunkwatch.domain.rule import FIXED_MIN_FAILURES, FixedRun, JobJudgement, breakage_run, fixed_run


def unpaged(reads: TrunkReads, job: str) -> bool:
    """Whether the job's newest failures have not paged: every change of its cells is judged."""
    return job in reads.state.unpaged


def after_judgement(
    trunk: TrunkConfig,
    judgement: JobJudgement,
    now: datetime,
    reads: TrunkReads,
    changed_from: int | None,
    window: int,
    page_size: int,
) -> FixedEpisode | None:
    """Keep the trunk's unpaged set, and record the breakage the judged change fixed, if any
    (returned). `changed_from`: the lowest seq among the job's changed cells (None: not
    known); `window`, `page_size`: how the evaluator reads a job's cells."""
    if not sources.reports_failure_lines(trunk):
        return None  # two failing commits without lines may as well be two flaky failures
    head = () if judgement.firing else breakage_run(judgement.failures)
    _mark(reads, judgement.job, len(head) >= FIXED_MIN_FAILURES)
    if judgement.firing or not _may_have_ended_a_run(judgement, changed_from):
        return None
    cells = reads.storage.cells.newest_first(trunk.trunk_id, judgement.job, window, page_size)
    run = fixed_run(cells, changed_from)
    if run is None or _fired(run, reads.alert(judgement.job)):
        return None
    episode = FixedEpisode(
        job=judgement.job,
        culprit=AlertCommit.of(run.culprit),
        fix=AlertCommit.of(run.fix),
        failed_commits=len(run.failures),
        detected_at=now,
        last_pass=AlertCommit.of(run.last_pass) if run.last_pass is not None else None,
        failure_lines=run.failure_lines,
    )
    alerts = reads.storage.alerts
    written, supersedes = recording(episode, alerts.fixed(trunk.trunk_id))
    if written is not None:
        alerts.save_fixed(trunk.trunk_id, written, supersedes)
    return written


def _may_have_ended_a_run(judgement: JobJudgement, changed_from: int | None) -> bool:
    """A change among the job's newest failures ended no run below them (one found before
    is recorded already); any other change may have: a pass above them, or a failure
    below the job's newest passes."""
    newest = judgement.failures
    return changed_from is None or not newest or changed_from < newest[-1].seq


def _fired(run: FixedRun, alert: JobAlert | None) -> bool:
    return alert is not None and run.overlaps(alert.first_fail.seq, alert.newest_fail.seq)


def _mark(reads: TrunkReads, job: str, unpaged_now: bool) -> None:
    """Write the job's place in the unpaged set only when it changes."""
    if (job in reads.state.unpaged) == unpaged_now:
        return
    reads.storage.trunks.mark_unpaged(reads.trunk, job, unpaged_now)
    (reads.state.unpaged.add if unpaged_now else reads.state.unpaged.discard)(job)


def recording(
    episode: FixedEpisode, stored: Sequence[FixedEpisode]
) -> tuple[FixedEpisode | None, list[FixedEpisode]]:
    """What to write for a breakage found again (pure): the episode, keeping when its job and
    culprit were first recorded (None: stored as it is), and the job's other records of the
    same run (an earlier, shorter sight of it: their commits overlap) it supersedes."""
    same = [old for old in stored if (old.job, old.culprit.sha) == (episode.job, episode.culprit.sha)]
    if same:
        episode = replace(episode, detected_at=same[0].detected_at)
        if same[0] == episode:
            return None, []
    supersedes = [
        old
        for old in stored
        if old.job == episode.job
        and old.culprit.sha != episode.culprit.sha
        and old.culprit.seq < episode.fix.seq
        and episode.culprit.seq < old.fix.seq
    ]
    return episode, supersedes
