"""The consecutive-failure rule (SPEC 3.2, 3.3): pure functions of stored cells and the clock.

The verdict for a job depends only on its cells and `now`, never on the order in which
cells arrived, so re-delivered or reordered stream records cannot change it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from trunkwatch.cells import CellState, Commit
from trunkwatch.config import RuleConfig

_VERDICT_STATES = {CellState.PASS, CellState.FLAKY, CellState.FAIL}


@dataclass(frozen=True)
class StoredCell:
    """A job's cell on one commit, as the evaluator reads it back."""

    seq: int
    state: CellState
    commit: Commit
    url: str = ""
    failure_lines: tuple[str, ...] = ()


@dataclass(frozen=True)
class Culprit:
    """The commit range that broke the job: last pass before the run and its first failure."""

    first_fail: StoredCell
    last_pass: StoredCell | None  # None: the window does not reach back to a pass (clipped)

    @property
    def clipped(self) -> bool:
        return self.last_pass is None


@dataclass(frozen=True)
class JobVerdict:
    job: str
    firing: bool
    # Fails in the run that qualifies (or the ongoing run when none qualifies).
    streak: int
    failures: tuple[StoredCell, ...]  # that run, newest first
    culprit: Culprit | None
    stale: bool = False
    too_old: bool = False


def judge_job(
    job: str,
    cells: Sequence[StoredCell],
    recent_seqs: Sequence[int],
    rule: RuleConfig,
    now: datetime,
) -> JobVerdict:
    """Decide whether `job` is failing on trunk.

    `cells` are the job's stored cells (any order); `recent_seqs` the seqs of the trunk's
    newest commits that ran any job (for staleness).
    """
    ordered = sorted(cells, key=lambda c: c.seq, reverse=True)
    verdict = [c for c in ordered if c.state in _VERDICT_STATES]
    run, qualifying = _qualifying_run(verdict, rule)
    failures = qualifying if qualifying is not None else run
    culprit = None
    if failures:
        older = [c for c in verdict if c.seq < failures[-1].seq]
        last_pass = older[0] if older and older[0].state != CellState.FAIL else None
        culprit = Culprit(first_fail=failures[-1], last_pass=last_pass)
    newest_fail = next((c for c in verdict if c.state == CellState.FAIL), None)
    too_old = newest_fail is not None and now - newest_fail.commit.time >= rule.max_failure_age
    window = set(sorted(recent_seqs, reverse=True)[: rule.stale_after_commits])
    stale = bool(window) and not any(c.seq in window for c in ordered)
    return JobVerdict(
        job=job,
        firing=qualifying is not None and not too_old and not stale,
        streak=len(failures),
        failures=tuple(failures),
        culprit=culprit,
        stale=stale,
        too_old=too_old,
    )


def _qualifying_run(
    verdict: Sequence[StoredCell], rule: RuleConfig
) -> tuple[list[StoredCell], list[StoredCell] | None]:
    """Walk newest to oldest: the first run of `failures_to_open` fails that comes before
    any run of `passes_to_close` passes (TestGrid-style hysteresis), and the ongoing run."""
    ongoing: list[StoredCell] = []
    run: list[StoredCell] = []
    passes = 0
    for index, cell in enumerate(verdict):
        if cell.state == CellState.FAIL:
            if passes:
                run = []
            passes = 0
            run.append(cell)
            if index == len(ongoing):
                ongoing.append(cell)
            continue
        if len(run) >= rule.failures_to_open:
            return ongoing, run
        run = []
        passes += 1
        if passes >= rule.passes_to_close:
            return ongoing, None
    if len(run) >= rule.failures_to_open:
        return ongoing, run
    return ongoing, None


def trunk_alertname(failing_jobs: int, rule: RuleConfig) -> str | None:
    """SPEC 3.3: no alert, TrunkBroken (1..band) or TrunkBadlyBroken (> band)."""
    if failing_jobs == 0:
        return None
    return "TrunkBroken" if failing_jobs <= rule.trunk_band_max_jobs else "TrunkBadlyBroken"
