"""The consecutive-failure rule (design.md §3.2), table-driven over cell histories.

A history string lists a job's cells from the newest commit to the oldest:
F fail, P pass, f flaky, . pending, n nodata (cancelled/skipped), - no cell.
"""

import itertools
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from trunkwatch.domain.cells import CellState, Commit
from trunkwatch.domain.config import rule_config
from trunkwatch.domain.rule import (
    StoredCell,
    clock_may_change_judgement,
    extend_firing_run,
    in_window,
    judge_job,
    may_change_judgement,
    trunk_alertname,
)

NOW = datetime(2026, 11, 18, 20, 0, tzinfo=UTC)
STATES = {
    "F": CellState.FAIL,
    "P": CellState.PASS,
    "f": CellState.FLAKY,
    ".": CellState.PENDING,
    "n": CellState.NODATA,
}


def cells(
    history: str, newest_age: timedelta = timedelta(hours=1), spacing: timedelta = timedelta(minutes=30)
) -> list[StoredCell]:
    out = []
    top = 100 + len(history)
    for offset, code in enumerate(history):
        if code == "-":
            continue
        seq = top - offset
        commit = Commit(
            sha=f"sha{seq}", time=NOW - newest_age - offset * spacing, title=f"change {seq}", pr=seq
        )
        out.append(StoredCell(seq=seq, state=STATES[code], commit=commit, url=f"https://ci/{seq}"))
    return out


def recent(history: str) -> list[int]:
    top = 100 + len(history)
    return [top - i for i in range(len(history))]


@pytest.mark.parametrize(
    ("history", "firing", "streak"),
    [
        ("FFF", True, 3),
        ("FF", False, 2),
        ("FFFP", True, 3),
        ("PFFF", False, 0),  # a pass at the head closes it
        ("fFFF", False, 0),  # a retried-to-green flaky cell breaks the streak
        (".FFF", True, 3),  # a pending tip does not hide the streak
        ("...FF", False, 2),  # nor fake one
        ("F.FF", True, 3),  # F, pending, F, F is a streak of 3
        ("FnFF", True, 3),  # cancelled in the middle is skipped
        ("FFPFF", False, 2),
        ("FFFFFP", True, 5),
    ],
)
def test_streaks(history: str, firing: bool, streak: int) -> None:
    judgement = judge_job("job", cells(history), recent(history), rule_config({}), NOW)
    assert (judgement.firing, judgement.streak) == (firing, streak)


def test_passes_to_close_gives_hysteresis() -> None:
    rule = rule_config({"passes_to_close": 2})
    assert judge_job("job", cells("FPFFF"), recent("FPFFF"), rule, NOW).firing
    assert not judge_job("job", cells("PPFFF"), recent("PPFFF"), rule, NOW).firing
    assert not judge_job("job", cells("FPFFF"), recent("FPFFF"), rule_config({}), NOW).firing


def test_failures_to_open_is_configurable() -> None:
    assert judge_job("job", cells("FFP"), recent("FFP"), rule_config({"failures_to_open": 2}), NOW).firing
    assert not judge_job(
        "job", cells("FFFP"), recent("FFFP"), rule_config({"failures_to_open": 4}), NOW
    ).firing


def test_culprit_is_first_failure_after_last_pass() -> None:
    judgement = judge_job("job", cells("FFFPP"), recent("FFFPP"), rule_config({}), NOW)
    assert judgement.culprit is not None
    assert judgement.culprit.first_fail.commit.sha == "sha103"
    assert judgement.culprit.last_pass is not None and judgement.culprit.last_pass.commit.sha == "sha102"
    assert not judgement.culprit.clipped


def test_culprit_skips_nodata_between_run_and_pass() -> None:
    judgement = judge_job("job", cells("FFFnP"), recent("FFFnP"), rule_config({}), NOW)
    assert judgement.culprit is not None and judgement.culprit.last_pass is not None
    assert judgement.culprit.last_pass.commit.sha == "sha101"


def test_culprit_clipped_when_window_has_no_pass() -> None:
    judgement = judge_job("job", cells("FFFF"), recent("FFFF"), rule_config({}), NOW)
    assert judgement.firing and judgement.culprit is not None
    assert judgement.culprit.clipped
    assert judgement.culprit.first_fail.commit.sha == "sha101"


def test_streak_older_than_max_failure_age_does_not_open() -> None:
    old = cells("FFF", newest_age=timedelta(hours=25))
    assert not judge_job("job", old, recent("FFF"), rule_config({}), NOW).firing
    assert judge_job("job", old, recent("FFF"), rule_config({"max_failure_age": "26h"}), NOW).firing


def test_removed_job_resolves_as_stale() -> None:
    history = "FFF"
    # The trunk moved on five commits that ran other jobs; this job has no cell on them.
    newer = [200, 199, 198, 197, 196]
    judgement = judge_job("job", cells(history), newer + recent(history), rule_config({}), NOW)
    assert judgement.stale and not judgement.firing


def test_pending_cell_keeps_job_fresh() -> None:
    history = "....FFF"
    judgement = judge_job(
        "job", cells(history), recent(history), rule_config({"stale_after_commits": 3}), NOW
    )
    assert not judgement.stale and judgement.firing


@pytest.mark.parametrize(("history", "needed"), [("PFFFFFFFF", 1), ("FFFPFFFFF", 4), (".nFFFFPFF", 7)])
def test_walk_reads_only_the_cells_it_needs(history: str, needed: int) -> None:
    taken = []

    def lazily() -> Iterator[StoredCell]:
        for cell in cells(history):
            taken.append(cell)
            yield cell

    judge_job("job", lazily(), recent(history), rule_config({}), NOW)
    assert len(taken) == needed


@pytest.mark.parametrize(
    ("count", "name"), [(0, None), (1, "TrunkBroken"), (5, "TrunkBroken"), (6, "TrunkBadlyBroken")]
)
def test_trunk_band(count: int, name: str | None) -> None:
    assert trunk_alertname(count, rule_config({})) == name


def test_trunk_band_follows_configuration() -> None:
    assert trunk_alertname(6, rule_config({"trunk_band_max_jobs": 8})) == "TrunkBroken"


def test_source_down_fires_once_failures_last_source_down_after() -> None:
    from trunkwatch.domain.rule import source_down

    rule = rule_config({"source_down_after": "15m"})
    first_failure = datetime(2026, 11, 20, 12, 5, tzinfo=UTC)
    assert not source_down(None, first_failure, rule)
    assert not source_down(first_failure, first_failure + timedelta(minutes=14, seconds=59), rule)
    assert source_down(first_failure, first_failure + timedelta(minutes=15), rule)


@pytest.mark.parametrize("passes_to_close", [1, 2])
def test_a_change_judged_unable_to_alter_the_judgement_never_does(passes_to_close: int) -> None:
    """Every history of 5 commits (the stale window is the newest 2 of 6 trunk commits), every
    change of one cell, for a job that is not firing: whenever `may_change_judgement` says no,
    judging the job before and after gives the same judgement."""
    rule = rule_config({"stale_after_commits": 2, "passes_to_close": passes_to_close})
    window = recent("------")  # the trunk's newest 6 commits ran jobs
    codes = "FPf.n-"
    skipped = 0
    for history in map("".join, itertools.product(codes, repeat=5)):
        before = judge_job("job", cells(history + "-"), window, rule, NOW)
        if before.firing:
            continue
        stored = cells(history + "-")
        prior = stored[0].seq if stored else None
        fresh_before = in_window(prior, window, rule)
        for position in range(5):
            old = STATES.get(history[position])
            for new_code in "FPf.n":
                changed = history[:position] + new_code + history[position + 1 :]
                if changed == history or may_change_judgement(old, STATES[new_code], False, fresh_before):
                    continue
                skipped += 1
                after = judge_job("job", cells(changed + "-"), window, rule, NOW)
                assert after.firing == before.firing, (history, changed)
    assert skipped > 1000  # the check covered many skipped changes


@pytest.mark.parametrize("passes_to_close", [1, 2])
def test_a_firing_job_the_clock_cannot_change_keeps_its_judgement(passes_to_close: int) -> None:
    """Every history of 6 commits that fires, judged later (up to a day) on a trunk whose
    newest commits moved on (0 to 4 more): whenever `clock_may_change_judgement` says no for
    the newest failure the alert records, judging it again gives the same judgement."""
    rule = rule_config(
        {"stale_after_commits": 3, "passes_to_close": passes_to_close, "max_failure_age": "6h"}
    )
    skipped = 0
    for history in map("".join, itertools.product("FPf.n-", repeat=6)):
        stored = cells(history)
        before = judge_job("job", stored, recent(history), rule, NOW)
        if not before.firing:
            continue
        newest_fail = before.failures[0]
        for later, moved_on in itertools.product(
            (timedelta(0), timedelta(hours=2), timedelta(hours=24)), range(5)
        ):
            window = [seq + moved_on for seq in recent(history)]
            now = NOW + later
            if clock_may_change_judgement(newest_fail.seq, newest_fail.commit.time, window, rule, now):
                continue
            skipped += 1
            after = judge_job("job", stored, window, rule, now)
            assert after == before, (history, later, moved_on)
    assert skipped > 500  # the check covered many skipped re-judgings


@pytest.mark.parametrize("passes_to_close", [1, 2])
def test_an_extended_firing_run_gives_the_full_walks_alert(passes_to_close: int) -> None:
    """Every firing history of 5 commits, then 0 to 2 new commits on top (every state, or no
    cell) and any one cell above the alert's newest failure or that failure changed (to every
    state, or no cell): whenever
    `extend_firing_run` extends the stored run, the alert it gives (the stored culprit, the
    streak counted on from the stored one, the newest failure, the URLs, the judgement) is the
    one the full walk gives; it never extends past a pass or flaky cell or a lost failure."""
    rule = rule_config(
        {"stale_after_commits": 3, "passes_to_close": passes_to_close, "max_failure_age": "2h"}
    )
    spacing = timedelta(minutes=30)
    extended = declined = 0
    for history in map("".join, itertools.product("FPf.n-", repeat=5)):
        before = judge_job("job", cells(history), recent(history), rule, NOW)
        if not before.firing:
            continue
        newest_fail = before.failures[0]
        above = len(history) - 1 - (newest_fail.seq - 101)  # positions above it in `history`
        for top in map(
            "".join, itertools.chain.from_iterable(itertools.product("FPf.n-", repeat=n) for n in range(3))
        ):
            # Any one cell above the newest failure or the failure itself changes (or none).
            for position, code in itertools.product(range(above + 1), "FPf.n-"):
                changed = history[:position] + code + history[position + 1 :]
                after = top + changed
                # The same seqs and commit times as before, under the new commits.
                stored = cells(after, newest_age=timedelta(hours=1) - len(top) * spacing)
                full = judge_job("job", stored, recent(after), rule, NOW)
                urls = before.failing_urls
                extension = extend_firing_run("job", stored, newest_fail.seq, urls, recent(after), rule, NOW)
                if extension is None:
                    declined += 1
                    continue
                extended += 1
                case = (history, after)
                assert "P" not in after[: len(top) + above] and "f" not in after[: len(top) + above], case
                assert changed[above] == "F", case
                assert (extension.firing, extension.stale, extension.too_old) == (
                    full.firing,
                    full.stale,
                    full.too_old,
                ), case
                assert extension.failures == full.failures[: len(extension.failures)], case
                assert extension.failures[-1] == newest_fail, case
                newer = sum(1 for cell in extension.failures if cell.seq > newest_fail.seq)
                assert full.streak == before.streak + newer, case
                assert full.culprit == before.culprit, case
                assert extension.failing_urls == full.failing_urls, case
    assert extended > 5000 and declined > 30000  # both ways, many times


@pytest.mark.parametrize(
    ("old", "new", "fresh_before", "quiet", "firing"),
    [
        (CellState.PENDING, CellState.PASS, False, False, True),  # finished green: no read
        (CellState.PENDING, CellState.FLAKY, False, False, True),
        (None, CellState.PENDING, True, False, False),  # a new commit's pending cell
        (None, CellState.PENDING, False, True, False),  # ... that may end the job's staleness
        (None, CellState.FAIL, True, True, True),
        (None, CellState.PASS, True, False, True),
        (CellState.PASS, CellState.PENDING, True, True, True),  # a re-run hides a pass: runs may merge
        (CellState.PASS, CellState.NODATA, True, True, True),
        (CellState.PENDING, CellState.FAIL, True, True, True),
        (CellState.PASS, CellState.FLAKY, True, False, True),
    ],
)
def test_which_changes_may_change_a_jobs_judgement(
    old: CellState | None, new: CellState, fresh_before: bool, quiet: bool, firing: bool
) -> None:
    """`quiet`: whether the change may change the judgement of a job that is not firing;
    `firing`: of a firing job (always, but for a new commit's pending cell)."""
    assert may_change_judgement(old, new, False, fresh_before) is quiet
    assert may_change_judgement(old, new, True, fresh_before) is firing


def test_a_new_pending_cell_never_changes_a_firing_jobs_judgement() -> None:
    """Every firing history of 6 commits, with a new commit on top whose run of the job is
    pending (the trunk's window moves on with it): judged the same."""
    rule = rule_config({"stale_after_commits": 3, "max_failure_age": "6h"})
    checked = 0
    for history in map("".join, itertools.product("FPf.n-", repeat=6)):
        before = judge_job("job", cells(history), recent(history), rule, NOW)
        if not before.firing:
            continue
        assert not may_change_judgement(None, CellState.PENDING, True, True)
        # The same cells (same seqs and commit times) under a newer pending one.
        on_top = cells("." + history, newest_age=timedelta(minutes=30))
        after = judge_job("job", on_top, recent("." + history), rule, NOW)
        assert after == before, history
        checked += 1
    assert checked > 100
