"""The storage port's contract: every test runs on the in-memory storage and on DynamoDB (moto),
so the two agree, conditional writes and their conflicts included."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from pynamodb.exceptions import PutError

from trunkwatch.domain.acks import Acknowledgement
from trunkwatch.domain.cells import Cell, CellState, CellWrite, Commit, line_ids
from trunkwatch.domain.clock import format_time
from trunkwatch.domain.commits import RevertMark, ShaPointer, StoredCommit
from trunkwatch.domain.episodes import EPISODE_RETENTION, Episode, FixedEpisode
from trunkwatch.domain.job_alerts import AlertCommit, JobAlert
from trunkwatch.domain.notification_log import Lease, LogEntry, Rejection
from trunkwatch.domain.reruns import RerunRecord
from trunkwatch.domain.runs import RunRecord
from trunkwatch.domain.shards import ShardReport
from trunkwatch.domain.silences import SilenceAudit, SilenceRecord, StoredMatcher
from trunkwatch.domain.ticks import GROUP_WINDOW
from trunkwatch.domain.trunk_state import TrunkState
from trunkwatch.storage import keys
from trunkwatch.storage.dynamodb import open_table
from trunkwatch.storage.errors import Conflict
from trunkwatch.storage.items import TrunkStateItem
from trunkwatch.storage.keys import TTL_ATTRIBUTE
from trunkwatch.storage.limits import TITLE_MAX
from trunkwatch.storage.memory import memory_storage
from trunkwatch.storage.port import Storage

TRUNK = "pytorch/pytorch#main"
NOW = datetime(2026, 11, 18, 12, 0, tzinfo=UTC)
RETENTION = timedelta(days=30)
JOB = "pull / linux-jammy / test (default)"


@pytest.fixture(params=["memory", "dynamodb"])
def storage(request: pytest.FixtureRequest) -> Storage:
    if request.param == "memory":
        return memory_storage()
    stored: Storage = request.getfixturevalue("aws")["storage"]
    return stored


def commit(n: int, **changes: object) -> Commit:
    return dataclasses.replace(
        Commit(sha=f"{n:040x}", time=NOW + timedelta(minutes=n), title=f"commit {n}", author="a", pr=n),
        **changes,
    )


# --- trunks -------------------------------------------------------------------------------


def test_a_trunk_starts_empty_and_keeps_its_poll_health(storage: Storage) -> None:
    trunks = storage.trunks
    assert trunks.state(TRUNK) == TrunkState()
    assert trunks.job_names(TRUNK) == [] and trunks.source_state(TRUNK) == {}
    trunks.record_poll_failure(TRUNK, NOW, "timeout", "x" * 600)
    trunks.record_poll_failure(TRUNK, NOW + timedelta(minutes=1), "http", "boom")
    failing = trunks.state(TRUNK)
    assert (failing.polls_failing_since, failing.poll_error_cause, failing.poll_error) == (
        NOW,
        "http",
        "boom",
    )
    assert trunks.record_poll_success(TRUNK, NOW + timedelta(minutes=2), failing) == 1
    ok = trunks.state(TRUNK, consistent=True)
    assert (ok.polls_failing_since, ok.poll_error, ok.last_poll_ok_at) == (
        None,
        None,
        NOW + timedelta(minutes=2),
    )
    assert trunks.record_poll_success(TRUNK, NOW + timedelta(minutes=3), ok) == 0  # steady: nothing written
    trunks.record_polled(TRUNK, NOW, missing_since=NOW - timedelta(hours=1))
    trunks.record_delivery(TRUNK, NOW - timedelta(minutes=1))
    assert trunks.save_recent_seqs(TRUNK, [], [3, 2, 1])
    state = trunks.state(TRUNK)
    assert (state.last_polled_at, state.deliveries_missing_since, state.recent_seqs) == (
        NOW,
        NOW - timedelta(hours=1),
        [3, 2, 1],
    )
    assert state.last_delivery_at == NOW - timedelta(minutes=1)
    trunks.save_source_state(TRUNK, {"etag": "W/1", "pages": [1, 2]})
    assert trunks.source_state(TRUNK) == {"etag": "W/1", "pages": [1, 2]}


def test_the_unpaged_set_gains_and_loses_jobs(storage: Storage) -> None:
    trunks = storage.trunks
    trunks.mark_unpaged(TRUNK, JOB, True)
    trunks.mark_unpaged(TRUNK, "other", True)
    trunks.mark_unpaged(TRUNK, JOB, True)  # again: no change
    assert trunks.state(TRUNK).unpaged == {JOB, "other"}
    trunks.mark_unpaged(TRUNK, JOB, False)
    trunks.mark_unpaged(TRUNK, "never added", False)
    assert trunks.state(TRUNK).unpaged == {"other"}
    trunks.mark_unpaged(TRUNK, "other", False)
    assert trunks.state(TRUNK).unpaged == set() and trunks.state("other/repo#main").unpaged == set()


def test_recent_seqs_change_only_from_what_was_read(storage: Storage) -> None:
    trunks = storage.trunks
    assert not trunks.save_recent_seqs(TRUNK, [1], [2, 1])  # there are none yet
    assert trunks.save_recent_seqs(TRUNK, [], [2, 1])
    assert not trunks.save_recent_seqs(TRUNK, [], [3])  # another writer saved some
    assert not trunks.save_recent_seqs(TRUNK, [2], [3])
    assert trunks.save_recent_seqs(TRUNK, [2, 1], [])
    assert trunks.save_recent_seqs(TRUNK, [], [4])  # from none again
    assert trunks.state(TRUNK, consistent=True).recent_seqs == [4]


def test_job_columns_are_appended_only_to_the_index_their_writer_read(storage: Storage) -> None:
    trunks = storage.trunks
    assert trunks.add_job_names(TRUNK, [], ["a"])
    assert not trunks.add_job_names(TRUNK, [], ["b"])  # another writer added a column first
    assert trunks.add_job_names(TRUNK, ["a"], ["b", "c"])
    assert not trunks.add_job_names(TRUNK, ["a"], ["d"])
    assert not trunks.add_job_names(TRUNK, ["a", "c", "b"], ["d"])  # a column never moves
    assert trunks.job_names(TRUNK) == ["a", "b", "c"]


# --- commits and cells --------------------------------------------------------------------


def place(storage: Storage, *stored: StoredCommit) -> None:
    for one in stored:
        assert storage.commits.place(TRUNK, one, RETENTION, None)


def test_commits_by_seq_and_by_sha(storage: Storage) -> None:
    commits = storage.commits
    stored = [StoredCommit(seq, commit(seq), "F-P") for seq in (1, 2, 3)]
    place(storage, *stored)
    assert commits.newest(TRUNK, 2) == [stored[2], stored[1]]
    assert commits.get(TRUNK, 2) == stored[1] and commits.get(TRUNK, 9) is None
    assert commits.seqs_of(TRUNK, [commit(1).sha, commit(3).sha, "f" * 40]) == {
        commit(1).sha: 1,
        commit(3).sha: 3,
    }
    assert commits.seqs_of(TRUNK, []) == {} and commits.pointers(TRUNK, []) == {}
    assert commits.pointers(TRUNK, [commit(2).sha, "f" * 40]) == {commit(2).sha: ShaPointer(2)}


def test_a_commit_is_placed_only_at_a_free_seq_and_once(storage: Storage) -> None:
    commits = storage.commits
    assert commits.place(TRUNK, StoredCommit(5, commit(5)), RETENTION, None)
    assert not commits.place(TRUNK, StoredCommit(5, commit(6)), RETENTION, None)  # seq taken
    assert not commits.place(TRUNK, StoredCommit(7, commit(5)), RETENTION, None)  # placed already
    assert not commits.place(TRUNK, StoredCommit(7, commit(5)), RETENTION, ShaPointer())  # not as read
    assert commits.get(TRUNK, 5) == StoredCommit(5, commit(5), "")
    assert commits.get(TRUNK, 7) is None and commits.seqs_of(TRUNK, [commit(6).sha]) == {}


def test_a_commit_placed_before_its_parent_bounds_it(storage: Storage) -> None:
    commits = storage.commits
    parent, child = commit(1), commit(2)
    assert commits.place(TRUNK, StoredCommit(1000, child), RETENTION, None, (parent.sha, None))
    assert commits.pointers(TRUNK, [parent.sha, child.sha]) == {
        parent.sha: ShaPointer(child=1000),
        child.sha: ShaPointer(1000),
    }
    assert commits.seqs_of(TRUNK, [parent.sha]) == {}  # not placed yet
    # Another child of the same parent, planned from the parent as it was before: refused.
    assert not commits.place(TRUNK, StoredCommit(2000, commit(3)), RETENTION, None, (parent.sha, None))
    assert commits.get(TRUNK, 2000) is None and commits.pointers(TRUNK, [commit(3).sha]) == {}
    # The parent, planned without the child's bound: refused; with it: placed, bound kept.
    assert not commits.place(TRUNK, StoredCommit(999, parent), RETENTION, None)
    assert commits.place(TRUNK, StoredCommit(999, parent), RETENTION, ShaPointer(child=1000))
    assert commits.pointers(TRUNK, [parent.sha]) == {parent.sha: ShaPointer(999, 1000)}
    assert commits.seqs_of(TRUNK, [parent.sha, child.sha]) == {parent.sha: 999, child.sha: 1000}


def test_states_change_only_from_what_was_read(storage: Storage) -> None:
    commits = storage.commits
    place(storage, StoredCommit(5, commit(5)))
    assert commits.save_states(TRUNK, 5, "", "F")
    assert not commits.save_states(TRUNK, 5, "", "P")  # another writer changed it
    assert not commits.save_states(TRUNK, 6, "", "P")  # no such commit
    stored = commits.get(TRUNK, 5)
    assert stored is not None and stored.states == "F"
    renamed = commit(5, title="renamed", pr=None, url="u", autoreverted_by="r")
    assert not commits.save_states(TRUNK, 5, "", "FP", renamed)
    assert commits.get(TRUNK, 5) == StoredCommit(5, commit(5), "F")
    assert commits.save_states(TRUNK, 5, "F", "FP", renamed)
    assert commits.get(TRUNK, 5) == StoredCommit(5, renamed, "FP")
    assert commits.autoreverted(TRUNK, [5]) == {5: "r"}
    assert commits.save_states(TRUNK, 5, "FP", "FP", commit(5))  # the metadata alone
    assert commits.get(TRUNK, 5) == StoredCommit(5, commit(5), "FP")


def test_a_revert_mark_is_read_live(storage: Storage) -> None:
    commits = storage.commits
    place(storage, StoredCommit(1, commit(1)), StoredCommit(2, commit(2, autoreverted_by="r")))
    assert commits.autoreverted(TRUNK, [1, 2, 3]) == {2: "r"}
    assert commits.autoreverted(TRUNK, []) == {}
    assert commits.mark(TRUNK, 1) == RevertMark(None)
    assert commits.mark(TRUNK, 2) == RevertMark("r")
    assert commits.mark(TRUNK, 3) is None


def test_cells_newest_first(storage: Storage) -> None:
    cells = storage.cells
    assert cells.newest_seq(TRUNK, JOB) is None
    long_title = commit(2, title="t" * (TITLE_MAX + 50), autoreverted_by="r")
    writes = [
        CellWrite(Cell(JOB, commit(1).sha, CellState.PASS, url="u1"), commit(1), 1, "poll-1"),
        CellWrite(
            Cell(JOB, long_title.sha, CellState.FAIL, url="u2", failure_lines=("boom",)),
            long_title,
            2,
            "poll-1",
            1,
        ),
        CellWrite(Cell("other", commit(3).sha, CellState.FAIL), commit(3), 3, "poll-1"),
    ]
    cells.save_all(TRUNK, writes, RETENTION)
    assert cells.newest_seq(TRUNK, JOB) == 2
    newest, oldest = cells.newest_first(TRUNK, JOB, limit=10, page_size=1)
    assert (newest.seq, newest.state, newest.url, newest.failure_lines) == (
        2,
        CellState.FAIL,
        "u2",
        ("boom",),
    )
    assert newest.commit == dataclasses.replace(long_title, title="t" * TITLE_MAX, autoreverted_by=None)
    assert (oldest.seq, oldest.state, oldest.commit) == (1, CellState.PASS, commit(1))
    assert [c.seq for c in cells.newest_first(TRUNK, JOB, limit=1, page_size=8)] == [2]


# --- alerts -------------------------------------------------------------------------------


def test_a_pending_cell_never_replaces_a_result(storage: Storage) -> None:
    def write(seq: int, state: CellState, url: str) -> None:
        storage.cells.save_all(
            TRUNK, [CellWrite(Cell(JOB, commit(seq).sha, state, url=url), commit(seq), seq, "p")], RETENTION
        )

    write(1, CellState.PENDING, "queued")
    write(1, CellState.FAIL, "failed")
    write(1, CellState.PENDING, "queued again")  # a writer that read the state before the failure
    write(2, CellState.PENDING, "queued")
    write(2, CellState.PENDING, "still queued")
    newest, oldest = storage.cells.newest_first(TRUNK, JOB, limit=10, page_size=10)
    assert (oldest.state, oldest.url) == (CellState.FAIL, "failed")
    assert (newest.state, newest.url) == (CellState.PENDING, "still queued")


def test_pending_cells_written_together_never_replace_results(storage: Storage) -> None:
    """A poll's many pending cells in one call (a landing commit's jobs): those whose item
    holds a result keep it, the others are written, whichever order they go in."""
    jobs = [f"pull / job {n}" for n in range(30)]
    results, pending = jobs[::2], jobs[1::2]

    def write(job: str, state: CellState, url: str) -> CellWrite:
        return CellWrite(Cell(job, commit(1).sha, state, url=url), commit(1), 1, "p")

    storage.cells.save_all(
        TRUNK,
        [write(job, CellState.FAIL, "failed") for job in results]
        + [write(job, CellState.PENDING, "queued") for job in pending],
        RETENTION,
    )
    storage.cells.save_all(TRUNK, [write(job, CellState.PENDING, "queued again") for job in jobs], RETENTION)
    stored = {job: next(storage.cells.newest_first(TRUNK, job, limit=1, page_size=1)) for job in jobs}
    assert {job: (cell.state, cell.url) for job, cell in stored.items()} == {
        **{job: (CellState.FAIL, "failed") for job in results},
        **{job: (CellState.PENDING, "queued again") for job in pending},
    }


def alert(job: str = JOB, **changes: object) -> JobAlert:
    ref = AlertCommit(seq=1, sha=commit(1).sha, time=commit(1).time, title="commit 1", pr=1, job_url="run")
    return dataclasses.replace(
        JobAlert(job=job, status="firing", starts_at=NOW, streak=2, first_fail=ref, newest_fail=ref),
        **changes,
    )


def test_an_alert_keeps_its_culprit_verdict(storage: Storage) -> None:
    saved = storage.alerts.save_with_failing_set(
        TRUNK,
        alert(culprit_verdict="environmental", verdict_reason="the last pass fails too"),
        now_firing=True,
    )
    assert storage.alerts.job_alert(TRUNK, JOB) == saved
    assert (saved.culprit_verdict, saved.verdict_reason) == ("environmental", "the last pass fails too")


def test_an_alert_keeps_a_culprit_confirmed_by_a_sibling_and_its_episode_names_it(storage: Storage) -> None:
    # The job did not run on the commit that broke it (seq 0): the alert names it as culprit
    # while its first failure (seq 1) stays what the walk found.
    skipped = AlertCommit(seq=0, sha="b" * 40, time=NOW - timedelta(hours=1), title="commit 0", pr=7)
    saved = storage.alerts.save_with_failing_set(
        TRUNK, alert(culprit_verdict="confirmed", confirmed_culprit=skipped), now_firing=True
    )
    assert storage.alerts.job_alert(TRUNK, JOB) == saved
    assert saved.confirmed_culprit == skipped and saved.culprit == skipped and saved.first_fail.seq == 1
    assert [e.culprit for e in storage.alerts.episodes(TRUNK, NOW)] == [skipped]


def test_an_alert_and_the_failing_set_change_together(storage: Storage) -> None:
    alerts = storage.alerts
    assert alerts.job_alert(TRUNK, JOB) is None
    saved = alerts.save_with_failing_set(
        TRUNK, alert(failure_lines=("x",), failing_urls=("u",)), now_firing=True
    )
    assert saved.version is not None
    assert alerts.job_alert(TRUNK, JOB) == saved
    assert storage.trunks.state(TRUNK).failing == {JOB}
    alerts.save_with_failing_set(TRUNK, alert("other", status="resolved", ends_at=NOW), now_firing=None)
    assert [a.job for a in alerts.of_trunk(TRUNK)] == ["other", JOB]  # by job
    assert [a.job for a in alerts.of_trunk(TRUNK, firing_only=True)] == [JOB]
    resolved = alerts.save_with_failing_set(
        TRUNK, dataclasses.replace(saved, status="resolved", ends_at=NOW), now_firing=False
    )
    assert resolved.version != saved.version
    assert storage.trunks.state(TRUNK).failing == set()


def test_a_stale_alert_conflicts_and_writes_nothing(storage: Storage) -> None:
    alerts = storage.alerts
    first = alerts.save_with_failing_set(TRUNK, alert(), now_firing=True)
    alerts.save_with_failing_set(TRUNK, dataclasses.replace(first, streak=3), now_firing=None)
    with pytest.raises(Conflict):
        alerts.save_with_failing_set(TRUNK, dataclasses.replace(first, status="resolved"), now_firing=False)
    with pytest.raises(Conflict):
        alerts.save_with_failing_set(TRUNK, alert(), now_firing=True)  # a second "new" alert
    stored = alerts.job_alert(TRUNK, JOB)
    assert stored is not None and (stored.status, stored.streak) == ("firing", 3)
    assert storage.trunks.state(TRUNK).failing == {JOB}


def test_an_alert_writes_its_episode_when_it_fires_and_when_it_resolves(storage: Storage) -> None:
    alerts = storage.alerts
    first = alerts.save_with_failing_set(TRUNK, alert(), now_firing=True)
    ref = first.first_fail
    assert alerts.episodes(TRUNK, NOW) == [Episode(JOB, NOW, None, ref)]
    # A firing alert's updates (its streak) leave its episode alone.
    grown = alerts.save_with_failing_set(TRUNK, dataclasses.replace(first, streak=5), now_firing=None)
    assert alerts.episodes(TRUNK, NOW) == [Episode(JOB, NOW, None, ref)]
    ended = NOW + timedelta(hours=3)
    resolved = alerts.save_with_failing_set(
        TRUNK, dataclasses.replace(grown, status="resolved", ends_at=ended), now_firing=False
    )
    later = NOW + timedelta(days=2)
    again = alerts.save_with_failing_set(
        TRUNK, dataclasses.replace(resolved, status="firing", starts_at=later, ends_at=None), now_firing=True
    )
    other = alerts.save_with_failing_set(TRUNK, alert("other", starts_at=later), now_firing=True)
    assert alerts.episodes(TRUNK, NOW) == [
        Episode(JOB, NOW, ended, ref),
        Episode("other", later, None, other.first_fail),
        Episode(JOB, later, None, again.first_fail),
    ]
    # Since after the first one ended: only what still fires or ended since.
    assert [e.starts_at for e in alerts.episodes(TRUNK, ended + timedelta(seconds=1))] == [later, later]
    assert alerts.episodes("other/repo#main", NOW) == []


def test_a_stale_alert_writes_no_episode(storage: Storage) -> None:
    alerts = storage.alerts
    first = alerts.save_with_failing_set(TRUNK, alert(), now_firing=True)
    alerts.save_with_failing_set(TRUNK, dataclasses.replace(first, streak=3), now_firing=None)
    with pytest.raises(Conflict):
        alerts.save_with_failing_set(
            TRUNK, dataclasses.replace(first, status="resolved", ends_at=NOW), now_firing=False
        )
    assert [e.ends_at for e in alerts.episodes(TRUNK, NOW)] == [None]


def test_anepisode_item_is_at_most_one_write_unit(aws: dict) -> None:
    """docs/status-page.md's cost: an episode with the longest title a commit keeps, a long
    author and GitHub's run URLs is still under 1 KB (one write unit, two in a transaction)."""
    from benchmarks.usage import item_bytes
    from trunkwatch.domain.cells import MAX_FAILURE_LINE_CHARS, MAX_FAILURE_LINES
    from trunkwatch.storage.alerts import episode_item
    from trunkwatch.storage.items import EpisodeItem

    sha = "f" * 40
    culprit = AlertCommit(
        seq=12345678,
        sha=sha,
        time=NOW,
        title="x" * TITLE_MAX,
        author="a" * 39,
        pr=160000,
        url=f"https://github.com/pytorch/pytorch/commit/{sha}",
        job_url="https://github.com/pytorch/pytorch/actions/runs/12345678901/job/123456789012",
    )
    episode = alert(
        "pull / linux-jammy-py3.10-gcc11 / test (default, linux.2xlarge)",
        status="resolved",
        ends_at=NOW,
        first_fail=culprit,
        failure_lines=tuple("l" * MAX_FAILURE_LINE_CHARS for _ in range(MAX_FAILURE_LINES)),
    )
    assert item_bytes(episode_item(EpisodeItem, TRUNK, episode)) <= 1024


def test_a_resolved_episode_expires_a_month_after_it_ended(aws: dict) -> None:
    alerts = aws["storage"].alerts
    first = alerts.save_with_failing_set(TRUNK, alert(), now_firing=True)
    key = {"pk": {"S": keys.episodes(TRUNK)}, "sk": {"S": keys.episode(format_time(NOW), JOB)}}

    def expiry() -> str | None:
        item = boto3.client("dynamodb").get_item(TableName=aws["table"], Key=key)["Item"]
        return item.get(TTL_ATTRIBUTE, {}).get("N")

    assert expiry() is None  # never while firing
    ended = NOW + timedelta(hours=1)
    alerts.save_with_failing_set(
        TRUNK, dataclasses.replace(first, status="resolved", ends_at=ended), now_firing=False
    )
    assert expiry() == str(int((ended + EPISODE_RETENTION).timestamp()))


def test_an_episode_keeps_its_verdict(storage: Storage) -> None:
    alerts = storage.alerts
    first = alerts.save_with_failing_set(TRUNK, alert(culprit_verdict="unconfirmed"), now_firing=True)
    alerts.save_with_failing_set(
        TRUNK,
        dataclasses.replace(first, status="resolved", ends_at=NOW, culprit_verdict="confirmed"),
        now_firing=False,
    )
    assert [e.verdict for e in alerts.episodes(TRUNK, NOW)] == ["confirmed"]


def test_an_episode_keeps_its_failure_lines(storage: Storage) -> None:
    # The digest leaves out a breakage fixed before a page whose line a page carried.
    line = "FAILED test/test_nn.py::TestNN::test_conv6"
    storage.alerts.save_with_failing_set(TRUNK, alert(failure_lines=(line,)), now_firing=True)
    storage.alerts.save_with_failing_set(TRUNK, alert("other"), now_firing=True)
    found = {e.job: e.failure_line_ids for e in storage.alerts.episodes(TRUNK, NOW)}
    assert found == {JOB: tuple(line_ids([line])), "other": ()}


def fixed(job: str = JOB, culprit: int = 1, **changes: object) -> FixedEpisode:
    def ref(n: int) -> AlertCommit:
        return AlertCommit(
            seq=n, sha=commit(n).sha, time=commit(n).time, title=f"commit {n}", author="a", pr=n
        )

    return dataclasses.replace(
        FixedEpisode(
            job=job,
            culprit=ref(culprit),
            fix=ref(culprit + 2),
            failed_commits=2,
            detected_at=NOW,
            last_pass=ref(culprit - 1),
            failure_lines=("FAILED test/test_nn.py::test_conv6",),
        ),
        **changes,
    )


def test_a_fixed_breakage_is_kept_once_per_job_and_culprit(storage: Storage) -> None:
    alerts = storage.alerts
    assert alerts.fixed(TRUNK) == []
    first = fixed()
    alerts.save_fixed(TRUNK, first)
    alerts.save_fixed(TRUNK, fixed("other", last_pass=None, failure_lines=()))
    # Recorded again (a third failure came in): it replaces the job's and culprit's one.
    grown = fixed(failed_commits=3, fix=fixed(culprit=2).fix)
    alerts.save_fixed(TRUNK, grown)
    assert alerts.fixed(TRUNK) == [fixed("other", last_pass=None, failure_lines=()), grown]  # by sha, job
    # An older failure came in below it: the breakage's culprit moved; the old one is gone.
    moved = fixed(culprit=0, failed_commits=4, last_pass=None)
    alerts.save_fixed(TRUNK, moved, supersedes=[grown])
    assert [(f.job, f.culprit.seq) for f in alerts.fixed(TRUNK)] == [(JOB, 0), ("other", 1)]  # sha 0 first
    assert alerts.fixed("other/repo#main") == []


def test_a_fixed_breakage_expires_a_month_after_it_was_detected(aws: dict) -> None:
    aws["storage"].alerts.save_fixed(TRUNK, fixed())
    key = {"pk": {"S": keys.fixed(TRUNK)}, "sk": {"S": keys.fixed_episode(commit(1).sha, JOB)}}
    item = boto3.client("dynamodb").get_item(TableName=aws["table"], Key=key)["Item"]
    assert item[TTL_ATTRIBUTE]["N"] == str(int((NOW + EPISODE_RETENTION).timestamp()))
    assert item["kind"]["S"] == "fixed"


# --- ticks --------------------------------------------------------------------------------


def test_a_poll_tick_settles_once_every_cell_is_counted(storage: Storage) -> None:
    ticks, trunks = storage.ticks, storage.trunks
    ticks.open_poll(TRUNK, "poll-1", 3, NOW)
    assert trunks.state(TRUNK).unsettled == {"poll-1": NOW}
    assert not ticks.settle(TRUNK, "poll-1", NOW)  # nothing evaluated yet
    assert not ticks.count(TRUNK, "poll-1", ["101", "102"], NOW)
    assert not ticks.count(TRUNK, "poll-1", ["101", "102"], NOW)  # a redelivered batch counts once
    assert not ticks.settle(TRUNK, "poll-1", NOW)
    assert ticks.count(TRUNK, "poll-1", ["103"], NOW)
    assert ticks.settle(TRUNK, "poll-1", NOW)
    assert not ticks.settle(TRUNK, "poll-1", NOW)  # settled once
    assert not ticks.count(TRUNK, "poll-1", ["104"], NOW)
    assert trunks.state(TRUNK).unsettled == {}
    assert not ticks.count(TRUNK, "no-such-poll", ["101"], NOW)


def test_the_halves_of_a_bisected_batch_count_no_record_twice(storage: Storage) -> None:
    ticks = storage.ticks
    ticks.open_poll(TRUNK, "poll-1", 5, NOW)
    assert not ticks.count(TRUNK, "poll-1", ["101", "102", "103", "104"], NOW)
    # The invocation died after counting; Lambda bisects and retries the halves.
    assert not ticks.count(TRUNK, "poll-1", ["101", "102"], NOW)
    assert not ticks.count(TRUNK, "poll-1", ["103", "104"], NOW)
    assert not ticks.settle(TRUNK, "poll-1", NOW)  # 4 of 5 records: the tick waits
    assert ticks.count(TRUNK, "poll-1", ["105"], NOW)
    assert ticks.settle(TRUNK, "poll-1", NOW)


def test_a_retried_batch_that_completed_the_count_may_settle_again(storage: Storage) -> None:
    ticks = storage.ticks
    ticks.open_poll(TRUNK, "poll-1", 2, NOW)
    assert ticks.count(TRUNK, "poll-1", ["101", "102"], NOW)
    # The invocation died before settling: its retry finishes the work.
    assert ticks.count(TRUNK, "poll-1", ["101", "102"], NOW)
    assert ticks.settle(TRUNK, "poll-1", NOW)
    assert not ticks.count(TRUNK, "poll-1", ["101", "102"], NOW)


def test_a_newer_poll_stays_open_when_an_older_one_settles(storage: Storage) -> None:
    ticks = storage.ticks
    ticks.open_poll(TRUNK, "poll-1", 1, NOW)
    ticks.open_poll(TRUNK, "poll-2", 1, NOW + timedelta(minutes=1))
    assert ticks.count(TRUNK, "poll-1", ["101"], NOW)
    assert ticks.settle(TRUNK, "poll-1", NOW)
    assert storage.trunks.state(TRUNK).unsettled == {"poll-2": NOW + timedelta(minutes=1)}


def test_a_tick_that_never_settles_is_settled_by_force(storage: Storage) -> None:
    ticks = storage.ticks
    ticks.open_poll(TRUNK, "poll-1", 3, NOW)
    assert not ticks.count(TRUNK, "poll-1", ["101"], NOW)  # the other records were dead-lettered
    assert ticks.force_settle(TRUNK, "poll-1", NOW)
    assert storage.trunks.state(TRUNK).unsettled == {}
    assert not ticks.force_settle(TRUNK, "poll-1", NOW)  # settled once
    assert not ticks.count(TRUNK, "poll-1", ["102", "103"], NOW)
    assert not ticks.force_settle(TRUNK, "expired-poll", NOW)  # no tick: nothing to settle


def test_deliveries_of_one_bucket_share_a_group_that_settles_after_it_closes(storage: Storage) -> None:
    ticks = storage.ticks
    first = ticks.join_group(TRUNK, 1, NOW + timedelta(milliseconds=100))
    second = ticks.join_group(TRUNK, 2, NOW + timedelta(milliseconds=200))
    assert first.opened and not second.opened
    assert (second.id, second.closes_at) == (first.id, NOW + GROUP_WINDOW)
    state = storage.trunks.state(TRUNK)
    assert (state.unsettled, state.last_delivery_at) == (
        {first.id: NOW + timedelta(milliseconds=100)},
        NOW + timedelta(milliseconds=100),
    )
    # Every cell counted before the bucket closed: the group waits for its end.
    assert not ticks.count(TRUNK, first.id, ["1", "2", "3"], NOW + timedelta(milliseconds=300))
    assert not ticks.settle(TRUNK, first.id, NOW + timedelta(milliseconds=300))
    assert ticks.settle(TRUNK, first.id, first.closes_at)
    assert storage.trunks.state(TRUNK).unsettled == {}
    # A late delivery of a settled bucket goes to the next one.
    late = ticks.join_group(TRUNK, 1, NOW + timedelta(milliseconds=400))
    assert late.opened and late.id != first.id and late.closes_at == NOW + 2 * GROUP_WINDOW


def test_a_sweep_tick_is_settled_at_once(storage: Storage) -> None:
    storage.ticks.settle_sweep(TRUNK, "sweep-1", NOW)
    assert not storage.ticks.settle(TRUNK, "sweep-1", NOW)
    assert not storage.ticks.count(TRUNK, "sweep-1", ["101"], NOW)


# --- shards ----------------------------------------------------------------------------

SHARD = "pull / linux-jammy / test (default, 1, 2, linux.2xlarge)"


def report(attempt: int, conclusion: str, completed: bool = True) -> ShardReport:
    return ShardReport(commit(1).sha, SHARD, 7, attempt, completed, conclusion, url=f"run/{attempt}")


def test_a_shard_is_replaced_only_by_a_newer_report(storage: Storage) -> None:
    shards, key = storage.shards, "pull / linux-jammy / test (default, linux.2xlarge)"
    assert shards.report(TRUNK, report(1, "queued", completed=False), NOW)
    assert shards.report(TRUNK, report(1, "failure"), NOW)
    assert not shards.report(TRUNK, report(1, "queued", completed=False), NOW)  # pending after done
    assert not shards.report(TRUNK, report(1, "success"), NOW)  # the same attempt again
    assert shards.report(TRUNK, report(2, "queued", completed=False), NOW)  # a retry: the latest attempt
    (retrying,) = shards.runs(TRUNK, commit(1).sha, key)
    assert (retrying.conclusion, retrying.attempt) == ("failure", 1)  # a result never goes back to pending
    assert not shards.report(TRUNK, report(1, "success"), NOW)  # an older attempt, done
    assert shards.report(TRUNK, report(2, "success"), NOW)
    assert not shards.report(TRUNK, report(2, "queued", completed=False), NOW)  # its queued, late
    assert shards.report(TRUNK, report(2, "success"), NOW)  # the stored report again: a redelivery
    (reported,) = shards.runs(TRUNK, commit(1).sha, key)  # only the shards reported
    assert (reported.name, reported.conclusion, reported.attempt, reported.url, reported.failed_before) == (
        SHARD,
        "success",
        2,
        "run/2",
        True,
    )


def test_the_same_report_again_is_the_stored_one_and_changes_nothing(storage: Storage) -> None:
    shards, key = storage.shards, "pull / linux-jammy / test (default, linux.2xlarge)"
    for _ in range(2):
        assert shards.report(TRUNK, report(1, "queued", completed=False), NOW)
    for _ in range(2):
        assert shards.report(TRUNK, report(1, "failure"), NOW)
    (run,) = shards.runs(TRUNK, commit(1).sha, key)
    assert (run.conclusion, run.attempt, run.url, run.failed_before) == ("failure", 1, "run/1", False)


def test_a_late_failed_attempt_makes_the_stored_pass_flaky(storage: Storage) -> None:
    shards = storage.shards
    assert shards.report(TRUNK, report(2, "success"), NOW)
    assert shards.report(TRUNK, report(1, "failure"), NOW)
    (run,) = shards.runs(TRUNK, commit(1).sha, "pull / linux-jammy / test (default, linux.2xlarge)")
    assert (run.conclusion, run.attempt, run.failed_before) == ("success", 2, True)


# --- runs ---------------------------------------------------------------------------------


def test_a_run_is_recorded_as_a_trunk_run_or_not(storage: Storage) -> None:
    runs = storage.runs
    assert runs.get(TRUNK, 7) is None
    runs.save(TRUNK, RunRecord(7, commit(1).sha, of_trunk=True), NOW)
    runs.save(TRUNK, RunRecord(8, commit(1).sha, of_trunk=False), NOW)
    assert runs.get(TRUNK, 7) == RunRecord(7, commit(1).sha, True)
    assert runs.get(TRUNK, 8) == RunRecord(8, commit(1).sha, False)
    assert runs.get("other/repo#main", 7) is None


def test_held_reports_are_kept_by_run_once_each_until_released(storage: Storage) -> None:
    runs = storage.runs
    queued, failed = report(1, "queued", completed=False), report(1, "failure")
    other_run = dataclasses.replace(failed, run_id=8)
    for held in (queued, failed, failed, other_run):  # a redelivery holds the same item
        runs.hold(TRUNK, held, NOW)
    assert sorted(runs.held(TRUNK, 7), key=str) == sorted([queued, failed], key=str)
    runs.release(TRUNK, [failed])
    runs.release(TRUNK, [failed])  # released twice: nothing left to release
    assert runs.held(TRUNK, 7) == [queued] and runs.held(TRUNK, 8) == [other_run]


# --- reruns -------------------------------------------------------------------------------


def rerun(job: str = JOB, role: str = "last_pass", episode: datetime = NOW, **changes: object) -> RerunRecord:
    record = RerunRecord(
        job=job,
        episode=episode,
        role=role,
        sha="a" * 40 if role == "last_pass" else "c" * 40,
        culprit_sha="c" * 40,
        last_pass_sha="a" * 40,
        planned_at=NOW,
    )
    return dataclasses.replace(record, **changes)


def test_an_episodes_reruns_are_added_once_and_updated(storage: Storage) -> None:
    reruns = storage.reruns
    assert reruns.add(TRUNK, rerun(), RETENTION)
    assert not reruns.add(TRUNK, rerun(sha="b" * 40), RETENTION)  # that role is taken
    assert reruns.add(TRUNK, rerun(role="culprit"), RETENTION)
    assert reruns.add(TRUNK, rerun(episode=NOW + timedelta(hours=5)), RETENTION)  # a later episode
    assert reruns.add(TRUNK, rerun(job=JOB + " 2"), RETENTION)
    assert [(r.role, r.sha) for r in reruns.of_episode(TRUNK, JOB, NOW)] == [
        ("culprit", "c" * 40),
        ("last_pass", "a" * 40),
    ]
    sent = rerun(status="pending", requested_at=NOW, job_id=2**40 + 7, shard="s (1, 2)", tries=1)
    reruns.update(TRUNK, sent, RETENTION)
    assert reruns.of_episode(TRUNK, JOB, NOW)[1] == sent
    # Buildkite names a job by a UUID
    retried = dataclasses.replace(sent, job_id="0190d5a2-7f3e-4c1e-9b8a-2f6d1c0e4a11", tries=2)
    reruns.update(TRUNK, retried, RETENTION)
    assert reruns.of_episode(TRUNK, JOB, NOW)[1] == retried
    assert reruns.of_episode("other#main", JOB, NOW) == []


def test_open_reruns_are_those_without_result_and_those_requested_lately(storage: Storage) -> None:
    reruns = storage.reruns
    hour_ago = NOW - timedelta(hours=1)
    reruns.add(TRUNK, rerun("planned"), RETENTION)
    reruns.add(TRUNK, rerun("refused", status="request_failed", reason="403"), RETENTION)
    reruns.add(
        TRUNK, rerun("done lately", status="success", requested_at=NOW - timedelta(minutes=5)), RETENTION
    )
    reruns.add(
        TRUNK, rerun("done long ago", status="failure", requested_at=NOW - timedelta(hours=2)), RETENTION
    )
    reruns.add(TRUNK, rerun("given up", planned_at=NOW - timedelta(days=2)), RETENTION)
    found = reruns.open(TRUNK, NOW - timedelta(hours=12), hour_ago)
    assert sorted(r.job for r in found) == ["done lately", "planned", "refused"]


# --- notification logs --------------------------------------------------------------------


def test_log_entries_per_receiver(storage: Storage) -> None:
    logs = storage.logs
    entry = LogEntry("sns", "f1", "TrunkJobFailing", job=JOB)
    logs.save(TRUNK, entry, NOW, RETENTION)
    entry.seq, entry.last_status, entry.last_sent_at = 1, "firing", NOW  # not stored until saved
    assert logs.of_receiver(TRUNK, "sns") == {"f1": LogEntry("sns", "f1", "TrunkJobFailing", job=JOB)}
    logs.save(TRUNK, entry, NOW, RETENTION)
    trunk_level = LogEntry(
        "sns",
        "f2",
        "TrunkBroken",
        jobs=["a", "b"],
        held_by=["s-1"],
        labels={"alertname": "TrunkBroken"},
        annotations={"summary": "s"},
    )
    logs.save(TRUNK, trunk_level, NOW, RETENTION)
    logs.save(
        TRUNK,
        LogEntry("sns-2", "f1", "TrunkJobFailing", acknowledged="2026-11-18T12:00:00.000Z"),
        NOW,
        RETENTION,
    )
    assert logs.of_receiver(TRUNK, "sns") == {"f1": entry, "f2": trunk_level}
    assert logs.of_receiver(TRUNK, "sns-2")["f1"].acknowledged == "2026-11-18T12:00:00.000Z"
    assert list(logs.of_receiver(TRUNK, "sns-2")) == ["f1"]
    assert logs.of_receiver("other/repo#main", "sns") == {}
    # One entry by its receiver and fingerprint.
    assert logs.entry(TRUNK, "sns", "f2") == trunk_level
    assert logs.entry(TRUNK, "sns", "f3") is None and logs.entry(TRUNK, "sns-3", "f1") is None


def lease(claim_id: str, seconds: int = 20) -> Lease:
    return Lease(claim_id, NOW + timedelta(seconds=seconds))


def test_a_log_entry_is_claimed_by_one_delivery_at_a_time(storage: Storage) -> None:
    logs = storage.logs
    new = LogEntry("sns", "f1", "TrunkJobFailing", job=JOB)
    assert logs.claim(TRUNK, new, lease("a"), NOW, RETENTION)
    assert logs.of_receiver(TRUNK, "sns") == {"f1": dataclasses.replace(new, lease=lease("a"))}
    # A second claim is refused while the lease is live, whoever asks.
    assert not logs.claim(TRUNK, new, lease("b"), NOW + timedelta(seconds=19), RETENTION)
    # Only the holder advances it.
    sent = dataclasses.replace(new, seq=1, last_status="firing", last_sent_at=NOW)
    assert not logs.advance(TRUNK, sent, lease("b"), NOW, RETENTION)
    assert logs.of_receiver(TRUNK, "sns")["f1"].seq == 0
    assert logs.advance(TRUNK, sent, lease("a"), NOW, RETENTION)
    assert logs.of_receiver(TRUNK, "sns") == {"f1": sent}  # recorded, the lease cleared
    assert not logs.advance(TRUNK, sent, lease("a"), NOW, RETENTION)  # once
    # A claim holds only at the seq it read.
    assert not logs.claim(TRUNK, new, lease("c"), NOW, RETENTION)
    assert logs.claim(TRUNK, sent, lease("c"), NOW, RETENTION)
    assert logs.of_receiver(TRUNK, "sns")["f1"] == dataclasses.replace(sent, lease=lease("c"))
    assert logs.of_receiver(TRUNK, "sns-2") == {}  # another receiver's log: untouched


def test_an_expired_lease_is_taken_over_and_its_holder_records_nothing(storage: Storage) -> None:
    logs = storage.logs
    entry = LogEntry("sns", "f1", "TrunkBroken", seq=2, last_status="firing", last_sent_at=NOW)
    logs.save(TRUNK, entry, NOW, RETENTION)
    assert not logs.claim(TRUNK, dataclasses.replace(entry, seq=0), lease("a"), NOW, RETENTION)  # stored
    assert logs.claim(TRUNK, entry, lease("dead"), NOW, RETENTION)
    later = NOW + timedelta(seconds=20)  # the lease has passed: its invocation died
    assert logs.claim(TRUNK, entry, lease("b", seconds=40), later, RETENTION)
    resolved = dataclasses.replace(entry, seq=3, last_status="resolved", last_sent_at=later)
    assert not logs.advance(TRUNK, resolved, lease("dead"), later, RETENTION)
    logs.release(TRUNK, entry, lease("dead"))  # not its lease any more: no change
    assert logs.of_receiver(TRUNK, "sns")["f1"].lease == lease("b", seconds=40)
    assert logs.advance(TRUNK, resolved, lease("b", seconds=40), later, RETENTION)
    assert logs.of_receiver(TRUNK, "sns") == {"f1": resolved}


def test_a_released_claim_leaves_the_entry_as_it_was(storage: Storage) -> None:
    logs = storage.logs
    entry = LogEntry("slack:a", "f1", "TrunkBroken", seq=1, last_status="firing", held_by=["s-1"])
    logs.save(TRUNK, entry, NOW, RETENTION)
    assert logs.claim(TRUNK, entry, lease("a"), NOW, RETENTION)
    logs.release(TRUNK, entry, lease("a"))
    assert logs.of_receiver(TRUNK, "slack:a") == {"f1": entry}
    assert logs.claim(TRUNK, entry, lease("b"), NOW, RETENTION)  # free again at once
    logs.release(TRUNK, LogEntry("slack:a", "f9", "TrunkBroken"), lease("b"))  # no such entry
    assert logs.of_receiver(TRUNK, "slack:a")["f1"].lease == lease("b")


def rejection(receiver: str, fingerprint: str, status: str = "resolved") -> Rejection:
    answer = "GitHub issues receiver g: PATCH /repos/a/b/issues/7 answered 422: Validation Failed"
    return Rejection(receiver, fingerprint, "TrunkBroken", None, status, status, NOW, answer)


def test_rejections_sit_beside_the_log_entries_and_are_listed_alone(storage: Storage) -> None:
    logs = storage.logs
    for receiver, fingerprint in (("slack:a", "f2"), ("github_issues:a/b", "f1"), ("slack:a", "f1")):
        logs.save(TRUNK, LogEntry(receiver, fingerprint, "TrunkBroken", last_status="firing"), NOW, RETENTION)
    logs.save_rejection(TRUNK, rejection("slack:a", "f2", "firing"), RETENTION)
    logs.save_rejection(TRUNK, rejection("github_issues:a/b", "f1"), RETENTION)
    logs.save_rejection(TRUNK, rejection("slack:a", "f2"), RETENTION)  # the latest replaces it
    logs.save_rejection("other/repo#main", rejection("slack:a", "f9"), RETENTION)
    assert logs.rejected(TRUNK) == [rejection("github_issues:a/b", "f1"), rejection("slack:a", "f2")]
    assert logs.rejected("quiet/repo#main") == []
    # The receivers' own entries are as they were: a rejection is not an entry.
    assert sorted(logs.of_receiver(TRUNK, "slack:a")) == ["f1", "f2"]
    assert list(logs.of_receiver(TRUNK, "github_issues:a/b")) == ["f1"]


def test_on_the_table_a_rejection_is_an_item_of_its_trunks_log_partition(aws: dict) -> None:
    """Beside the receiver's entry, under a sort key of its own."""
    logs = aws["storage"].logs
    logs.save(TRUNK, LogEntry("slack:a", "f2", "TrunkBroken", last_status="firing"), NOW, RETENTION)
    logs.save_rejection(TRUNK, rejection("slack:a", "f2", "firing"), RETENTION)
    items = boto3.client("dynamodb").query(
        TableName=aws["table"],
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": f"LOG#{TRUNK}"}},
    )["Items"]
    assert sorted(item["sk"]["S"] for item in items) == ["REJECTED#slack:a#f2", "slack:a#f2"]


def ack(fingerprint: str, minutes: int = 0, by: str = "alice") -> Acknowledgement:
    at = NOW + timedelta(minutes=minutes)
    return Acknowledgement(fingerprint, "TrunkJobFailing", JOB, at, by, "on it", "silence s-1")


def test_the_first_live_acknowledgement_of_an_alert_stands_until_it_ends(storage: Storage) -> None:
    logs = storage.logs
    assert logs.acks(TRUNK) == []
    assert logs.add_ack(TRUNK, ack("f2")) and logs.add_ack(TRUNK, ack("f1", by="bob"))
    assert not logs.add_ack(TRUNK, ack("f1", minutes=5, by="carol"))  # bob's stands
    assert logs.acks(TRUNK) == [ack("f1", by="bob"), ack("f2")]
    assert logs.acks("other/repo#main") == []
    assert logs.of_receiver(TRUNK, "f1") == {}  # no notification log entry
    ended = NOW + timedelta(hours=1)
    logs.end_ack(TRUNK, ack("f1", minutes=5), ended, RETENTION)  # not the one stored: no change
    assert logs.acks(TRUNK)[0].live
    logs.end_ack(TRUNK, ack("f1", by="bob"), ended, RETENTION)
    logs.end_ack(TRUNK, ack("f1", by="bob"), ended + timedelta(hours=1), RETENTION)  # ended once
    assert logs.acks(TRUNK) == [ack("f1", by="bob").ended(ended), ack("f2")]
    assert logs.add_ack(TRUNK, ack("f1", minutes=90, by="dave"))  # the next episode's
    assert logs.acks(TRUNK)[0] == ack("f1", minutes=90, by="dave")


def test_a_live_acknowledgement_never_expires_and_an_ended_one_after_the_retention(aws: dict) -> None:
    logs = aws["storage"].logs
    logs.add_ack(TRUNK, ack("f1"))
    key = {"pk": {"S": keys.acks(TRUNK)}, "sk": {"S": "f1"}}

    def expiry() -> str | None:
        item = boto3.client("dynamodb").get_item(TableName=aws["table"], Key=key)["Item"]
        assert item["kind"] == {"S": "ack"}
        return item.get(TTL_ATTRIBUTE, {}).get("N")

    assert expiry() is None
    ended = NOW + timedelta(hours=2)
    logs.end_ack(TRUNK, ack("f1"), ended, RETENTION)
    assert expiry() == str(int((ended + RETENTION).timestamp()))


def test_a_claim_types_a_new_entry_and_keeps_a_firing_one_from_expiring(aws: dict) -> None:
    logs = aws["storage"].logs

    def stored(fingerprint: str) -> dict[str, Any]:
        key = {"pk": {"S": keys.logs(TRUNK)}, "sk": {"S": keys.log("sns", fingerprint)}}
        item: dict[str, Any] = boto3.client("dynamodb").get_item(TableName=aws["table"], Key=key)["Item"]
        return item

    assert logs.claim(TRUNK, LogEntry("sns", "f1", "TrunkBroken"), lease("a"), NOW, RETENTION)
    new = stored("f1")
    assert new["kind"] == {"S": "notification"}  # what the stream's filters and Queries read
    assert new[TTL_ATTRIBUTE] == {"N": str(int((NOW + RETENTION).timestamp()))}  # if never advanced
    firing = LogEntry("sns", "f2", "TrunkBroken", seq=1, last_status="firing")
    logs.save(TRUNK, firing, NOW, RETENTION)
    assert logs.claim(TRUNK, firing, lease("b"), NOW, RETENTION)
    assert TTL_ATTRIBUTE not in stored("f2")  # its resolution is still due


# --- silences -----------------------------------------------------------------------------


def silence(
    silence_id: str, ends_at: datetime = NOW + timedelta(hours=1), version: int | None = None
) -> SilenceRecord:
    return SilenceRecord(
        id=silence_id,
        matchers=(StoredMatcher("job", "pull / .*", True, True), StoredMatcher("repo", "x", False, False)),
        starts_at=NOW,
        ends_at=ends_at,
        updated_at=NOW,
        created_by="alice",
        comment="known",
        expires_at=ends_at + timedelta(hours=120),
        version=version,
    )


def audit(silence_id: str, action: str, at: datetime = NOW) -> SilenceAudit:
    return SilenceAudit(silence_id, action, "alice", at, None, {"id": silence_id}, NOW + timedelta(days=6))


def test_silences_and_their_audit_trail(storage: Storage) -> None:
    silences = storage.silences
    silences.commit(
        [silence("s-1"), silence("s-2", ends_at=NOW)], [audit("s-1", "create"), audit("s-2", "create")]
    )
    stored = silences.get("s-1")
    assert stored is not None and stored.version is not None
    assert dataclasses.replace(stored, version=None) == silence("s-1")
    assert silences.get("s-3") is None
    assert [s.id for s in silences.listable(NOW)] == ["s-1", "s-2"]
    assert [s.id for s in silences.listable(NOW + timedelta(hours=120, minutes=30))] == ["s-1"]
    silences.commit(
        [dataclasses.replace(stored, comment="updated")], [audit("s-1", "update", NOW + timedelta(seconds=1))]
    )
    assert [(a.silence_id, a.action) for a in silences.audit()] == [
        ("s-1", "create"),
        ("s-2", "create"),
        ("s-1", "update"),
    ]


def test_a_stale_silence_conflicts_and_writes_nothing(storage: Storage) -> None:
    silences = storage.silences
    silences.commit([silence("s-1")], [audit("s-1", "create")])
    read = silences.get("s-1")
    assert read is not None
    silences.commit(
        [dataclasses.replace(read, comment="first")], [audit("s-1", "update", NOW + timedelta(seconds=1))]
    )
    with pytest.raises(Conflict):
        silences.commit(
            [dataclasses.replace(read, comment="second"), silence("s-2")],
            [audit("s-1", "update", NOW + timedelta(seconds=2)), audit("s-2", "create")],
        )
    with pytest.raises(Conflict):
        silences.commit(
            [silence("s-1")], [audit("s-1", "create", NOW + timedelta(seconds=3))]
        )  # exists already
    stored = silences.get("s-1")
    assert stored is not None and stored.comment == "first"
    assert silences.get("s-2") is None
    assert [a.action for a in silences.audit()] == ["create", "update"]


# --- the DynamoDB storage's table ---------------------------------------------------------


def _other_table(aws: dict[str, Any]) -> Storage:
    """A second DynamoDB storage, on a second table of the first one's schema."""
    client = boto3.client("dynamodb")
    schema = client.describe_table(TableName=aws["table"])["Table"]
    client.create_table(
        TableName="trunkwatch-other",
        KeySchema=schema["KeySchema"],
        AttributeDefinitions=schema["AttributeDefinitions"],
        BillingMode="PAY_PER_REQUEST",
    )
    return open_table("trunkwatch-other", "us-east-1")


def test_two_dynamodb_storages_each_write_their_own_table(aws: dict[str, Any]) -> None:
    """Nothing is bound process-wide: a second storage on another table, opened after the
    first, leaves the first one's requests on its own table."""
    first: Storage = aws["storage"]
    other = _other_table(aws)
    first.trunks.record_poll_failure(TRUNK, NOW, "timeout", "first table")
    other.trunks.record_poll_failure(TRUNK, NOW, "refused", "other table")
    assert first.trunks.state(TRUNK).poll_error == "first table"
    assert other.trunks.state(TRUNK).poll_error == "other table"
    assert boto3.client("dynamodb").scan(TableName="trunkwatch-other")["Count"] == 1


def _cells(*seqs: int) -> list[CellWrite]:
    return [CellWrite(Cell(JOB, commit(n).sha, CellState.PASS), commit(n), n, "poll-1") for n in seqs]


def test_a_walk_of_a_job_s_cells_reads_its_own_table_a_page_at_a_time(aws: dict[str, Any]) -> None:
    """`newest_first` is lazy: each page is read from the store's table when the walk comes
    to it, whatever the caller did in between (another storage on another table included)."""
    first: Storage = aws["storage"]
    other = _other_table(aws)
    first.cells.save_all(TRUNK, _cells(10, 9, 8, 7, 6), RETENTION)
    other.cells.save_all(TRUNK, _cells(20, 4), RETENTION)
    walk = first.cells.newest_first(TRUNK, JOB, limit=10, page_size=2)
    assert [next(walk).seq, next(walk).seq] == [10, 9]
    assert other.cells.newest_seq(TRUNK, JOB) == 20
    first.cells.save_all(TRUNK, _cells(5), RETENTION)  # below the page read: the walk finds it
    assert [cell.seq for cell in walk] == [8, 7, 6, 5]


def test_a_model_of_the_items_reaches_no_table() -> None:
    """The models of `items.py` describe items; only their bound subclasses (`table.bind`)
    name a table."""
    with pytest.raises(AttributeError, match="Meta"):
        TrunkStateItem.get("trunk#x", "state")


def test_a_pending_cell_that_fails_otherwise_raises_after_the_others_are_written(
    aws: dict[str, Any],
) -> None:
    """Only a failed condition (a result is there) is expected of a pending cell's put: any
    other error reaches the writer (which writes no state string over it), once the other
    puts have ended."""
    storage: Storage = aws["storage"]

    def pending(job: str, failure_lines: tuple[str, ...] = ()) -> CellWrite:
        cell = Cell(job, commit(1).sha, CellState.PENDING, url="queued", failure_lines=failure_lines)
        return CellWrite(cell, commit(1), 1, "p")

    too_big = ("x" * 1000,) * 500  # past DynamoDB's 400 KB item limit
    writes = [pending("a"), pending("b"), pending("c", too_big), pending("d"), pending("e")]
    with pytest.raises(PutError, match="size"):
        storage.cells.save_all(TRUNK, writes, RETENTION)
    assert [job for job in "abcde" if storage.cells.newest_seq(TRUNK, job) == 1] == ["a", "b", "d", "e"]
