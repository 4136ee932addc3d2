"""Workload: the push path. Detection delay from the deciding job's delivery to the SNS
publish, how it pages a red trunk, and what the webhook path costs, for GitHub at PyTorch's
delivery volume and for Buildkite at vLLM's.

PUSH_DAYS of a generated red trunk (benchmarks.redtrunk, seed SEED: breakages, flaky and
retried jobs, a dependency breakage, a runner outage) run through the local runtime fed by
webhook deliveries alone (no poll), in one CI's form (`CiForm`); the schedule ticks every
TICKS. As GitHub sends them (`github_form`, tests/support/timeline.py), each job's
`completed` at its own finish time; as Buildkite sends them to a webhook subscribed to
`job.scheduled`, `job.finished` and `build.finished` (`buildkite_deliveries`), signed with
`X-Buildkite-Signature`. Deliveries of one GROUP_WINDOW bucket settle together
(storage.ticks). Its pages are scored against the trunk's truth (benchmarks.redtrunk_score);
the Buildkite run's are also compared with the same trunk's polled Buildkite form
(`compare_pages`), up to its last poll.

Messages, pages and delays come from the in-memory store over the whole span; DynamoDB
units, requests and CPU time per trunk job from moto over the first METERED_DAYS
(`measure`): moto copies the whole table and its stream for every TransactWriteItems and
keeps each copy, so a run on it grows in time and memory with the square of its history
(METERED_BASIS), not from anything a delivery reads.

Deployed timeline after an instant's deliveries (`end_to_end.deployed_times`): the webhook
invocations run side by side, then the stream path; the group's tick settles no earlier than
its bucket's end. An invocation on the in-memory store, which answers in the process, has a
network wait of DYNAMODB_REQUEST_S added for each call it made through the storage port
(`StoreCalls`). The delay of a first `firing` message runs from the deciding job's delivery
to its publish.

Cost at the form's volume (for GitHub JOBS_PER_MONTH; for Buildkite vLLM's trunk,
benchmarks/buildkite_poll.py): every delivery is one Lambda invocation through the function
URL (no request charge beyond Lambda's); a delivery dropped before the table costs its
measured duration only; a trunk job costs what its deliveries were measured to cost here.
Billed duration separates CPU from waiting: the handler's own CPU time (less moto's
in-process answers and the meter's sizing) runs at the function's CPU share (FULL_VCPU_MB),
while each DynamoDB request (DYNAMODB_REQUEST_S) and a group's opener asleep until its
bucket closes are waits the CPU share does not slow.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import multiprocessing
import statistics
import tempfile
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

from benchmarks import prices
from benchmarks.buildkite_poll import VLLM_COMMITS_PER_DAY, VLLM_JOBS
from benchmarks.cost import (
    APP_LOG_BYTES,
    FULL_VCPU_MB,
    GB,
    PLATFORM_LOG_BYTES,
    SECONDS_PER_DAY,
    cpu_slowdown,
    memory_gb,
)
from benchmarks.end_to_end import deployed_times, percentile, ticking
from benchmarks.redtrunk import RedTrunk
from benchmarks.redtrunk_score import Truth, pages, replay, score
from benchmarks.redtrunk_score import buildkite_form as polled_form
from benchmarks.usage import Meter, Usage
from tests.support import webhooks
from tests.support.buildkite import PIPELINE, build, job, job_id
from tests.support.timeline import Timeline
from trunkwatch.app.settings import WEBHOOK_SECRET_CACHE_SECONDS
from trunkwatch.domain import alerts
from trunkwatch.domain.clock import format_time, parse_time
from trunkwatch.domain.config import PYTORCH_INCLUDE, load_deployment
from trunkwatch.domain.ticks import GROUP_WINDOW
from trunkwatch.storage.port import Storage
from trunkwatch_local import store_calls
from trunkwatch_local.runtime import LocalRuntime, Published
from trunkwatch_local.template import find_template
from trunkwatch_local.wiring import read_wiring

T = TypeVar("T")
Deliveries = dict[datetime, list[tuple[str, dict[str, Any]]]]  # each instant's (event, payload)s

# Delivery volume, measured (issue #26's sources): PyTorch's `pytorch/pytorch` ran about
# 2.17 M jobs in 30 days (pytorch/ci-infra, osdc/docs/current_runner_load_distribution.md,
# March 2026); each job sends three `workflow_job` deliveries (queued, in_progress,
# completed). Of the daily jobs, 10-20 k run on `main` (the rest are pull requests'): the upper
# figure is priced. Assumed, as nothing measures it: RUN_DELIVERIES_PER_JOB `workflow_run`
# deliveries per job (a run of about 20 jobs sends requested, in_progress and completed);
# `push` deliveries (35-50 trunk commits a day, PyTorch 2.9's release notes) are too few to
# count.
JOBS_PER_MONTH = 2_170_000
TRUNK_JOBS_PER_DAY = 20_000
JOB_DELIVERIES = 3
RUN_DELIVERIES_PER_JOB = 3 / 20
DAYS_PER_MONTH = 30
SEED = 101
PUSH_DAYS = 2.0
# Either run meters DynamoDB on moto over its first this many days (`measure`).
METERED_DAYS = 0.25
TICKS = timedelta(minutes=10)
# A DynamoDB request from Lambda in the table's region: DynamoDB's single-digit millisecond
# latency, assumed at the upper middle (nothing here measures the network).
DYNAMODB_REQUEST_S = 0.006
# The memory sizes the billed duration is compared at.
MEMORY_SIZES_MB = (128, 256, 512)
# The dropped delivery's CPU time: the best of DROP_BATCHES batches (timeit's rule: other
# processes on a shared machine only ever add time), DROP_ROUNDS deliveries each.
DROP_BATCHES = 5
DROP_ROUNDS = 20


@dataclass
class PushFigures:
    deliveries: int
    notifications: int
    detection_delay_s_p50: float
    detection_delay_s_p95: float
    detection_delay_s_max: float
    usd_per_month: float
    # beyond the summary's required keys
    days: float = 0.0
    trunk_jobs: int = 0  # job attempts that ended (`completed` deliveries of trunk jobs)
    deliveries_by_kind: dict[str, int] = field(default_factory=dict)
    # How it paged the red trunk (benchmarks.redtrunk_score): job pages, their precision,
    # pages per breakage, jobs paged again within 3 hours of resolving.
    paging: dict[str, Any] = field(default_factory=dict)
    usd_per_million_deliveries: float = 0.0
    deliveries_per_day_assumed: float = 0.0
    trunk_jobs_per_day: float = 0.0
    ddb_write_units_per_trunk_job: float = 0.0  # every stored delivery's writes, per trunk job
    usd_per_month_items: dict[str, float] = field(default_factory=dict)
    api_gateway_rest_usd_per_month: float = 0.0  # the alternative front door, not deployed
    per_trunk_job: dict[str, float] = field(default_factory=dict)
    per_dropped_delivery_s: float = 0.0
    usd_per_million_dropped_deliveries: float = 0.0  # a delivery about no trunk: Lambda and logs
    # Billed GB-s a day at each memory size (MEMORY_SIZES_MB), the template's marked.
    lambda_gb_s_per_day_by_memory_mb: dict[int, float] = field(default_factory=dict)
    memory_mb: int = 0
    group_window_s: float = GROUP_WINDOW.total_seconds()
    # The network wait added per store call to an invocation's time on the in-memory store.
    dynamodb_request_s: float = DYNAMODB_REQUEST_S
    detections: list[dict[str, Any]] = field(default_factory=list)
    pages: list[tuple[str, str, str]] = field(default_factory=list)  # (at, alertname, job), in order
    # The same pages from the trunk's polled form (`compare_pages`), when compared.
    against_poll: dict[str, Any] = field(default_factory=dict)
    # The span and trunk jobs the per-job units, requests and CPU time were metered over
    # (on moto; `measure`): the whole run, or its first days.
    metered_days: float = 0.0
    metered_trunk_jobs: int = 0
    basis: str = ""
    wall_s: float = 0.0


def run_push(
    ci: str = "github", days: float = PUSH_DAYS, metered_days: float = METERED_DAYS, other_trunks: int = 0
) -> PushFigures:
    """The push path on `days` of the red trunk SEED as `ci` ("github" or "buildkite")
    delivers it, metered over its first `metered_days` (`measure`); `other_trunks` more
    webhook-fed trunks of the same organization configured beside it (their repositories
    send nothing here). The Buildkite run's pages are compared with the same trunk's polled
    Buildkite form (`polled_buildkite`)."""
    red = RedTrunk(SEED, days)
    history = Timeline.of_redtrunk(red)
    form = github_form(history, other_trunks) if ci == "github" else buildkite_form(history)
    figures = measure(red, form, min(days, metered_days))
    if ci == "buildkite":
        figures.against_poll = compare_pages(figures.pages, polled_buildkite(red), max(red.snapshot_times()))
    return figures


def push_section(days: float = PUSH_DAYS, metered_days: float = METERED_DAYS) -> dict[str, Any]:
    """The summary's `push`: the GitHub run's figures, and under `buildkite` the Buildkite
    run's, with whether it paged as the GitHub run did (the same pages in the same order)."""
    github = run_push("github", days, metered_days)
    buildkite = run_push("buildkite", days, metered_days)
    same = [page[1:] for page in buildkite.pages] == [page[1:] for page in github.pages]
    buildkite_figures = {**dataclasses.asdict(buildkite), "same_pages_as_github": same}
    return {**dataclasses.asdict(github), "buildkite": buildkite_figures}


def measure(red: RedTrunk, form: CiForm, metered_days: float) -> PushFigures:
    """Deliver `form`'s deliveries of the red trunk `red` through the local runtime, score
    the pages and price the month: the messages, pages and delays on the in-memory store, the
    units, requests and CPU time metered on moto over the deliveries of the first
    `metered_days` (METERED_BASIS)."""
    started = time.perf_counter()
    paged = _deliver(form, form.deliveries, "memory")
    until = min(form.deliveries) + timedelta(days=metered_days)
    metered = _deliver(form, {at: e for at, e in form.deliveries.items() if at < until}, "dynamodb")
    metered_jobs = metered.kinds[form.job_kind]
    usage, jobs = metered.usage, max(1, metered_jobs)
    per_job = {
        "deliveries": sum(metered.kinds.values()) / jobs,
        "ddb_read_units": usage.read_units / jobs,
        "ddb_write_units": usage.write_units / jobs,
        "ddb_requests": usage.ddb_requests / jobs,
        "store_calls": metered.store_calls / jobs,
        "cpu_s": metered.cpu_s / jobs,
        "wait_s": (usage.ddb_requests * DYNAMODB_REQUEST_S + metered.group_wait_s) / jobs,
    }
    items, per_day, gb_s_by_memory = _cost(form, per_job, metered.dropped_s)
    # One delivery about no trunk: its Lambda request, its CPU time at the function's memory
    # and CPU share, Lambda's own log lines.
    gb = memory_gb("webhook")
    dropped_usd = (
        prices.LAMBDA_REQUESTS_PER_MILLION / 1e6
        + metered.dropped_s * cpu_slowdown(gb) * gb * prices.LAMBDA_ARM_GB_SECOND
        + _platform_log_bytes() / GB * prices.CLOUDWATCH_LOGS_INGESTED_GB
    )
    firings = _first_firings(paged.sent)
    delays = [delay for _, delay in firings]
    messages = [_scored(m) for m, _ in paged.sent if not m.is_digest]
    paging = score(Truth(red.truth()), messages)
    return PushFigures(
        deliveries=sum(paged.kinds.values()),
        notifications=len(paged.sent),
        detection_delay_s_p50=round(statistics.median(delays), 3) if delays else 0.0,
        detection_delay_s_p95=round(percentile(delays, 95), 3),
        detection_delay_s_max=round(max(delays, default=0.0), 3),
        usd_per_month=round(sum(items.values()), 2),
        days=red.days,
        trunk_jobs=paged.kinds[form.job_kind],
        deliveries_by_kind=dict(sorted(paged.kinds.items())),
        paging={key: paging[key] for key in PAGING_FIGURES},
        ddb_write_units_per_trunk_job=round(per_job["ddb_write_units"], 3),
        usd_per_million_deliveries=round(sum(items.values()) / (per_day * DAYS_PER_MONTH) * 1e6, 3),
        deliveries_per_day_assumed=round(per_day),
        trunk_jobs_per_day=form.trunk_jobs_per_day,
        usd_per_month_items=items,
        # What an API Gateway REST route in front would add per month: its request charge.
        api_gateway_rest_usd_per_month=round(
            per_day * DAYS_PER_MONTH / 1e6 * prices.API_GATEWAY_REST_REQUESTS_PER_MILLION, 2
        ),
        per_trunk_job={k: round(v, 4) for k, v in per_job.items()},
        per_dropped_delivery_s=round(metered.dropped_s, 5),
        usd_per_million_dropped_deliveries=round(dropped_usd * 1e6, 3),
        lambda_gb_s_per_day_by_memory_mb={mb: round(v, 1) for mb, v in gb_s_by_memory.items()},
        memory_mb=round(gb * 1024),
        detections=[{"alertname": a, "delay_s": round(d, 3)} for a, d in firings],
        pages=[(format_time(page.at), page.alertname, page.job or "") for page in pages(messages)],
        metered_days=metered_days,
        metered_trunk_jobs=metered_jobs,
        basis=f"{per_day:,.0f} deliveries a day: {form.basis.format(deliveries=per_job['deliveries'])}; "
        + f"{_DURATION_BASIS}; "
        + METERED_BASIS.format(days=metered_days, jobs=metered_jobs),
        wall_s=round(time.perf_counter() - started, 2),
    )


@dataclass
class Delivered:
    """One pass of deliveries through the local runtime: the messages sent (each with the
    instant whose deliveries or tick sent it), the deliveries by kind, and what the
    deliveries and their groups' settles cost: AWS usage (moto's store only), CPU time
    (this thread's, which other processes' load does not inflate, less moto's and the
    meter's), the openers' sleep until their buckets closed, their calls through the
    storage port; and a dropped delivery's CPU time."""

    sent: list[tuple[Published, datetime]]
    kinds: Counter[str]
    usage: Usage
    cpu_s: float
    group_wait_s: float
    dropped_s: float
    store_calls: int


def _deliver(form: CiForm, deliveries: Deliveries, store: str) -> Delivered:
    """Deliver `deliveries` of `form` through a local runtime on `store`, the schedule
    ticking every TICKS, metering the deliveries and their groups' settles (a group's settle
    is run by the delivery that opened it, deployed in its own invocation after sleeping
    until the bucket closed). On the in-memory store each invocation's duration has the
    network wait of its store calls added."""
    counted = StoreCalls()
    meter = Meter()
    cpu_s, calls_made = 0.0, 0

    def metered(action: Callable[[], T]) -> T:
        nonlocal cpu_s, calls_made
        started, before = time.thread_time(), counted.count
        try:
            with meter.as_("trunk"):
                return action()
        finally:
            cpu_s += time.thread_time() - started
            calls_made += counted.count - before

    deployment = load_deployment({"trunks": form.trunks})
    network_s = counted.network_s if store == "memory" else lambda: 0.0
    with ticking(deployment, store, wrap_storage=counted.wrap, network_s=network_s) as run:
        runtime, calls = run.runtime, run.calls
        call_at = runtime.clock.call_at

        def metered_settle(when: datetime, action: Callable[[], object]) -> None:
            call_at(when, lambda: metered(action))

        runtime.clock.call_at = metered_settle  # type: ignore[method-assign]
        sent: list[tuple[Published, datetime]] = []
        kinds: Counter[str] = Counter()
        group_wait_s = 0.0
        with meter:
            for at, events in _instants(deliveries):
                if events is None:
                    runtime.tick(at)  # the schedule: the dispatcher and the sweeps
                    sent += [(m, at) for m in runtime.published(at)]
                    continue
                calls.clear()
                for event, payload in events:
                    answer = metered(functools.partial(form.deliver, runtime, event, payload, at))
                    if answer.get("statusCode", 500) >= 300:
                        raise RuntimeError(f"{form.name} {event} delivery at {at} refused: {answer}")
                    kinds[form.kind(event, payload)] += 1
                opener_wakes = runtime.clock.next_due()  # a group opened: its opener sleeps
                if opener_wakes is not None:
                    group_wait_s += max(0.0, (opener_wakes - at).total_seconds())
                runtime.settle_deliveries(at)
                window = GROUP_WINDOW.total_seconds()
                closes = -(-at.timestamp() // window) * window - at.timestamp()
                sent += [(m, at) for _, m in deployed_times(at, calls, run.sources, settles_s=closes)]
            usage = meter.get("trunk")
            event, payload = form.dropped
            deliver = functools.partial(form.deliver, runtime, event, payload, min(deliveries))
            dropped_s = _dropped_delivery_s(deliver, meter)
    cpu_s -= usage.emulator_cpu_seconds + usage.meter_cpu_seconds
    return Delivered(sent, kinds, usage, max(0.0, cpu_s), group_wait_s, dropped_s, calls_made)


class StoreCalls:
    """Counts the calls the handlers make through the storage port (`wrap`), from any thread.
    The in-memory store answers them in the process; deployed, each is a DynamoDB request (a
    lazy read's later pages are more), a network wait of DYNAMODB_REQUEST_S (`network_s`)."""

    def __init__(self) -> None:
        self.count = 0
        self._lock = threading.Lock()

    def network_s(self) -> float:
        return self.count * DYNAMODB_REQUEST_S

    def wrap(self, storage: Storage) -> Storage:
        return store_calls.each_call(storage, self._counted)

    def _counted(self, name: str, make: Callable[[], T]) -> T:
        with self._lock:
            self.count += 1
        return make()


PAGING_FIGURES = (
    "job_pages",
    "trunk_pages",
    "precision_any_breakage",
    "breakage_pages_per_breakage",
    "jobs_paged_again_within_3h",
    "breaks_3plus",
    "breaks_3plus_paged",
    "innocent_prs_named",
)


METERED_BASIS = (
    "messages, pages and delays on the in-memory store (each invocation's time its code's plus "
    f"a {DYNAMODB_REQUEST_S * 1000:g} ms network wait per call through the storage port, assumed as "
    "for the cost), DynamoDB units and requests and CPU time per trunk job metered on "
    "moto over the first {days:g} days ({jobs:,} trunk jobs): moto copies the whole table and its "
    "stream for every TransactWriteItems and keeps each copy, so a longer run on it grows in time "
    "and memory with the square of the history, while a delivery's own reads do not grow"
)
_DURATION_BASIS = (
    f"Lambda duration: the handler's CPU time at the function's CPU share ({FULL_VCPU_MB} MB a vCPU), "
    f"each DynamoDB request a {DYNAMODB_REQUEST_S * 1000:g} ms wait (assumed; moto's in-process answers "
    "left out) and a group's opener asleep until its bucket closes, both unscaled; the secret a free SSM "
    f"SecureString, decrypted (one KMS request) once per {WEBHOOK_SECRET_CACHE_SECONDS} s per container, "
    "as many containers as the mean concurrency (assumed)"
)


@dataclass(frozen=True)
class CiForm:
    """The red trunk as one CI delivers it: the trunks configured, each instant's deliveries
    (event, payload), the delivery kind that ends a trunk job attempt, a delivery about no
    trunk, and the volume a month is priced at: the trunk's jobs a day, each costing what a
    trunk job's deliveries cost in the run, every other delivery a dropped one (every
    delivery a day, dropped ones included; None: the trunk's own only), and where those
    figures come from (`basis`, formatted with the run's `deliveries` per trunk job)."""

    name: str
    trunks: list[dict[str, Any]]
    deliveries: Deliveries
    job_kind: str
    dropped: tuple[str, dict[str, Any]]
    trunk_jobs_per_day: float
    all_deliveries_per_day: float | None
    basis: str

    def deliver(
        self, runtime: LocalRuntime, event: str, payload: dict[str, Any], at: datetime
    ) -> dict[str, Any]:
        receive = runtime.deliver if self.name == "github" else runtime.deliver_buildkite
        return receive(event, json.dumps(payload).encode(), at)

    @staticmethod
    def kind(event: str, payload: dict[str, Any]) -> str:
        """A delivery's kind: its event, or a GitHub job's status."""
        return str(payload["workflow_job"]["status"]) if event == "workflow_job" else event

    def deliveries_per_day(self, per_job_deliveries: float) -> float:
        if self.all_deliveries_per_day is None:
            return self.trunk_jobs_per_day * per_job_deliveries
        return self.all_deliveries_per_day


def github_form(history: Timeline, other_trunks: int = 0) -> CiForm:
    """As GitHub delivers it (tests/support/timeline.py), at PyTorch's volume."""
    pushed = {"source": "github", "webhook": True, "poll_every": "0"}
    org = webhooks.REPO.split("/")[0]
    others = [{"repo": f"{org}/other-{n:03d}", **pushed} for n in range(other_trunks)]
    trunk = {"repo": history.repo, "branch": history.branch, **pushed, "config": {"include": PYTORCH_INCLUDE}}
    moments: Deliveries = {}
    for event in history.deliveries(ticks=()):
        delivery = event["webhook"]
        moments.setdefault(parse_time(event["at"]), []).append((delivery["event"], delivery["payload"]))
    return CiForm(
        name="github",
        trunks=[trunk, *others],
        deliveries=moments,
        job_kind="completed",
        dropped=(
            "workflow_job",
            webhooks.workflow_job("f" * 40, "linux-jammy / build", branch="some-feature"),
        ),
        trunk_jobs_per_day=TRUNK_JOBS_PER_DAY,
        all_deliveries_per_day=JOBS_PER_MONTH / DAYS_PER_MONTH * (JOB_DELIVERIES + RUN_DELIVERIES_PER_JOB),
        basis=(
            f"{JOBS_PER_MONTH:,} pytorch/pytorch jobs in 30 days "
            "(pytorch/ci-infra osdc/docs/current_runner_load_distribution.md, March 2026), "
            f"{JOB_DELIVERIES} workflow_job deliveries per job plus {RUN_DELIVERIES_PER_JOB:g} "
            f"workflow_run deliveries per job (assumed); {TRUNK_JOBS_PER_DAY:,} of the daily jobs on "
            "main (the upper end of 10-20 k), each costing what a trunk job's deliveries cost here "
            "({deliveries:.2f} deliveries a job: its queued, in_progress and completed, "
            "retries, and its share of its commit's push and runs); the others dropped before the table"
        ),
    )


def buildkite_form(history: Timeline) -> CiForm:
    """As Buildkite delivers it to a webhook subscribed to `job.scheduled`, `job.finished`
    and `build.finished` (`buildkite_deliveries`), at vLLM's volume
    (benchmarks/buildkite_poll.py)."""
    trunk = {
        "repo": history.repo,
        "branch": history.branch,
        "source": "buildkite",
        "pipeline": PIPELINE,
        "webhook": True,
        "poll_every": "0",
        "config": {"include": PYTORCH_INCLUDE},
    }
    moments: Deliveries = {}
    for at, event, payload in buildkite_deliveries(history):
        moments.setdefault(at, []).append((event, payload))
    elsewhere = job(1, "linux-jammy / build", "failed", finished_at=format_time(history.landings[0].at))
    dropped = _buildkite_payload(
        "job.finished", build(1, "f" * 40, history.landings[0].at, branch="some-feature"), elsewhere
    )
    return CiForm(
        name="buildkite",
        trunks=[trunk],
        deliveries=moments,
        job_kind="job.finished",
        dropped=("job.finished", dropped),
        trunk_jobs_per_day=VLLM_COMMITS_PER_DAY * VLLM_JOBS,
        all_deliveries_per_day=None,
        basis=(
            f"vLLM's trunk, {VLLM_COMMITS_PER_DAY} commits a day to main of {VLLM_JOBS} jobs each "
            "(issue 40, June 2026), each job costing what a trunk job's deliveries cost here "
            "({deliveries:.2f} deliveries a job: its job.scheduled and job.finished, "
            "retries, and its share of its build's build.finished); the pipeline's builds of other "
            "branches (pull requests) are delivered too (a Buildkite webhook selects events and "
            "pipelines) and not counted: each costs a dropped delivery (usd_per_million_dropped_deliveries)"
        ),
    )


# A red trunk job's conclusion as a Buildkite job's state.
_BUILDKITE_STATES = {"success": "passed", "failure": "failed"}
_SENDER = {"id": "0190a2b4-0000-7000-8000-00000000beef", "name": "Some Person"}


def buildkite_deliveries(
    history: Timeline, pipeline: str = PIPELINE
) -> Iterator[tuple[datetime, str, dict[str, Any]]]:
    """The history's Buildkite webhook deliveries, in time order (Buildkite's webhook payload:
    `event`, `job`, `build` without its jobs, `pipeline`, `sender`; the REST API's objects,
    tests/fixtures/buildkite): one build per commit, numbered in landing order; each job
    attempt's `job.scheduled` when it is queued and its `job.finished` when it ends (its
    build `running`, or `failing` once a job failed), a retry's `retries_count` and
    `retry_source` naming the attempt it retried (which said `retried: false` when it
    finished: it was not retried yet); a build's `build.finished` when its last job ended
    (again after a retry of it ended). A build's commit fields: its message (the title, a
    merged pull request's number at its end), its author, no pull request (a push to main)."""
    landed = {landing.sha: (number, landing) for number, landing in enumerate(history.landings, 1)}
    queued: dict[tuple[str, str, int], datetime] = {}
    running_jobs: Counter[str] = Counter()  # each build's jobs queued and not finished
    latest: dict[str, dict[str, str]] = defaultdict(dict)  # each build's jobs' latest states
    for report in history.reports:
        number, landing = landed[report.sha]
        key = (report.sha, report.name, report.attempt)
        retry = (
            {
                "retries_count": report.attempt - 1,
                "retry_type": "automatic",
                "retry_source": {
                    "job_id": job_id(pipeline, number, report.name, report.attempt - 1),
                    "retry_type": "automatic",
                },
            }
            if report.attempt > 1
            else {}
        )
        if report.conclusion is None:
            event, state, started = "job.scheduled", "scheduled", report.at
            queued[key] = report.at
            running_jobs[report.sha] += 1
            times: dict[str, str | None] = {"started_at": None}
        else:
            event, state, started = "job.finished", _BUILDKITE_STATES[report.conclusion], queued.pop(key)
            running_jobs[report.sha] -= 1
            latest[report.sha][report.name] = state
            times = {"started_at": format_time(started), "finished_at": format_time(report.at)}
        made = job(
            number,
            report.name,
            state,
            attempt=report.attempt,
            pipeline=pipeline,
            web_url=report.url,
            created_at=format_time(started),
            scheduled_at=format_time(started),
            runnable_at=format_time(started),
            **times,
            **retry,
        )
        failing = "failed" in latest[report.sha].values()
        about: dict[str, Any] = {
            "message": landing.message,
            "author": {"username": landing.author, "name": landing.author},
        }
        running = build(number, report.sha, landing.at, state="failing" if failing else "running", **about)
        yield report.at, event, _buildkite_payload(event, running, made)
        if report.conclusion is not None and not running_jobs[report.sha]:
            state = "failed" if failing else "passed"
            finished = build(number, report.sha, landing.at, finished=report.at, state=state, **about)
            yield report.at, "build.finished", _buildkite_payload("build.finished", finished)


def _buildkite_payload(
    event: str, built: dict[str, Any], made: dict[str, Any] | None = None
) -> dict[str, Any]:
    """A delivery's body: the build without its jobs (webhooks carry none), its pipeline."""
    bare = {k: v for k, v in built.items() if k != "jobs"}
    job_part = {"job": made} if made is not None else {}
    return {"event": event, **job_part, "build": bare, "pipeline": {**bare["pipeline"]}, "sender": _SENDER}


def polled_buildkite(red: RedTrunk) -> list[dict[str, Any]]:
    """The messages of `red` in polled Buildkite form (benchmarks.redtrunk_score's `buildkite_form`:
    a builds listing every 30 minutes, read by the `buildkite` source from the Buildkite
    stand-in), with the push run's rule config, replayed in a fresh process on the in-memory
    store."""
    with tempfile.TemporaryDirectory(prefix="push-") as tmp:
        source, target = Path(tmp) / "redtrunk.jsonl.gz", Path(tmp) / "buildkite.jsonl.gz"
        red.write(source)
        polled_form(source, target, Truth(red.truth()), {"include": PYTORCH_INCLUDE})
        with multiprocessing.get_context("spawn").Pool(1) as pool:
            messages, _, _, _ = pool.apply(replay, (str(target),))
    return list(messages)


def compare_pages(
    pushed: list[tuple[str, str, str]], messages: list[dict[str, Any]], last_poll: datetime
) -> dict[str, Any]:
    """The pushed pages (at, alertname, job) until `last_poll` (the polled form reads nothing
    after it) against the polled messages' pages: how many each has, whether they are the
    same pages (and in the same order), and those only one of them has."""
    ours = [(name, job) for at, name, job in pushed if parse_time(at) <= last_poll]
    polled = [(page.alertname, page.job or "") for page in pages(messages)]
    only_pushed, only_polled = Counter(ours) - Counter(polled), Counter(polled) - Counter(ours)
    return {
        "until": format_time(last_poll),
        "pushed_pages": len(ours),
        "polled_pages": len(polled),
        "same_pages": not only_pushed and not only_polled,
        "same_order": ours == polled,
        "only_pushed": sorted(only_pushed.elements()),
        "only_polled": sorted(only_polled.elements()),
    }


Instants = list[tuple[datetime, list[tuple[str, dict[str, Any]]] | None]]


def _instants(deliveries: Deliveries) -> Instants:
    """Each instant's deliveries, and the schedule's ticks (None) every TICKS."""
    first, last = min(deliveries), max(deliveries)
    ticks = [first + TICKS * n for n in range(int((last - first) / TICKS) + 1)]
    found: Instants = [*deliveries.items()]
    found += [(at, None) for at in ticks if at not in deliveries]
    return sorted(found, key=lambda moment: (moment[0], moment[1] is None))


def _scored(message: Published) -> dict[str, Any]:
    """A message as benchmarks.redtrunk_score reads it."""
    alert = message.message["alerts"][0]
    return {
        "at": format_time(message.at),
        "status": message.message["status"],
        "reason": message.message.get("notification_reason", ""),
        "labels": alert["labels"],
        "annotations": alert["annotations"],
    }


def _first_firings(sent: list[tuple[Published, datetime]]) -> list[tuple[str, float]]:
    """(alertname, delay) of every first firing message: it is published by the instant whose
    deliveries decided it."""
    return [
        (m.attributes.get("alertname", ""), (m.at - delivered).total_seconds())
        for m, delivered in sent
        if m.message.get("status") == alerts.FIRING and m.message.get("notification_reason") == "firing"
    ]


def _dropped_delivery_s(deliver: Callable[[], object], meter: Meter) -> float:
    """CPU time of a delivery dropped before the table (`deliver` sends one): the best
    batch's mean (DROP_BATCHES), less anything the emulator answered (nothing, when the
    path makes no storage call)."""
    deliver()  # the container's first: the secret cached
    batches = []
    for batch in range(DROP_BATCHES):
        with meter.as_(f"dropped-{batch}") as usage:
            started = time.thread_time()
            for _ in range(DROP_ROUNDS):
                deliver()
            elapsed = time.thread_time() - started - usage.emulator_cpu_seconds - usage.meter_cpu_seconds
        batches.append(elapsed / DROP_ROUNDS)
    return min(batches)


def _cost(
    form: CiForm, per_job: dict[str, float], dropped_s: float
) -> tuple[dict[str, float], float, dict[int, float]]:
    """The month's items at the form's volume, the deliveries a day, and the billed GB-s a day
    at each of MEMORY_SIZES_MB: CPU time slowed by the CPU share below a full vCPU, waits as
    they are; the deliveries not about a trunk job are dropped ones."""
    trunk_jobs = form.trunk_jobs_per_day
    per_day = form.deliveries_per_day(per_job["deliveries"])
    stored = trunk_jobs * per_job["deliveries"]  # the application's line only for a stored delivery
    cpu_s = max(0.0, per_day - stored) * dropped_s + trunk_jobs * per_job["cpu_s"]

    def gb_s_per_day(gb: float) -> float:
        return (cpu_s * cpu_slowdown(gb) + trunk_jobs * per_job["wait_s"]) * gb

    gb = memory_gb("webhook")
    # Each warm container reads the secret once per cache period; the containers are the
    # function's mean concurrency at its memory size, rounded up (assumed: bursts reuse them).
    containers = max(1, math.ceil(gb_s_per_day(gb) / gb / SECONDS_PER_DAY))
    secret_reads = containers * SECONDS_PER_DAY / WEBHOOK_SECRET_CACHE_SECONDS
    log_gb = (per_day * _platform_log_bytes() + stored * APP_LOG_BYTES) / GB  # no metric published
    month = DAYS_PER_MONTH
    jobs_month = trunk_jobs * month / 1e6  # millions of trunk jobs a month
    items = {
        "lambda_requests": per_day * month / 1e6 * prices.LAMBDA_REQUESTS_PER_MILLION,
        "lambda_duration": gb_s_per_day(gb) * month * prices.LAMBDA_ARM_GB_SECOND,
        "dynamodb_writes": jobs_month
        * per_job["ddb_write_units"]
        * prices.DYNAMODB_WRITE_REQUEST_UNITS_PER_MILLION,
        "dynamodb_reads": jobs_month
        * per_job["ddb_read_units"]
        * prices.DYNAMODB_READ_REQUEST_UNITS_PER_MILLION,
        "logs": log_gb * month * prices.CLOUDWATCH_LOGS_INGESTED_GB,
        # A standard SSM parameter is free; each read decrypts it with the aws/ssm key.
        "secret": secret_reads * month / 1e6 * prices.KMS_REQUESTS_PER_MILLION,
    }
    by_memory = {mb: gb_s_per_day(mb / 1024) for mb in MEMORY_SIZES_MB}
    return {k: round(v, 2) for k, v in items.items()}, per_day, by_memory


def _platform_log_bytes() -> int:
    """Lambda's START/END/REPORT lines for every delivery, unless the webhook function's
    LoggingConfig SystemLogLevel in template.yaml drops them."""
    props = read_wiring(find_template()).resources["WebhookFunction"].get("Properties") or {}
    level = str((props.get("LoggingConfig") or {}).get("SystemLogLevel", ""))
    return 0 if level in ("WARN", "ERROR", "FATAL") else PLATFORM_LOG_BYTES
