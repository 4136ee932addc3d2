"""Breakages fixed before the rule could page them (design.md §3.7): `rule.fixed_run` and
`rule.breakage_run`, table-driven over cell histories, and what recording one again writes.

A history string lists a job's cells from the newest commit to the oldest, as in
test_rule.py: F fail, P pass, f flaky, . pending, n nodata, - no cell. Every failure fails
with the line `LINE` unless `lines` gives its position another.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest

from tests.unit.test_rule import NOW, cells, recent
from trunkwatch.app.fixed import recording
from trunkwatch.domain.cells import StoredCell
from trunkwatch.domain.config import rule_config
from trunkwatch.domain.episodes import FixedEpisode
from trunkwatch.domain.job_alerts import AlertCommit
from trunkwatch.domain.rule import breakage_run, fixed_run, judge_job

LINE = "FAILED test/test_nn.py::TestNN::test_conv6"


def job(history: str, lines: dict[int, tuple[str, ...]] | None = None) -> list[StoredCell]:
    """The job's cells, each failure with `LINE` or the lines `lines` gives its position."""
    stored = cells(history)
    top = 100 + len(history)
    out = []
    for cell in stored:
        position = top - cell.seq
        failing = lines.get(position, (LINE,)) if lines else (LINE,)
        out.append(
            StoredCell(
                cell.seq, cell.state, cell.commit, cell.url, failing if history[position] == "F" else ()
            )
        )
    return out


def seq(history: str, position: int) -> int:
    return 100 + len(history) - position


@pytest.mark.parametrize(
    ("history", "fix", "culprit", "failed", "last_pass"),
    [
        ("PFFP", 0, 2, 2, 3),  # two failing commits, then the fix
        ("PPFFP", 1, 3, 2, 4),  # the fix is the first pass after them, not the newest
        ("fFFP", 0, 2, 2, 3),  # a pass on retry fixes too
        ("P.FFP", 0, 3, 2, 4),  # the fix passed before the third failure came in
        ("PFFFFFP", 0, 5, 5, 6),  # longer runs too: one that never reached the newest end
        ("PFnFP", 0, 3, 2, 4),  # no data between failures: still consecutive commits of the job
        ("FPFFP", 1, 3, 2, 4),  # a new failure above the fix is stepped over
        ("FFPFFP", 2, 4, 2, 5),
        ("PFF", 0, 2, 2, None),  # the window ends before a pass below them
    ],
)
def test_a_run_of_failures_a_newer_pass_ended_is_fixed(
    history: str, fix: int, culprit: int, failed: int, last_pass: int | None
) -> None:
    found = fixed_run(job(history), changed_from=None)
    assert found is not None
    assert found.fix.seq == seq(history, fix)
    assert found.culprit.seq == seq(history, culprit)
    assert len(found.failures) == failed
    assert (found.last_pass.seq if found.last_pass else None) == (
        seq(history, last_pass) if last_pass is not None else None
    )
    assert found.failure_lines == (LINE,)


@pytest.mark.parametrize(
    "history",
    [
        "PFP",  # one failing commit is no breakage of two
        "FFP",  # failing at the newest end: nothing fixed it (yet)
        "FFFP",
        "PFPFP",  # a pass between failures: not consecutive
        "PFfFP",  # a pass on retry between them too
        "PPPP",
        "",
    ],
)
def test_no_fixed_run(history: str) -> None:
    assert fixed_run(job(history), changed_from=None) is None


def test_flaky_failures_in_a_row_are_not_a_breakage() -> None:
    """Two failures in a row with different failing lines are two flaky failures."""
    flaky = {1: ("FAILED test/test_a.py::test_1",), 2: ("FAILED test/test_b.py::test_7",)}
    assert fixed_run(job("PFFP", flaky), changed_from=None) is None
    # Failures without failure lines are a runner's or a timeout's: no breakage either.
    silent: dict[int, tuple[str, ...]] = {1: (), 2: ()}
    assert fixed_run(job("PFFP", silent), changed_from=None) is None


def test_a_shard_failing_more_lines_still_shares_the_breakages_line() -> None:
    lines = {1: (LINE, "FAILED test/test_other.py::test_3"), 2: (LINE,), 3: ("FAILED test/x.py::test_9",)}
    found = fixed_run(job("PFFFP", lines), changed_from=None)
    # The oldest failure fails another test: a flaky failure below the breakage, not its start.
    assert found is not None and found.culprit.seq == seq("PFFFP", 2) and found.last_pass is None
    assert found.failure_lines == (LINE,)


def test_a_fix_that_passes_before_the_third_failure_never_fires_and_is_fixed() -> None:
    """Three commits fail; the fix's pass finishes before the third failure does. The rule
    never saw three failures at the newest end, before or after: the run is the breakage fixed
    before a page, two failing commits, then three once the third comes in."""
    rule = rule_config({})
    for history in ("FF", "PFF", "P.FF", "PFFF"):  # the results as they come in
        assert not judge_job("job", job(history + "P"), recent(history + "P"), rule, NOW).firing
    early = fixed_run(job("P.FFP"), changed_from=None)
    late = fixed_run(job("PFFFP"), changed_from=None)
    assert early is not None and late is not None
    assert (len(early.failures), len(late.failures)) == (2, 3)
    assert early.culprit == late.culprit and early.fix == late.fix


def test_the_walk_reads_no_further_than_the_changed_cells_need() -> None:
    """A pass older than every changed cell: whatever lies below it was there before."""
    history = "FPPPFFP"
    taken: list[StoredCell] = []

    def lazily() -> Iterator[StoredCell]:
        for cell in job(history):
            taken.append(cell)
            yield cell

    # A new failure at the newest end: the pass below it is older than the change.
    assert fixed_run(lazily(), changed_from=seq(history, 0)) is None
    assert len(taken) == 2
    # The fix's pass came in: the run below it is read, and no further than its last pass.
    taken.clear()
    found = fixed_run(lazily(), changed_from=seq(history, 3))
    assert found is not None and found.fix.seq == seq(history, 3) and len(taken) == 7
    # A change above passes that were there before: nothing new below them.
    taken.clear()
    assert fixed_run(lazily(), changed_from=seq(history, 1)) is None
    assert len(taken) == 3


@pytest.mark.parametrize(
    ("history", "lines", "expected"),
    [
        ("FF", None, 2),
        ("FFF", None, 3),
        ("F", None, 1),
        ("FF", {1: ("FAILED test/other.py::test_2",)}, 1),
        ("FF", {0: ()}, 0),
    ],
)
def test_the_breakage_at_the_newest_end(
    history: str, lines: dict[int, tuple[str, ...]] | None, expected: int
) -> None:
    assert len(breakage_run(job(history, lines))) == expected


def test_a_run_overlapping_an_alerts_range_fired() -> None:
    found = fixed_run(job("PFFFP"), changed_from=None)
    assert found is not None
    newest, oldest = seq("PFFFP", 1), seq("PFFFP", 3)
    assert found.overlaps(oldest, newest) and found.overlaps(newest, newest + 5)
    assert found.overlaps(oldest - 3, oldest)
    assert not found.overlaps(newest + 1, newest + 4) and not found.overlaps(oldest - 4, oldest - 1)


def recorded(job_key: str, culprit: int, fix: int, failed: int, detected_hours: int = 0) -> FixedEpisode:
    def ref(n: int) -> AlertCommit:
        return AlertCommit(seq=n, sha=f"sha{n}", time=NOW - timedelta(hours=10 - n))

    return FixedEpisode(job_key, ref(culprit), ref(fix), failed, NOW + timedelta(hours=detected_hours))


def test_a_breakage_found_again_keeps_its_first_record_and_replaces_shorter_sights_of_it() -> None:
    first = recorded("a", culprit=5, fix=7, failed=2)
    other_job = recorded("b", culprit=5, fix=7, failed=2)
    earlier = recorded("a", culprit=1, fix=3, failed=2)  # another breakage of the job, before it
    stored = [earlier, first, other_job]
    # The same again: nothing to write.
    assert recording(recorded("a", 5, 7, 2, detected_hours=2), stored) == (None, [])
    # A third failing commit came in: the record grows, first detected when it was.
    grown, superseded = recording(recorded("a", 5, 8, 3, detected_hours=2), stored)
    assert grown == recorded("a", 5, 8, 3) and superseded == []
    # An older failure came in below it: the culprit moved; the shorter sight goes.
    moved, superseded = recording(recorded("a", 4, 7, 3, detected_hours=2), stored)
    assert moved == recorded("a", 4, 7, 3, detected_hours=2) and superseded == [first]
