"""The commit ledger under concurrency (app/ledger.py): a poll and a webhook delivery, or two
deliveries, stepped through every interleaving of their storage calls (in memory) end as the
two run one after the other, in one order or the other: the same job index (each one a
serial order makes), commit items (seqs, pointers, state strings read through the index),
staleness window and cells."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from itertools import permutations
from typing import Any

import pytest

from tests.support import interleave, webhooks
from trunkwatch.app import ledger
from trunkwatch.app.ingest import poll_trunk
from trunkwatch.app.webhook import ingest_delivery, trunk_of
from trunkwatch.domain.cells import CellState, Commit, JobRun, merge_codes
from trunkwatch.domain.commits import ShaPointer, StoredCommit
from trunkwatch.domain.config import load_deployment
from trunkwatch.domain.runs import RunRecord
from trunkwatch.sources import webhook
from trunkwatch.sources.base import CommitRuns, Snapshot
from trunkwatch.storage.memory import memory_storage
from trunkwatch.storage.port import Storage

NOW = datetime(2026, 11, 18, 16, 0, tzinfo=UTC)
X, A, B, C = "0" * 39 + "9", "a" * 40, "b" * 40, "c" * 40
DEPLOYMENT = load_deployment(
    {"trunks": [{"repo": webhooks.REPO, "branch": "main", "source": "github", "webhook": True}]}
)
TRUNK = DEPLOYMENT.trunks[0]
TRUNK_ID = TRUNK.trunk_id
RULE = DEPLOYMENT.rule_for(TRUNK)
# The calls that read or write the ledger: each is a step another writer may come between.
GATED = {
    "trunks": frozenset({"job_names", "add_job_names"}),
    "commits": frozenset({"newest", "get", "pointers", "seqs_of", "place", "save_states"}),
}
# Where no writer places a commit, pointers never change: reading them is no step.
NOT_PLACING = {**GATED, "commits": GATED["commits"] - {"pointers", "seqs_of"}}
# Writers that give commits their first job under known columns: the staleness window (the
# trunk's state) changes, the job index does not.
FIRST_JOBS = {**NOT_PLACING, "trunks": frozenset({"state", "save_recent_seqs"})}
# Setup: X is on the trunk with one job passed, and each workflow's `(workflow)` pass.
JOBS = ["pull / x", "pull / (workflow)", "lint / (workflow)", "trunk / (workflow)"]


def deliver(event: str, payload: dict[str, Any]) -> interleave.Writer:
    trunk = trunk_of(DEPLOYMENT, event, payload)
    assert not isinstance(trunk, str), trunk
    return lambda storage: ingest_delivery(storage, trunk, RULE, event, payload, NOW)


def pushed(shas: list[str], before: str) -> dict[str, Any]:
    return webhooks.push(shas, [f"2026-11-18T15:0{i}:00Z" for i in range(len(shas))], before=before)


def push(shas: list[str], before: str) -> interleave.Writer:
    return deliver("push", pushed(shas, before))


def commit_of(sha: str, shas: list[str]) -> Commit:
    """A commit as the push of `shas` placed it (the poll reports it with the same metadata)."""
    (commit,) = (
        c
        for c in webhook.push(pushed(shas, ""), f"https://github.com/{webhooks.REPO}").commits
        if c.sha == sha
    )
    return commit


def job(sha: str, name: str, workflow: str, conclusion: str) -> interleave.Writer:
    return deliver("workflow_job", webhooks.workflow_job(sha, name, workflow=workflow, conclusion=conclusion))


class _Source:
    def __init__(self, results: list[CommitRuns]) -> None:
        self.results = results

    def poll(self, state: dict[str, Any], now: datetime) -> Snapshot:
        return Snapshot(list(self.results))


def poll(*results: CommitRuns) -> interleave.Writer:
    return lambda storage: poll_trunk(storage, TRUNK, RULE, _Source(list(results)), NOW)


def setup() -> Storage:
    """X placed with its jobs' states; X's commit as a push delivered it. The runs whose jobs
    are delivered are known trunk runs (whether a run counts is test_webhook_ingest's)."""
    storage = memory_storage()
    for sha in (X, A, B, C):
        for workflow in ("pull", "lint", "trunk"):
            run_id = webhooks.run_id_of(sha, workflow)
            storage.runs.save(TRUNK_ID, RunRecord(run_id, sha, of_trunk=True), NOW)
    push([X], "0" * 40)(storage)
    assert storage.trunks.add_job_names(TRUNK_ID, [], JOBS)
    (placed,) = storage.commits.newest(TRUNK_ID, 1)
    assert storage.commits.save_states(TRUNK_ID, placed.seq, "", "PPPP")
    return storage


def stored(storage: Storage) -> dict[str, Any]:
    """The ledger's items and the cells: what every interleaving must leave as a serial run.
    State strings are read through the job index: when two writers append columns at once,
    which comes first is a tie either serial order may break."""
    names = storage.trunks.job_names(TRUNK_ID)
    commits = storage.commits.newest(TRUNK_ID, 100)
    shas = {c.commit.sha for c in commits} | {X, A, B, C}
    return {
        "jobs": set(names),
        "commits": [(c.seq, c.commit, _decoded(names, c.states)) for c in commits],
        "pointers": storage.commits.pointers(TRUNK_ID, shas),
        "recent": storage.trunks.state(TRUNK_ID).recent_seqs,
        "cells": {
            (job, cell.seq): (cell.state, cell.commit, cell.url, cell.failure_lines)
            for job in names
            for cell in storage.cells.newest_first(TRUNK_ID, job, limit=100, page_size=100)
        },
    }


def _decoded(names: list[str], states: str) -> dict[str, str]:
    assert len(states) <= len(names)
    return {names[i]: code for i, code in enumerate(states) if code != "-"}


def assert_every_interleaving_is_serial(
    writers: list[interleave.Writer],
    check: Callable[[dict[str, Any]], None],
    gated: dict[str, frozenset[str]] = GATED,
    start: Callable[[], Storage] = setup,
    states_only: bool = False,
) -> int:
    """Every interleaving ends as one of the serial orders (`states_only`: its cells' states;
    their URLs may come from the other writer); the interleavings run."""

    def contents(storage: Storage) -> dict[str, Any]:
        found = stored(storage)
        if states_only:
            found["cells"] = {key: cell[0] for key, cell in found["cells"].items()}
        return found

    serial_runs = [interleave.serial(start, list(order)) for order in permutations(writers)]
    serial = [contents(storage) for storage in serial_runs]
    indexes = [storage.trunks.job_names(TRUNK_ID) for storage in serial_runs]
    for result in map(stored, serial_runs):
        check(result)
    runs = 0
    for choices, storage in interleave.schedules(start, writers, gated):
        assert contents(storage) in serial, f"interleaving {choices} ends as no serial order"
        # A column once given keeps its job: each index is one a serial order makes.
        assert storage.trunks.job_names(TRUNK_ID) in indexes
        runs += 1
    assert runs > 1
    return runs


def seqs(result: dict[str, Any]) -> dict[str, int]:
    return {commit.sha: seq for seq, commit, _ in result["commits"]}


def decoded(result: dict[str, Any], sha: str) -> dict[str, str]:
    """The commit's states by job."""
    return next(states for _, commit, states in result["commits"] if commit.sha == sha)


@pytest.mark.parametrize("complete", [False, True])
def test_a_poll_and_a_delivery_adding_new_job_columns(complete: bool) -> None:
    runs = (
        JobRun("pull / x", "success"),
        JobRun("pull / (workflow)", "success"),
        JobRun("pull / new-by-poll", "failure"),
        JobRun("lint / (workflow)", "success"),
    )
    polled = poll(CommitRuns(commit_of(X, [X]), runs, complete))

    def check(result: dict[str, Any]) -> None:
        states = decoded(result, X)
        # A complete report without the delivered job makes it no data, if the delivery came first.
        hooked = ("F", "n") if complete else ("F",)
        assert states["pull / new-by-poll"] == "F" and states["lint / new-by-hook"] in hooked
        assert {job for job, _ in result["cells"]} >= {"pull / new-by-poll", "lint / new-by-hook"}

    writers = [polled, job(X, "new-by-hook", "lint", "failure")]
    assert assert_every_interleaving_is_serial(writers, check, NOT_PLACING) > 100


def test_a_poll_and_a_delivery_with_different_results_of_one_job() -> None:
    polled = poll(CommitRuns(commit_of(X, [X]), (JobRun("pull / x", "failure"),), complete=False))

    def check(result: dict[str, Any]) -> None:
        # Whichever wrote last, its cell is the one the state string records.
        (seq,) = seqs(result).values()
        cell = result["cells"][("pull / x", seq)]
        assert decoded(result, X)["pull / x"] == cell[0].code and cell[0].code in "Fn"

    writers = [polled, job(X, "x", "pull", "cancelled")]
    assert assert_every_interleaving_is_serial(writers, check, NOT_PLACING) > 10


def test_a_delivery_pending_while_a_poll_finds_the_result() -> None:
    shard = "x (default, {}, 2, linux)"
    runs = tuple(JobRun(f"pull / {shard.format(n)}", "success") for n in (1, 2))
    polled = poll(CommitRuns(commit_of(X, [X]), runs, complete=False))

    def check(result: dict[str, Any]) -> None:
        (seq,) = seqs(result).values()
        assert decoded(result, X)["pull / x (default, linux)"] == "P"
        assert result["cells"][("pull / x (default, linux)", seq)][0] == CellState.PASS

    # The delivery (shard 2 not reported) has no result to write: the poll's pass stands,
    # whatever the delivery's reads and its shard write interleave with.
    writers = [polled, job(X, shard.format(1), "pull", "success")]
    assert assert_every_interleaving_is_serial(writers, check, NOT_PLACING, states_only=True) > 10


def test_two_deliveries_adding_different_new_jobs() -> None:
    def check(result: dict[str, Any]) -> None:
        assert decoded(result, X) == {**dict.fromkeys(JOBS, "P"), "pull / b": "F", "trunk / c": "P"}

    writers = [job(X, "b", "pull", "failure"), job(X, "c", "trunk", "success")]
    assert assert_every_interleaving_is_serial(writers, check, NOT_PLACING) > 100


def test_two_pushes_delivered_out_of_order_keep_branch_order() -> None:
    def check(result: dict[str, Any]) -> None:
        placed = seqs(result)
        assert placed[X] < placed[A] < placed[B]  # X <- A <- B on the branch

    # B's push (its parent A not placed yet) races A's push.
    assert_every_interleaving_is_serial([push([B], A), push([A], X)], check)


def test_a_poll_and_a_push_placing_the_same_commit() -> None:
    x = CommitRuns(commit_of(X, [X]), (), complete=False)
    a = CommitRuns(Commit(A, NOW - timedelta(minutes=1), "A from the poll"), (JobRun("pull / x", "failure"),))
    polled = poll(a, x)

    def check(result: dict[str, Any]) -> None:
        placed = seqs(result)
        assert len(result["commits"]) == 2 and placed[X] < placed[A]
        assert decoded(result, A) == {"pull / x": "F"}
        assert result["pointers"][A] == ShaPointer(placed[A])

    assert_every_interleaving_is_serial([polled, push([A], X)], check)


def test_a_poll_placing_a_chain_and_an_early_push_of_its_head_place_it_once() -> None:
    # B's push is delivered before A is placed (B goes GAP above the top, as A's child)
    # while the poll places A then B. The poll's placement of B must fail on the pointer it
    # read (B unplaced), whatever B's push did since: each commit at one seq, in branch order.
    a = CommitRuns(commit_of(A, [A, B]), (JobRun("pull / x", "failure"),), complete=False)
    b = CommitRuns(commit_of(B, [B]), (JobRun("pull / x", "success"),), complete=False)
    polled = poll(b, a, CommitRuns(commit_of(X, [X]), (), complete=False))

    def check(result: dict[str, Any]) -> None:
        placed = seqs(result)
        assert len(result["commits"]) == 3 and placed[X] < placed[A] < placed[B]
        assert result["pointers"][B].seq == placed[B]

    assert assert_every_interleaving_is_serial([polled, push([B], A)], check) > 10


def test_a_poll_and_a_delivery_giving_commits_their_first_jobs_keep_both_recent() -> None:
    def start() -> Storage:
        storage = setup()
        push([A, B], X)(storage)
        return storage

    polled = poll(CommitRuns(commit_of(A, [A, B]), (JobRun("pull / x", "failure"),), complete=False))

    def check(result: dict[str, Any]) -> None:
        placed = seqs(result)
        assert result["recent"] == [placed[B], placed[A], placed[X]]

    writers = [polled, job(B, "x", "pull", "success")]
    assert assert_every_interleaving_is_serial(writers, check, FIRST_JOBS, start) > 10


@pytest.mark.parametrize("order", list(permutations(range(3))))
def test_a_chain_of_pushes_keeps_branch_order_whatever_order_they_arrive_in(order: tuple[int, ...]) -> None:
    storage = setup()
    pushes = [push([A], X), push([B], A), push([C], B)]
    for index in order:
        pushes[index](storage)
    placed = seqs(stored(storage))
    assert placed[X] < placed[A] < placed[B] < placed[C]
    assert storage.commits.seqs_of(TRUNK_ID, [A, B, C]) == {A: placed[A], B: placed[B], C: placed[C]}


def test_plan_numbers_between_placed_neighbours() -> None:
    plan = ledger.plan_seqs
    # After the parent, below the child placed first, GAP above the top for a lone child.
    assert plan(["a", "b"], "p", {"p": ShaPointer(10), "b": ShaPointer(child=500)}, set(), 10) == {
        "a": 11,
        "b": 12,
    }
    assert plan(["a"], "p", {"a": ShaPointer(child=500)}, set(), 500) == {"a": 499}
    assert plan(["a"], "p", {}, set(), 10) == {"a": 10 + ledger.GAP}
    assert plan(["a"], None, {}, set(), 10) == {"a": 11}
    # Older than the first placed one: below it; taken seqs are skipped.
    assert plan(["a", "b", "c"], None, {"c": ShaPointer(20)}, {19}, 20) == {"a": 17, "b": 18}
    # No room between parent and child: numbered as it arrives.
    assert plan(["a"], "p", {"p": ShaPointer(10), "a": ShaPointer(child=11)}, {11}, 11) == {"a": 12}


def test_merge_applies_a_writers_changes_onto_what_is_stored() -> None:
    assert merge_codes("P-F", {1: CellState.FAIL}) == "PFF"
    assert merge_codes("P", {3: CellState.PASS}) == "P--P"
    assert merge_codes("PF", {}) == "PF"
    # A result never goes back to pending; a complete report makes a job it lacks no data.
    assert merge_codes("F.", {0: CellState.PENDING, 1: CellState.PENDING}) == "F."
    assert merge_codes("PF-", {0: CellState.FAIL}, complete=True) == "Fn"


def test_a_conflicting_state_write_is_merged_again_after_rewriting_cells() -> None:
    storage = setup()
    read = storage.commits.newest(TRUNK_ID, 1)[0]
    assert storage.commits.save_states(TRUNK_ID, read.seq, read.states, "PPPPF")  # another writer
    retries: list[tuple[str, str, str]] = []

    def merge(states: str) -> str:
        return merge_codes(states, {5: CellState.PASS})

    def before_retry(previous: StoredCommit, fresh: StoredCommit, new: str) -> None:
        retries.append((previous.states, fresh.states, new))

    saved = ledger.save_states(storage.commits, TRUNK_ID, read, merge, before_retry=before_retry)
    assert saved == (replace(read, states="PPPPF"), replace(read, states="PPPPFP"))
    assert retries == [("PPPP", "PPPPF", "PPPPFP")]
    assert ledger.save_states(storage.commits, TRUNK_ID, saved[1], merge) is None  # nothing to change
    assert storage.commits.get(TRUNK_ID, read.seq) == StoredCommit(read.seq, read.commit, "PPPPFP")


# The cell items' writes are steps too: a pending cell landing after another writer's result.
CELL_WRITES = {**NOT_PLACING, "cells": frozenset({"save_all"})}


@pytest.mark.parametrize("pending_by", ["poll", "delivery"])
def test_a_job_found_pending_while_its_result_is_written_keeps_the_result(pending_by: str) -> None:
    def check(result: dict[str, Any]) -> None:
        # A result never goes back to pending: in the state string and in the cell item.
        (seq,) = seqs(result).values()
        assert decoded(result, X)["pull / y"] == "F"
        assert result["cells"][("pull / y", seq)][0] == CellState.FAIL

    if pending_by == "poll":
        pending = poll(CommitRuns(commit_of(X, [X]), (JobRun("pull / y", None),), complete=False))
        finished = job(X, "y", "pull", "failure")
    else:
        queued = webhooks.workflow_job(X, "y", workflow="pull", conclusion=None, status="queued")
        pending = deliver("workflow_job", queued)
        finished = poll(CommitRuns(commit_of(X, [X]), (JobRun("pull / y", "failure"),), complete=False))
    assert assert_every_interleaving_is_serial([pending, finished], check, CELL_WRITES) > 10
