"""The consecutive-failure rule (design.md §3.2, §3.3): pure functions of stored cells and the clock.

The judgement of a job depends only on its cells and `now`, never on the order in which
cells arrived, so re-delivered or reordered stream records cannot change it.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from trunkwatch.domain.cells import CellState, StoredCell
from trunkwatch.domain.config import RuleConfig

_JUDGED_STATES = {CellState.PASS, CellState.FLAKY, CellState.FAIL}


@dataclass(frozen=True)
class Culprit:
    """The commit range that broke the job: last pass before the run and its first failure."""

    first_fail: StoredCell
    last_pass: StoredCell | None  # None: the window does not reach back to a pass (clipped)

    @property
    def clipped(self) -> bool:
        return self.last_pass is None


@dataclass(frozen=True)
class JobJudgement:
    job: str
    firing: bool
    # Fails in the run that qualifies (or the ongoing run when none qualifies).
    streak: int
    failures: tuple[StoredCell, ...]  # that run, newest first
    culprit: Culprit | None
    stale: bool = False
    too_old: bool = False
    # Job URLs of the run's cells beyond `failures`, newest first: an extended run's stored ones.
    older_urls: tuple[str, ...] = ()

    @property
    def failing_urls(self) -> tuple[str, ...]:
        """The run's job URLs, newest first."""
        return tuple(cell.url for cell in self.failures if cell.url) + self.older_urls


def judge_job(
    job: str,
    cells: Iterable[StoredCell],
    recent_seqs: Sequence[int],
    rule: RuleConfig,
    now: datetime,
) -> JobJudgement:
    """Decide whether `job` is failing on trunk.

    `cells` are the job's stored cells, newest commit first; the walk takes only as many as
    the decision needs, so a lazily paged Query reads little for a passing job.
    `recent_seqs` are the seqs of the trunk's newest commits that ran any job (staleness).
    """
    cells = iter(cells)
    newest = next(cells, None)
    # Cells come newest first, so the job has a cell in the window iff its newest one is.
    stale = not in_window(newest.seq if newest else None, recent_seqs, rule)
    walked = _walk(
        (c for c in itertools.chain([newest] if newest else [], cells) if c.state in _JUDGED_STATES), rule
    )
    failures = walked.qualifying if walked.qualifying is not None else walked.ongoing
    culprit = None
    if failures:
        last_pass = walked.after if walked.qualifying is not None else walked.after_ongoing
        culprit = Culprit(first_fail=failures[-1], last_pass=last_pass)
    newest_fail = walked.newest_fail
    too_old = newest_fail is not None and now - newest_fail.commit.time >= rule.max_failure_age
    return JobJudgement(
        job=job,
        firing=walked.qualifying is not None and not too_old and not stale,
        streak=len(failures),
        failures=tuple(failures),
        culprit=culprit,
        stale=stale,
        too_old=too_old,
    )


def extend_firing_run(
    job: str,
    cells: Iterable[StoredCell],
    newest_fail_seq: int,
    stored_urls: Sequence[str],
    recent_seqs: Sequence[int],
    rule: RuleConfig,
    now: datetime,
) -> JobJudgement | None:
    """A firing job's judgement from its newest cells down to the newest failure its alert
    records (`newest_fail_seq`, with the run's job URLs `stored_urls`), valid only when none
    of its cells at or below that seq changed since the alert was derived. If every pass,
    flaky or fail cell above it fails and it still fails, the run that fired has only grown:
    `failures` are its cells down to that failure and the culprit is clipped there (the
    alert keeps its stored culprit and counts its streak on from the stored one), so the
    walk costs the new cells, not the run's length. None when the run did not simply grow:
    `judge_job` decides."""
    cells = iter(cells)
    newest = next(cells, None)
    stale = not in_window(newest.seq if newest else None, recent_seqs, rule)
    failures: list[StoredCell] = []
    for cell in itertools.chain([newest] if newest else [], cells):
        if cell.state not in _JUDGED_STATES:
            continue
        # A pass or flaky cell above the failure ends the run; a cell below it means the
        # failure no longer fails (or is gone): either way the whole walk decides.
        if cell.state != CellState.FAIL or cell.seq < newest_fail_seq:
            return None
        failures.append(cell)
        if cell.seq == newest_fail_seq:
            break
    else:
        return None
    too_old = now - failures[0].commit.time >= rule.max_failure_age
    # The stored URLs start with the newest failure's own, which `failures` ends with.
    older_urls = tuple(stored_urls[1:] if failures[-1].url else stored_urls)
    return JobJudgement(
        job=job,
        firing=not too_old and not stale,
        streak=len(failures),
        failures=tuple(failures),
        culprit=Culprit(first_fail=failures[-1], last_pass=None),
        stale=stale,
        too_old=too_old,
        older_urls=older_urls,
    )


@dataclass
class _Walk:
    ongoing: list[StoredCell] = field(default_factory=list)  # the fails at the head
    after_ongoing: StoredCell | None = None  # the pass that ends them
    qualifying: list[StoredCell] | None = None
    after: StoredCell | None = None  # the pass that ends the qualifying run (None: clipped)
    newest_fail: StoredCell | None = None


def _walk(cells: Iterator[StoredCell], rule: RuleConfig) -> _Walk:
    """Walk newest to oldest: the first run of `failures_to_open` fails that comes before
    any run of `passes_to_close` passes (TestGrid-style hysteresis), and the ongoing run.
    Stops at the first cell that settles both."""
    walked = _Walk()
    run: list[StoredCell] = []
    passes = 0
    at_head = True
    for cell in cells:
        if cell.state == CellState.FAIL:
            walked.newest_fail = walked.newest_fail or cell
            if passes:
                run = []
            passes = 0
            run.append(cell)
            if at_head:
                walked.ongoing.append(cell)
            continue
        if at_head:
            walked.after_ongoing, at_head = cell, False
        if len(run) >= rule.failures_to_open:
            walked.qualifying, walked.after = run, cell
            return walked
        run = []
        passes += 1
        if passes >= rule.passes_to_close:
            return walked
    if len(run) >= rule.failures_to_open:
        walked.qualifying = run
    return walked


# A breakage fixed before it could page failed at least this many commits of a job in a row.
FIXED_MIN_FAILURES = 2


@dataclass(frozen=True)
class FixedRun:
    """A job's run of failing commits that a pass on a newer commit ended (design.md §3.7):
    a breakage fixed before the rule could page it, unless that run fired (`overlaps` the
    range of the job's alert)."""

    failures: tuple[StoredCell, ...]  # newest first, at least FIXED_MIN_FAILURES
    fix: StoredCell  # the first commit that passed after them
    last_pass: StoredCell | None  # the pass before them; None: a failure of another cause, or none read
    failure_lines: tuple[str, ...] = ()  # the lines its failures share (where they have lines)

    @property
    def culprit(self) -> StoredCell:
        return self.failures[-1]

    def overlaps(self, first_seq: int, last_seq: int) -> bool:
        """Whether the run shares a commit with the range `first_seq`..`last_seq` (an alert's
        first and newest failure: the run fired)."""
        return first_seq <= self.failures[0].seq and last_seq >= self.culprit.seq


def breakage_run(failures: Iterable[StoredCell]) -> tuple[StoredCell, ...]:
    """The leading failures (newest first, consecutive failing commits) that one breakage can
    explain: each shares a failure line with the others, so that two flaky failures in a row
    are not one; a failure without any (a lost runner, a timeout) ends the run."""
    run = _Run()
    for cell in failures:
        if not run.takes(cell):
            break
    return tuple(run.cells)


def fixed_run(cells: Iterable[StoredCell], changed_from: int | None) -> FixedRun | None:
    """The newest run of at least FIXED_MIN_FAILURES failing commits (a `breakage_run`) below
    the job's newest passes, ended by the first of them: the run a pass fixed. `cells` come
    newest first (pending and no-data cells are skipped, flaky counts as a pass); the
    failures at the job's newest end, if any, are not ended and are stepped over.
    `changed_from` is the lowest seq among the cells changed since the job was last judged
    (None: not known): a run whose fix is older than every change was there before, so the
    walk stops at a pass older than it, reading no further than the decision needs."""
    fix: StoredCell | None = None
    run = _Run()
    for cell in cells:
        if cell.state not in _JUDGED_STATES:
            continue
        if cell.state != CellState.FAIL:
            if fix is not None and run.cells:
                return run.fixed(fix, last_pass=cell)
            if changed_from is not None and cell.seq < changed_from:
                return None
            fix = cell
        elif fix is not None and not run.takes(cell):
            # A failure of another cause (a flaky one) below the run: no pass bounds its start.
            return run.fixed(fix, last_pass=None)
        # (A failure above every pass is the job's newest: nothing ended it.)
    return run.fixed(fix, last_pass=None) if fix is not None else None


@dataclass
class _Run:
    """Failures of one breakage, newest first, as a walk meets them."""

    cells: list[StoredCell] = field(default_factory=list)
    shared: set[str] | None = None  # the failure lines they all share (None: no cell yet)

    def takes(self, cell: StoredCell) -> bool:
        lines = set(cell.failure_lines)
        common = lines if self.shared is None else self.shared & lines
        if not common:
            return False
        self.shared = common
        self.cells.append(cell)
        return True

    def fixed(self, fix: StoredCell, last_pass: StoredCell | None) -> FixedRun | None:
        if len(self.cells) < FIXED_MIN_FAILURES:
            return None
        return FixedRun(tuple(self.cells), fix, last_pass, tuple(sorted(self.shared or ())))


def in_window(seq: int | None, recent_seqs: Sequence[int], rule: RuleConfig) -> bool:
    """Whether a job whose newest cell is at `seq` is not stale: it has a cell among the
    trunk's newest `stale_after_commits` commits that ran any job (or there are none yet)."""
    window = sorted(recent_seqs, reverse=True)[: rule.stale_after_commits]
    return not window or (seq is not None and seq >= window[-1])


def may_change_judgement(old: CellState | None, new: CellState, firing: bool, fresh_before: bool) -> bool:
    """Whether a cell going from `old` (None: a new cell) to `new` can change its job's
    judgement; when it cannot, the evaluator reads nothing. For a job that is not firing:
    a pass, flaky or pending cell can only end runs of failures, never start one, so the
    judgement stays unless the change removes a pass or flaky cell (runs may merge) or the new
    cell ends the job's staleness (`fresh_before`: it already had a cell in the window).
    A firing job is re-judged on every change but a new pending cell (a commit whose run has
    not finished): the walk skips it and a firing job is in the window already."""
    if firing:
        return not (old is None and new == CellState.PENDING)
    if new not in _NEVER_FAILING:
        return True
    if old is None:
        return not fresh_before
    return old not in _NEVER_FAILING or (old != CellState.PENDING and new == CellState.PENDING)


_NEVER_FAILING = {CellState.PENDING, CellState.PASS, CellState.FLAKY}


def clock_may_change_judgement(
    newest_fail_seq: int,
    newest_fail_time: datetime,
    recent_seqs: Sequence[int],
    rule: RuleConfig,
    now: datetime,
) -> bool:
    """Whether a firing job whose cells have not changed can be judged differently at `now`
    (the sweep's question): only if its failures may have aged out or its cells may have
    left the staleness window. Asked of the newest failure its alert records, which is no
    newer than the walk's newest failure nor than the job's newest cell, so a no is exact
    and the job need not be read."""
    return now - newest_fail_time >= rule.max_failure_age or not in_window(newest_fail_seq, recent_seqs, rule)


def trunk_alertname(failing_jobs: int, rule: RuleConfig) -> str | None:
    """design.md §3.3: no alert, TrunkBroken (1..band) or TrunkBadlyBroken (> band)."""
    if failing_jobs == 0:
        return None
    return "TrunkBroken" if failing_jobs <= rule.trunk_band_max_jobs else "TrunkBadlyBroken"


def source_down(failing_since: datetime | None, now: datetime, rule: RuleConfig) -> bool:
    """design.md §3.5: the trunk's polls have failed, with no success in between, for at least
    `source_down_after` counted from the first failed poll."""
    return failing_since is not None and now - failing_since >= rule.source_down_after


def webhooks_down(last_delivery: datetime | None, missed_at: datetime, rule: RuleConfig) -> bool:
    """The poll found results no delivery brought at `missed_at`, and no delivery came for at
    least `webhooks_down_after` before then (or none ever did)."""
    return last_delivery is None or missed_at - last_delivery >= rule.webhooks_down_after
