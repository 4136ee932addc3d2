"""Webhook deliveries written as the cells the poll writes (recorded payload shapes), on the
in-memory storage; what must not reach the table at all is checked on a moto table."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.support import webhooks
from tests.support.aws import table_items
from trunkwatch.app.ingest import poll_trunk
from trunkwatch.app.webhook import DeliveryResult, ingest_delivery, trunk_of
from trunkwatch.domain.cells import Commit, JobRun
from trunkwatch.domain.config import load_deployment
from trunkwatch.domain.job_alerts import AlertCommit, JobAlert
from trunkwatch.domain.shards import ShardReport
from trunkwatch.sources.base import CommitRuns, Snapshot
from trunkwatch.sources.webhook import PayloadError
from trunkwatch.storage.memory import memory_storage
from trunkwatch.storage.port import Storage

NOW = datetime(2026, 11, 18, 16, 0, tzinfo=UTC)
A, B = "a" * 40, "b" * 40
SHARD_1 = "linux-jammy / test (default, 1, 2, linux.2xlarge)"
SHARD_2 = "linux-jammy / test (default, 2, 2, linux.2xlarge)"
KEY = "pull / linux-jammy / test (default, linux.2xlarge)"
BUILD = "pull / linux-jammy / build"
DEPLOYMENT = load_deployment(
    {"trunks": [{"repo": webhooks.REPO, "branch": "main", "source": "github", "webhook": True}]}
)
TRUNK = DEPLOYMENT.trunks[0]
RULE = DEPLOYMENT.rule_for(TRUNK)


@pytest.fixture
def storage() -> Storage:
    """The use case runs on the in-memory storage (the contract tests hold it to DynamoDB's)."""
    return memory_storage()


def deliver(storage: Storage, event: str, payload: dict[str, Any], run_first: bool = True) -> DeliveryResult:
    """Ingest one delivery; a job's run delivery comes first, as it usually does (unless
    `run_first` is False), once."""
    trunk = trunk_of(DEPLOYMENT, event, payload)
    assert not isinstance(trunk, str), trunk
    if (
        event == "workflow_job"
        and run_first
        and storage.runs.get(TRUNK.trunk_id, payload["workflow_job"]["run_id"]) is None
    ):
        ingest_delivery(storage, trunk, RULE, "workflow_run", webhooks.run_of(payload), NOW)
    return ingest_delivery(storage, trunk, RULE, event, payload, NOW)


def cells(storage: Storage) -> dict[tuple[str, str], str]:
    """(job, sha) -> the stored state."""
    return {
        (job, cell.commit.sha): cell.state.value
        for job in storage.trunks.job_names(TRUNK.trunk_id)
        for cell in storage.cells.newest_first(TRUNK.trunk_id, job, limit=100, page_size=100)
    }


def states(storage: Storage, sha: str) -> dict[str, str]:
    names = storage.trunks.job_names(TRUNK.trunk_id)
    item = next(c for c in storage.commits.newest(TRUNK.trunk_id, 10) if c.commit.sha == sha)
    return {names[i]: code for i, code in enumerate(item.states) if code != "-"}


def test_push_places_commits_in_order_and_a_job_becomes_its_cell(storage: Storage) -> None:
    assert deliver(storage, "push", webhooks.push([A, B])).commits_placed == 2
    placed = storage.commits.newest(TRUNK.trunk_id, 10)
    assert [c.commit.sha for c in placed] == [B, A] and placed[0].seq == placed[1].seq + 1
    assert placed[0].commit.pr == 101 and placed[0].commit.author == "author"
    result = deliver(storage, "workflow_job", webhooks.workflow_job(B, SHARD_1, conclusion="failure"))
    assert result.cells_written == 2  # the job, and its run's `(workflow)` pass
    assert cells(storage) == {(KEY, B): "fail", ("pull / (workflow)", B): "pass"}
    assert states(storage, B) == {KEY: "F", "pull / (workflow)": "P"}


def test_shards_merge_and_a_redelivery_writes_nothing(storage: Storage) -> None:
    deliver(storage, "push", webhooks.push([A]))
    for shard, job_id in ((SHARD_1, 1), (SHARD_2, 2)):
        deliver(storage, "workflow_job", webhooks.workflow_job(A, shard, status="queued", job_id=job_id))
    assert cells(storage)[(KEY, A)] == "pending"  # queued: the job runs, as a poll records it
    deliver(storage, "workflow_job", webhooks.workflow_job(A, SHARD_1, job_id=1))
    assert cells(storage)[(KEY, A)] == "pending"  # shard 2 of 2 is still queued: no result yet
    failed = webhooks.workflow_job(A, SHARD_2, conclusion="failure", job_id=2)
    assert deliver(storage, "workflow_job", failed).cells_written == 1
    assert deliver(storage, "workflow_job", failed).cells_written == 0
    assert deliver(storage, "workflow_job", webhooks.workflow_job(A, SHARD_1, job_id=1)).cells_written == 0
    assert cells(storage)[(KEY, A)] == "fail"


@pytest.mark.parametrize("dies_at", ["cells.save_all", "commits.save_states"])
def test_a_delivery_that_died_halfway_is_finished_by_its_redelivery(storage: Storage, dies_at: str) -> None:
    # No delivery is claimed: the redelivery finds its shard stored and writes what is missing.
    deliver(storage, "push", webhooks.push([A]))
    failed = webhooks.workflow_job(A, SHARD_1, conclusion="failure", job_id=1)
    store, method = dies_at.split(".")
    target = getattr(storage, store)
    original = getattr(target, method)

    def dies(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("the invocation died here")

    setattr(target, method, dies)
    with pytest.raises(RuntimeError):
        deliver(storage, "workflow_job", failed)
    setattr(target, method, original)
    assert KEY in deliver(storage, "workflow_job", failed).changed_jobs
    assert cells(storage)[(KEY, A)] == "fail" and states(storage, A)[KEY] == "F"
    assert deliver(storage, "workflow_job", failed).cells_written == 0  # and once is enough


def test_only_a_cell_that_may_change_its_verdict_joins_a_group(storage: Storage) -> None:
    # A join is a write: a pass on a job that is not failing has nothing to notify.
    C, D = "c" * 40, "d" * 40
    deliver(storage, "push", webhooks.push([A, B, C, D]))
    single = "linux-jammy / build"

    def job(sha: str, conclusion: str, job_id: int) -> DeliveryResult:
        return deliver(
            storage, "workflow_job", webhooks.workflow_job(sha, single, conclusion=conclusion, job_id=job_id)
        )

    first = job(A, "success", 1)
    assert first.cells_written == 2 and first.group is not None  # the job's first cell ends its staleness
    quiet = job(B, "success", 2)
    assert quiet.cells_written == 2 and quiet.group is None  # both passes (the job, its run) fresh
    assert cells(storage)[("pull / linux-jammy / build", B)] == "pass"
    assert job(C, "failure", 3).group is not None  # a failure may start a run
    ref = AlertCommit(seq=3, sha=C, time=NOW, title="c", pr=None, job_url="run")
    alert = JobAlert("pull / linux-jammy / build", "firing", NOW, 3, ref, ref)
    storage.alerts.save_with_failing_set(TRUNK.trunk_id, alert, now_firing=True)
    assert job(D, "success", 4).group is not None  # a pass on a firing job may resolve it


def test_deliveries_that_join_no_group_still_record_that_deliveries_arrive(storage: Storage) -> None:
    # WebhooksDown reads `last_delivery_at`; a stream of passes records it once per period.
    commits = [f"{n:040x}" for n in range(1, 5)]
    deliver(storage, "push", webhooks.push(commits))
    build = "linux-jammy / build"

    def passed(index: int, minutes: int) -> DeliveryResult:
        payload = webhooks.workflow_job(commits[index], build, job_id=index)
        at = NOW + timedelta(minutes=minutes)
        ingest_delivery(storage, TRUNK, RULE, "workflow_run", webhooks.run_of(payload), at)
        return ingest_delivery(storage, TRUNK, RULE, "workflow_job", payload, at)

    assert passed(0, 0).group is not None  # the job's first cell opens a group, which records it
    assert storage.trunks.state(TRUNK.trunk_id).last_delivery_at == NOW
    assert passed(1, 3).group is None
    assert storage.trunks.state(TRUNK.trunk_id).last_delivery_at == NOW  # within the period
    assert passed(2, 6).group is None
    assert storage.trunks.state(TRUNK.trunk_id).last_delivery_at == NOW + timedelta(minutes=6)


def test_the_runs_pass_is_stored_until_the_commit_records_it(storage: Storage) -> None:
    deliver(storage, "push", webhooks.push([A]))
    reported: list[str] = []
    report = storage.shards.report

    def counted(trunk_id: str, shard: ShardReport, now: datetime) -> bool:
        reported.append(shard.name)
        return report(trunk_id, shard, now)

    storage.shards.report = counted  # type: ignore[method-assign]
    deliver(storage, "workflow_job", webhooks.workflow_job(A, SHARD_1, job_id=1))
    deliver(storage, "workflow_job", webhooks.workflow_job(A, SHARD_2, job_id=2))
    # Every job delivery repeats its run's `(workflow)` pass: the first attempt's is its cell
    # with no shard stored (nothing earlier can have failed to start), the second finds it.
    assert reported == [f"pull / {SHARD_1}", f"pull / {SHARD_2}"]
    assert states(storage, A) == {KEY: "P", "pull / (workflow)": "P"}
    assert cells(storage)[("pull / (workflow)", A)] == "pass"


@pytest.mark.parametrize("late", [False, True])
def test_a_run_that_started_after_one_failed_to_start_is_flaky(storage: Storage, late: bool) -> None:
    # The second attempt's pass is stored as a shard, so a startup failure of the first
    # attempt makes it flaky in either order.
    deliver(storage, "push", webhooks.push([A]))
    failed = webhooks.workflow_run(A, workflow="trunk", conclusion="startup_failure")
    started = webhooks.workflow_job(A, "linux-jammy / build", workflow="trunk", attempt=2)
    for event, payload in [("workflow_run", failed), ("workflow_job", started)][:: -1 if late else 1]:
        deliver(storage, event, payload)
    assert cells(storage)[("trunk / (workflow)", A)] == "flaky"


def test_completed_before_queued_keeps_the_result(storage: Storage) -> None:
    deliver(storage, "push", webhooks.push([A]))
    deliver(storage, "workflow_job", webhooks.workflow_job(A, SHARD_1, conclusion="failure"))
    for status in ("queued", "waiting"):
        late = deliver(storage, "workflow_job", webhooks.workflow_job(A, SHARD_1, status=status))
        assert late.cells_written == 0
    running = webhooks.workflow_job(A, SHARD_1, status="in_progress")
    assert (
        trunk_of(DEPLOYMENT, "workflow_job", running)
        == "a job in progress (its queued delivery said it runs)"
    )
    assert cells(storage)[(KEY, A)] == "fail" and states(storage, A)[KEY] == "F"


def test_a_sharded_job_is_pending_while_a_shard_is_queued(storage: Storage) -> None:
    deliver(storage, "push", webhooks.push([A, B]))
    deliver(storage, "workflow_job", webhooks.workflow_job(A, SHARD_1, status="queued", job_id=1))
    second = webhooks.workflow_job(A, SHARD_2, conclusion="success", job_id=2)
    # Pending, as the poll records a job still running; not a pass before shard 1's result.
    assert KEY not in deliver(storage, "workflow_job", second).changed_jobs
    assert cells(storage)[(KEY, A)] == "pending" and states(storage, A)[KEY] == "."
    deliver(storage, "workflow_job", webhooks.workflow_job(A, SHARD_1, conclusion="success", job_id=1))
    assert cells(storage)[(KEY, A)] == "pass" and states(storage, A)[KEY] == "P"
    # A failing shard decides at once, as in the poll (any fail wins).
    deliver(storage, "workflow_job", webhooks.workflow_job(B, SHARD_2, status="queued", job_id=4))
    deliver(storage, "workflow_job", webhooks.workflow_job(B, SHARD_1, conclusion="failure", job_id=3))
    assert cells(storage)[(KEY, B)] == "fail"


def test_a_shard_that_never_runs_does_not_hold_its_job_pending(storage: Storage) -> None:
    # A name says `1, 2`, yet no shard 2 runs on this trunk (the HUD shows such columns
    # alone): the job's result is its reported shard's, as the poll reads it.
    deliver(storage, "push", webhooks.push([A]))
    deliver(storage, "workflow_job", webhooks.workflow_job(A, SHARD_1, status="queued", job_id=1))
    deliver(storage, "workflow_job", webhooks.workflow_job(A, SHARD_1, conclusion="success", job_id=1))
    assert cells(storage)[(KEY, A)] == "pass"


@pytest.mark.parametrize("retry_first", [False, True], ids=["in order", "retry queued first"])
def test_a_retried_failure_stays_a_failure_until_the_retry_ends(storage: Storage, retry_first: bool) -> None:
    deliver(storage, "push", webhooks.push([A]))
    failed = webhooks.workflow_job(A, "linux-jammy / build", conclusion="failure", attempt=1)
    retry = webhooks.workflow_job(A, "linux-jammy / build", status="queued", attempt=2, job_id=2)
    for payload in [failed, retry][:: -1 if retry_first else 1]:
        deliver(storage, "workflow_job", payload)
    assert cells(storage)[(BUILD, A)] == "fail"  # a result never goes back to pending
    passed = webhooks.workflow_job(A, "linux-jammy / build", conclusion="success", attempt=2, job_id=2)
    deliver(storage, "workflow_job", passed)
    assert cells(storage)[(BUILD, A)] == "flaky"


def test_retried_to_green_is_flaky_in_either_order(storage: Storage) -> None:
    deliver(storage, "push", webhooks.push([A, B]))
    deliver(
        storage,
        "workflow_job",
        webhooks.workflow_job(A, "linux-jammy / build", conclusion="failure", attempt=1),
    )
    deliver(
        storage,
        "workflow_job",
        webhooks.workflow_job(A, "linux-jammy / build", conclusion="success", attempt=2),
    )
    # Out of order: the re-run's pass first, the failed first attempt late.
    deliver(
        storage,
        "workflow_job",
        webhooks.workflow_job(B, "linux-jammy / build", conclusion="success", attempt=2),
    )
    assert cells(storage)[(BUILD, B)] == "pass"
    deliver(
        storage,
        "workflow_job",
        webhooks.workflow_job(B, "linux-jammy / build", conclusion="failure", attempt=1),
    )
    assert cells(storage)[(BUILD, A)] == "flaky" and cells(storage)[(BUILD, B)] == "flaky"


def test_an_older_attempt_never_overwrites_a_newer_one(storage: Storage) -> None:
    deliver(storage, "push", webhooks.push([A]))
    deliver(storage, "workflow_job", webhooks.workflow_job(A, SHARD_1, conclusion="failure", attempt=2))
    deliver(storage, "workflow_job", webhooks.workflow_job(A, SHARD_1, conclusion="success", attempt=1))
    assert cells(storage)[(KEY, A)] == "fail"


def test_cancelled_and_skipped_are_no_data(storage: Storage) -> None:
    deliver(storage, "push", webhooks.push([A]))
    deliver(
        storage,
        "workflow_job",
        webhooks.workflow_job(A, "linux-jammy / build", conclusion="cancelled", job_id=1),
    )
    deliver(
        storage,
        "workflow_job",
        webhooks.workflow_job(A, "lint / lintrunner", conclusion="skipped", job_id=2),
    )
    assert (
        cells(storage)[(BUILD, A)] == "nodata" and cells(storage)[("pull / lint / lintrunner", A)] == "nodata"
    )


def test_startup_failure_run_is_the_workflow_cell(storage: Storage) -> None:
    deliver(storage, "push", webhooks.push([A]))
    run = webhooks.workflow_run(A, workflow="trunk", conclusion="startup_failure")
    assert deliver(storage, "workflow_run", run).cells_written == 1
    assert cells(storage) == {("trunk / (workflow)", A): "fail"}


def test_a_run_places_its_commit_when_the_push_was_missed(storage: Storage) -> None:
    deliver(storage, "workflow_run", webhooks.workflow_run(A, status="queued", title="Fix it (#77)"))
    (placed,) = storage.commits.newest(TRUNK.trunk_id, 10)
    assert (placed.commit.sha, placed.commit.title, placed.commit.pr) == (A, "Fix it (#77)", 77)


def test_a_push_after_its_commits_run_names_its_author(storage: Storage) -> None:
    # A run's head commit names the git author ("Matthias Fax"), not the login the push and
    # the poll name: a commit a run placed first gets its author from its push.
    deliver(storage, "workflow_run", webhooks.workflow_run(A, title="Fix it (#77)"))
    assert storage.commits.newest(TRUNK.trunk_id, 1)[0].commit.author == ""
    deliver(storage, "push", webhooks.push([A]))
    (placed,) = storage.commits.newest(TRUNK.trunk_id, 10)
    assert (placed.commit.title, placed.commit.author) == ("Fix it (#77)", "author")


def test_pull_requests_and_other_trunks_are_dropped_before_the_table(aws: dict[str, Any]) -> None:
    pr_job = webhooks.workflow_job(A, SHARD_1, branch="feature")
    assert trunk_of(DEPLOYMENT, "workflow_job", pr_job) == "not about a webhook-fed trunk"
    pr_run = webhooks.workflow_run(A, event="pull_request", branch="feature")
    assert trunk_of(DEPLOYMENT, "workflow_run", pr_run) == "not about a webhook-fed trunk"
    other = webhooks.push([A], repo="someone/else")
    assert trunk_of(DEPLOYMENT, "push", other) == "not about a webhook-fed trunk"
    assert trunk_of(DEPLOYMENT, "issues", {}) == "event 'issues' is not ingested"
    assert table_items() == []


def test_a_job_whose_run_is_not_known_is_held_until_it_is(aws: dict[str, Any]) -> None:
    storage = aws["storage"]
    deliver(storage, "push", webhooks.push([A]))
    job = webhooks.workflow_job(A, SHARD_1, conclusion="failure")
    result = deliver(storage, "workflow_job", job, run_first=False)
    assert result.ignored == "held until its run's delivery says whether it is a trunk run"
    assert table_items("cell") == [] and table_items("shard") == [] and len(table_items("held")) == 2
    released = deliver(storage, "workflow_run", webhooks.run_of(job))
    assert released.cells_written == 2 and cells(storage)[(KEY, A)] == "fail"
    assert table_items("held") == []


@pytest.mark.parametrize("run_comes", ["after the job's first read", "after its hold"])
def test_a_run_delivered_while_its_job_holds_its_report_writes_the_job_once(
    storage: Storage, run_comes: str
) -> None:
    # Two deliveries at once: whichever order their reads and writes interleave in, the
    # job's result is written (by the run's delivery, or by the job's own read after its hold).
    deliver(storage, "push", webhooks.push([A]))
    job = webhooks.workflow_job(A, SHARD_1, conclusion="failure")
    runs = storage.runs
    hook = runs.get if run_comes == "after the job's first read" else runs.hold
    done = []

    def then_the_run(*args: Any, **kwargs: Any) -> Any:
        answer = hook(*args, **kwargs)
        if not done:
            done.append(None)
            setattr(runs, hook.__name__, hook)
            done[0] = deliver(storage, "workflow_run", webhooks.run_of(job))
        return answer

    setattr(runs, hook.__name__, then_the_run)
    result = deliver(storage, "workflow_job", job, run_first=False)
    setattr(runs, hook.__name__, hook)
    assert cells(storage)[(KEY, A)] == "fail" and states(storage, A)[KEY] == "F"
    assert result.cells_written + done[0].cells_written == 2  # the job and its run's pass, once
    assert runs.held(TRUNK.trunk_id, job["workflow_job"]["run_id"]) == []


# Runs on the trunk's branch name or its commits that are not trunk runs: a fork's pull
# request from its own `main` (on a trunk commit, as a fork's main often is), a scheduled
# and a dispatched run of the trunk commit itself. The poll reads none of them.
NOT_TRUNK_RUNS = {
    "a fork's pull request from main": {"event": "pull_request", "head_repo": "someone/pytorch"},
    "a scheduled run": {"event": "schedule"},
    "a dispatched run": {"event": "workflow_dispatch"},
}


@pytest.mark.parametrize("run_first", [True, False], ids=["run first", "jobs first"])
@pytest.mark.parametrize("run", NOT_TRUNK_RUNS.values(), ids=NOT_TRUNK_RUNS.keys())
def test_jobs_of_runs_that_are_not_trunk_runs_write_nothing(
    storage: Storage, run: dict[str, str], run_first: bool
) -> None:
    deliver(storage, "push", webhooks.push([A]))
    jobs = [
        webhooks.workflow_job(A, SHARD_1, status="queued", run_id=7, job_id=1),
        webhooks.workflow_job(A, SHARD_1, conclusion="failure", run_id=7, job_id=1),
    ]
    deliveries = [
        ("workflow_run", webhooks.workflow_run(A, run_id=7, **run)),
        *(("workflow_job", j) for j in jobs),
    ]
    for event, payload in deliveries if run_first else [*deliveries[1:], deliveries[0]]:
        deliver(storage, event, payload, run_first=False)
    assert cells(storage) == {} and storage.runs.held(TRUNK.trunk_id, 7) == []
    late = deliver(storage, "workflow_job", jobs[1], run_first=False)  # a redelivery, once known
    assert late.ignored == "not a trunk run (a push to the trunk's branch in its own repository)"


def test_a_payload_missing_a_field_is_an_error_that_writes_nothing(aws: dict[str, Any]) -> None:
    payload = webhooks.workflow_job(A, SHARD_1)
    del payload["workflow_job"]["head_sha"]
    with pytest.raises(PayloadError, match="head_sha"):
        deliver(aws["storage"], "workflow_job", payload, run_first=False)
    bad_push = webhooks.push([A])
    bad_push["commits"][0]["timestamp"] = "yesterday"
    with pytest.raises(PayloadError, match="timestamp"):
        deliver(aws["storage"], "push", bad_push)
    assert table_items() == []


class _Snapshots:
    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot

    def poll(self, state: dict[str, Any], now: datetime) -> Snapshot:
        return self.snapshot


def test_the_poll_finds_nothing_new_after_the_deliveries_and_vice_versa(storage: Storage) -> None:
    deliver(storage, "push", webhooks.push([A]))
    deliver(storage, "workflow_job", webhooks.workflow_job(A, SHARD_1, conclusion="failure", job_id=1))
    deliver(storage, "workflow_job", webhooks.workflow_job(A, SHARD_2, conclusion="success", job_id=2))
    commit = Commit(sha=A, time=NOW)
    runs = (
        JobRun(name="pull / (workflow)", conclusion="success"),
        JobRun(name=f"pull / {SHARD_1}", conclusion="failure"),
        JobRun(name=f"pull / {SHARD_2}", conclusion="success"),
    )
    polled = poll_trunk(storage, TRUNK, RULE, _Snapshots(Snapshot([CommitRuns(commit, runs)])), NOW)
    assert polled.cells_written == 0
    # The poll saw a new job first: the delivery of it writes nothing.
    more = (*runs, JobRun(name="lint / lintrunner", conclusion="success"))
    assert (
        poll_trunk(storage, TRUNK, RULE, _Snapshots(Snapshot([CommitRuns(commit, more)])), NOW).cells_written
        == 1
    )
    late = webhooks.workflow_job(A, "lintrunner", workflow="lint", job_id=3)
    assert [k for k in deliver(storage, "workflow_job", late).changed_jobs if k != "lint / (workflow)"] == []
