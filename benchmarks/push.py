"""Workload: the push path. Detection delay from the deciding job's delivery to the SNS
publish, how it pages a red trunk, and what the webhook path costs, for GitHub at PyTorch's
delivery volume and for Buildkite at vLLM's.

PUSH_DAYS of a generated red trunk (benchmarks.redtrunk, seed SEED: breakages, flaky and
retried jobs, a dependency breakage, a runner outage) run through the local runtime fed by
webhook deliveries alone (no poll), in one CI's form (`CiForm`); the schedule ticks every
TICKS. As GitHub sends them (`github_form`, tests/support/timeline.py): each commit's `push`
and its runs' `workflow_run` when it lands, each job's `queued` and `in_progress` then, its
`completed` at its own finish time (a retried job's first attempt failing, its retry queued
a minute later). As Buildkite sends them to a webhook subscribed to `job.scheduled`,
`job.finished` and `build.finished` (`buildkite_form`, `buildkite_deliveries`), signed with
`X-Buildkite-Signature`: each job attempt's `job.scheduled` when it is queued (a commit's
jobs when it lands, a retry a minute after the attempt it retries), its `job.finished` at
its own finish time, each build's `build.finished` when its last job ended. Deliveries of
one GROUP_WINDOW bucket settle together (storage.ticks). Its pages are scored against the trunk's truth
(benchmarks.redtrunk_score): pages per breakage, jobs paged again within 3 hours of
resolving, precision. The Buildkite run's pages are also compared with the same trunk's
polled Buildkite form (`polled_buildkite`, `compare_pages`), up to its last poll.

Either CI's run takes its messages, pages and delays from the in-memory store over the
whole span, and its DynamoDB units, requests and CPU time per trunk job from moto over its
first METERED_DAYS (`measure`): moto copies the whole table and its stream for every
TransactWriteItems and keeps each copy, so a run on it grows in time and memory with the
square of its history (METERED_BASIS), not from anything a delivery reads.

Deployed timeline after an instant's deliveries, from its first delivery: the webhook
invocations run side by side (the longest counts), then the stream path as in
`end_to_end.deployed_times` (one STREAM_HOP_S per stream invocation, the mapping's batching
window when its batch is not full, the invocation's measured duration); the group's tick
settles no earlier than its bucket's end, and the notifier's invocation on it publishes.
An invocation's duration is its measured time on the in-memory store, which answers in the
process, plus a network wait of DYNAMODB_REQUEST_S for each call it made through the storage
port (`StoreCalls`; the metered moto span counts both, to compare the calls with DynamoDB's
requests).
The delay of a first `firing` message runs from the deciding job's delivery to its publish.

Cost at the form's volume (`Volume`: for GitHub JOBS_PER_MONTH, see there; for Buildkite
vLLM's trunk, benchmarks/buildkite_poll.py): every delivery is one Lambda invocation through
the function URL (no request charge beyond Lambda's); the deliveries dropped before the
table cost their measured duration only (no storage call, no log line but Lambda's own); a
trunk job costs what its deliveries (GitHub: its `queued`, `in_progress` and `completed`,
and its share of its commit's `push` and runs' deliveries; Buildkite: its `job.scheduled`
and `job.finished`, and its share of its build's `build.finished`) were measured to cost
here: DynamoDB request units and duration. Billed duration separates CPU from waiting: the
handler's own CPU time (the invocation's thread CPU time, less moto's in-process answers
and the meter's sizing) runs at the function's CPU share (FULL_VCPU_MB), while each
DynamoDB request is a network wait of DYNAMODB_REQUEST_S and a group's opener sleeps until
its bucket closes, neither slowed by the CPU share; the opener's settle of its group counts
with the deliveries (its writes and requests). `usd_per_million_deliveries` is the month's
cost over its deliveries.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import multiprocessing
import os
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar
from unittest import mock

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
from benchmarks.end_to_end import STREAM_HOP_S, Call, time_invocations
from benchmarks.redtrunk import RedTrunk
from benchmarks.redtrunk_score import Truth, pages, replay, score
from benchmarks.redtrunk_score import buildkite_form as polled_form
from benchmarks.usage import Meter, Usage
from tests.support import webhooks
from tests.support.buildkite import PIPELINE, build, job, job_id
from tests.support.timeline import Landing, Timeline
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
    days: float = PUSH_DAYS, other_trunks: int = 0, metered_days: float = METERED_DAYS
) -> PushFigures:
    """The push path on `days` of the red trunk SEED as GitHub delivers it, metered over its
    first `metered_days` (`measure`); `other_trunks` more webhook-fed trunks of the same
    organization configured beside it (their repositories send nothing here)."""
    red = RedTrunk(SEED, days)
    return measure(red, github_form(Timeline.of_redtrunk(red), other_trunks), min(days, metered_days))


def run_buildkite_push(
    days: float = PUSH_DAYS, compare_poll: bool = True, metered_days: float = METERED_DAYS
) -> PushFigures:
    """The push path on `days` of the red trunk SEED as Buildkite delivers it, metered over
    its first `metered_days` (`measure`), priced at vLLM's volume; with `compare_poll`, its
    pages against the same trunk's polled Buildkite form (`polled_buildkite`)."""
    red = RedTrunk(SEED, days)
    figures = measure(red, buildkite_form(Timeline.of_redtrunk(red)), min(days, metered_days))
    if compare_poll:
        last_poll = max(red.snapshot_times())
        figures.against_poll = compare_pages(figures.pages, polled_buildkite(red), last_poll)
    return figures


def push_section(days: float = PUSH_DAYS, metered_days: float = METERED_DAYS) -> dict[str, Any]:
    """The summary's `push`: the GitHub run's figures, and under `buildkite` the Buildkite
    run's (each metered over its first `metered_days`), with whether it paged as the GitHub
    run did (the same pages in the same order)."""
    github = run_push(days, metered_days=metered_days)
    buildkite = run_buildkite_push(days, metered_days=metered_days)
    same = [page[1:] for page in buildkite.pages] == [page[1:] for page in github.pages]
    buildkite_figures = {**dataclasses.asdict(buildkite), "same_pages_as_github": same}
    return {**dataclasses.asdict(github), "buildkite": buildkite_figures}


def measure(red: RedTrunk, form: CiForm, metered_days: float) -> PushFigures:
    """Deliver `form`'s deliveries of the red trunk `red` through the local runtime (the
    schedule ticking every TICKS), score the pages and price the month: the messages, pages
    and delays on the in-memory store, the units, requests and CPU time metered on moto over
    the deliveries of the first `metered_days` (METERED_BASIS)."""
    started = time.perf_counter()
    paged = _deliver(form, form.deliveries, "memory")
    until = min(form.deliveries) + timedelta(days=metered_days)
    metered = _deliver(form, {at: e for at, e in form.deliveries.items() if at < until}, "dynamodb")
    sent, kinds = paged.sent, paged.kinds
    deliveries = sum(kinds.values())
    jobs = kinds[form.job_kind]
    metered_jobs = metered.kinds[form.job_kind]
    trunk_usage, dropped_s = metered.usage, metered.dropped_s
    delays = _delays(sent)
    per_job = {
        "deliveries": sum(metered.kinds.values()) / max(1, metered_jobs),
        "ddb_read_units": trunk_usage.read_units / max(1, metered_jobs),
        "ddb_write_units": trunk_usage.write_units / max(1, metered_jobs),
        "ddb_requests": trunk_usage.ddb_requests / max(1, metered_jobs),
        "store_calls": metered.store_calls / max(1, metered_jobs),
        "cpu_s": metered.cpu_s / max(1, metered_jobs),
        "wait_s": (trunk_usage.ddb_requests * DYNAMODB_REQUEST_S + metered.group_wait_s)
        / max(1, metered_jobs),
    }
    volume = form.volume
    gb_s_by_memory = {mb: _gb_s_per_day(volume, per_job, dropped_s, mb / 1024) for mb in MEMORY_SIZES_MB}
    items, per_day = _cost(volume, per_job, dropped_s)
    messages = [_scored(m) for m, _ in sent if not m.is_digest]
    paging = score(Truth(red.truth()), messages)
    return PushFigures(
        deliveries=deliveries,
        notifications=len(sent),
        detection_delay_s_p50=round(statistics.median(delays), 3) if delays else 0.0,
        detection_delay_s_p95=round(_percentile(delays, 95), 3),
        detection_delay_s_max=round(max(delays, default=0.0), 3),
        usd_per_month=round(sum(items.values()), 2),
        days=red.days,
        trunk_jobs=jobs,
        deliveries_by_kind=dict(sorted(kinds.items())),
        paging={key: paging[key] for key in PAGING_FIGURES},
        ddb_write_units_per_trunk_job=round(per_job["ddb_write_units"], 3),
        usd_per_million_deliveries=round(sum(items.values()) / (per_day * DAYS_PER_MONTH) * 1e6, 3),
        deliveries_per_day_assumed=round(per_day),
        trunk_jobs_per_day=volume.trunk_jobs_per_day,
        usd_per_month_items=items,
        api_gateway_rest_usd_per_month=api_gateway_usd_per_month(per_day),
        per_trunk_job={k: round(v, 4) for k, v in per_job.items()},
        per_dropped_delivery_s=round(dropped_s, 5),
        usd_per_million_dropped_deliveries=round(_dropped_usd(dropped_s) * 1e6, 3),
        lambda_gb_s_per_day_by_memory_mb={mb: round(v, 1) for mb, v in gb_s_by_memory.items()},
        memory_mb=round(memory_gb("webhook") * 1024),
        detections=[{"alertname": a, "delay_s": round(d, 3)} for a, d in _named(sent)],
        pages=[(format_time(page.at), page.alertname, page.job or "") for page in pages(messages)],
        metered_days=metered_days,
        metered_trunk_jobs=metered_jobs,
        basis=f"{per_day:,.0f} deliveries a day: {form.volume.basis(per_job)}; {_DURATION_BASIS}; "
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
    store_calls: int  # the deliveries' and settles' calls through the storage port


def _deliver(
    form: CiForm, deliveries: dict[datetime, list[tuple[str, dict[str, Any]]]], store: str
) -> Delivered:
    """Deliver `deliveries` of `form` through a local runtime on `store`, the schedule
    ticking every TICKS, metering the deliveries and their groups' settles. On the in-memory
    store each invocation's duration has the network wait of its store calls added."""
    store_calls = StoreCalls()
    with mock.patch.dict(os.environ), contextlib.redirect_stdout(sys.stderr):
        runtime = LocalRuntime(store=store, wrap_storage=store_calls.wrap)
        runtime.start(load_deployment({"trunks": form.trunks}))
        try:
            sources = {source.function: source for source in runtime.wiring.streams}
            calls: list[Call] = []
            time_invocations(runtime, calls, store_calls.network_s if store == "memory" else lambda: 0.0)
            meter = Meter()
            settles = _count_settles(runtime, meter, "trunk", store_calls)
            sent: list[tuple[Published, datetime]] = []
            kinds: Counter[str] = Counter()
            trunk_cpu_s = group_wait_s = 0.0
            trunk_store_calls = 0
            with meter:
                for at, events in _instants(deliveries):
                    if events is None:
                        runtime.tick(at)  # the schedule: the dispatcher and the sweeps
                        sent += [(m, at) for m in runtime.published(at)]
                        continue
                    calls.clear()
                    for event, payload in events:
                        with meter.as_("trunk"):
                            cpu_started, calls_before = time.thread_time(), store_calls.count
                            answer = form.deliver(runtime, event, webhooks_body(payload), at)
                            trunk_cpu_s += time.thread_time() - cpu_started
                            trunk_store_calls += store_calls.count - calls_before
                        if answer.get("statusCode", 500) >= 300:
                            raise RuntimeError(f"{form.name} {event} delivery at {at} refused: {answer}")
                        kinds[form.kind(event, payload)] += 1
                    opener_wakes = runtime.clock.next_due()  # a group opened: its opener sleeps
                    if opener_wakes is not None:
                        group_wait_s += max(0.0, (opener_wakes - at).total_seconds())
                    runtime.settle_deliveries(at)
                    sent += [(m, at) for m in _deployed(at, calls, sources)]
                usage = meter.get("trunk")
                event, payload = form.dropped
                first = min(deliveries)
                dropped_s = _dropped_delivery_s(
                    lambda: form.deliver(runtime, event, webhooks_body(payload), first), meter
                )
        finally:
            runtime.stop()
    cpu_s = trunk_cpu_s + sum(settles.cpu_s) - usage.emulator_cpu_seconds - usage.meter_cpu_seconds
    return Delivered(
        sent, kinds, usage, max(0.0, cpu_s), group_wait_s, dropped_s, trunk_store_calls + settles.store_calls
    )


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
class Volume:
    """The delivery volume a month is priced at: the trunk's jobs a day, each costing what a
    trunk job's deliveries cost in the run, and every other delivery a dropped one."""

    trunk_jobs_per_day: float
    # Every delivery a day, dropped ones included; None: the trunk's own only.
    all_deliveries_per_day: float | None
    basis: Callable[[dict[str, float]], str]  # where the figures come from, given the per-job costs

    def deliveries_per_day(self, per_job_deliveries: float) -> float:
        if self.all_deliveries_per_day is None:
            return self.trunk_jobs_per_day * per_job_deliveries
        return self.all_deliveries_per_day


Deliver = Callable[[LocalRuntime, str, bytes, datetime], dict[str, Any]]


@dataclass(frozen=True)
class CiForm:
    """The red trunk as one CI delivers it: the trunks configured, each instant's deliveries
    (event, payload), how the runtime receives one, what kind of delivery it is (the kind
    `job_kind` ends a trunk job attempt), a delivery about no trunk, and the volume priced."""

    name: str
    trunks: list[dict[str, Any]]
    deliveries: dict[datetime, list[tuple[str, dict[str, Any]]]]
    deliver: Deliver
    kind: Callable[[str, dict[str, Any]], str]
    job_kind: str
    dropped: tuple[str, dict[str, Any]]
    volume: Volume


def github_form(history: Timeline, other_trunks: int = 0) -> CiForm:
    """As GitHub delivers it (tests/support/timeline.py), at PyTorch's volume."""
    others = [
        {
            "repo": f"{webhooks.REPO.split('/')[0]}/other-{n:03d}",
            "source": "github",
            "webhook": True,
            "poll_every": "0",
        }
        for n in range(other_trunks)
    ]
    trunk = {
        "repo": history.repo,
        "branch": history.branch,
        "source": "github",
        "webhook": True,
        "poll_every": "0",
        "config": {"include": PYTORCH_INCLUDE},
    }
    moments: dict[datetime, list[tuple[str, dict[str, Any]]]] = {}
    for event in history.deliveries(ticks=()):
        delivery = event["webhook"]
        moments.setdefault(parse_time(event["at"]), []).append((delivery["event"], delivery["payload"]))

    def deliver(runtime: LocalRuntime, event: str, body: bytes, at: datetime) -> dict[str, Any]:
        return runtime.deliver(event, body, at)

    def basis(per_job: dict[str, float]) -> str:
        return (
            f"{JOBS_PER_MONTH:,} pytorch/pytorch jobs in 30 days "
            "(pytorch/ci-infra osdc/docs/current_runner_load_distribution.md, March 2026), "
            f"{JOB_DELIVERIES} workflow_job deliveries per job plus {RUN_DELIVERIES_PER_JOB:g} "
            f"workflow_run deliveries per job (assumed); {TRUNK_JOBS_PER_DAY:,} of the daily jobs on "
            "main (the upper end of 10-20 k), each costing what a trunk job's deliveries cost here "
            f"({per_job['deliveries']:.2f} deliveries a job: its queued, in_progress and completed, "
            "retries, and its share of its commit's push and runs); the others dropped before the table"
        )

    return CiForm(
        name="github",
        trunks=[trunk, *others],
        deliveries=moments,
        deliver=deliver,
        kind=_kind,
        job_kind="completed",
        dropped=(
            "workflow_job",
            webhooks.workflow_job("f" * 40, "linux-jammy / build", branch="some-feature"),
        ),
        volume=Volume(
            TRUNK_JOBS_PER_DAY,
            JOBS_PER_MONTH / DAYS_PER_MONTH * (JOB_DELIVERIES + RUN_DELIVERIES_PER_JOB),
            basis,
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
    moments: dict[datetime, list[tuple[str, dict[str, Any]]]] = {}
    for at, event, payload in buildkite_deliveries(history):
        moments.setdefault(at, []).append((event, payload))
    elsewhere = job(1, "linux-jammy / build", "failed", finished_at=format_time(history.landings[0].at))
    dropped = _buildkite_payload(
        "job.finished", build(1, "f" * 40, history.landings[0].at, branch="some-feature"), elsewhere
    )

    def deliver(runtime: LocalRuntime, event: str, body: bytes, at: datetime) -> dict[str, Any]:
        return runtime.deliver_buildkite(event, body, at)

    def basis(per_job: dict[str, float]) -> str:
        return (
            f"vLLM's trunk, {VLLM_COMMITS_PER_DAY} commits a day to main of {VLLM_JOBS} jobs each "
            f"(issue 40, June 2026), each job costing what a trunk job's deliveries cost here "
            f"({per_job['deliveries']:.2f} deliveries a job: its job.scheduled and job.finished, "
            "retries, and its share of its build's build.finished); the pipeline's builds of other "
            "branches (pull requests) are delivered too (a Buildkite webhook selects events and "
            "pipelines) and not counted: each costs a dropped delivery (usd_per_million_dropped_deliveries)"
        )

    return CiForm(
        name="buildkite",
        trunks=[trunk],
        deliveries=moments,
        deliver=deliver,
        kind=lambda event, payload: event,
        job_kind="job.finished",
        dropped=("job.finished", dropped),
        volume=Volume(VLLM_COMMITS_PER_DAY * VLLM_JOBS, None, basis),
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
    (again after a retry of it ended)."""
    landed = {landing.sha: (number, landing) for number, landing in enumerate(history.landings, 1)}
    queued: dict[tuple[str, str, int], datetime] = {}
    running_jobs: Counter[str] = Counter()  # each build's jobs queued and not finished
    latest: dict[str, dict[str, str]] = defaultdict(dict)  # each build's jobs' latest states
    for report in history.reports:
        number, landing = landed[report.sha]
        key = (report.sha, report.name, report.attempt)
        retried = job_id(pipeline, number, report.name, report.attempt - 1)
        retry = (
            {
                "retries_count": report.attempt - 1,
                "retry_type": "automatic",
                "retry_source": {"job_id": retried, "retry_type": "automatic"},
            }
            if report.attempt > 1
            else {}
        )
        failing = "failed" in latest[report.sha].values()
        running = build(
            number, report.sha, landing.at, state="failing" if failing else "running", **_about(landing)
        )
        if report.conclusion is None:
            queued[key] = report.at
            running_jobs[report.sha] += 1
            scheduled = job(
                number,
                report.name,
                "scheduled",
                attempt=report.attempt,
                pipeline=pipeline,
                web_url=report.url,
                created_at=format_time(report.at),
                scheduled_at=format_time(report.at),
                runnable_at=format_time(report.at),
                started_at=None,
                **retry,
            )
            yield report.at, "job.scheduled", _buildkite_payload("job.scheduled", running, scheduled)
            continue
        state = _BUILDKITE_STATES[report.conclusion]
        started = queued.pop(key)
        running_jobs[report.sha] -= 1
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
            started_at=format_time(started),
            finished_at=format_time(report.at),
            **retry,
        )
        latest[report.sha][report.name] = state
        failing = "failed" in latest[report.sha].values()
        running = build(
            number, report.sha, landing.at, state="failing" if failing else "running", **_about(landing)
        )
        yield report.at, "job.finished", _buildkite_payload("job.finished", running, made)
        if not running_jobs[report.sha]:
            finished = build(
                number,
                report.sha,
                landing.at,
                finished=report.at,
                state="failed" if failing else "passed",
                **_about(landing),
            )
            yield report.at, "build.finished", _buildkite_payload("build.finished", finished)


def _about(landing: Landing) -> dict[str, Any]:
    """A build's commit fields: its message (the title, a merged pull request's number at its
    end, as the trunk's builds have it), its author, no pull request (a push to main)."""
    return {"message": landing.message, "author": {"username": landing.author, "name": landing.author}}


def _buildkite_payload(
    event: str, built: dict[str, Any], made: dict[str, Any] | None = None
) -> dict[str, Any]:
    """A delivery's body: the build without its jobs (webhooks carry none), its pipeline."""
    bare = {k: v for k, v in built.items() if k != "jobs"}
    about = {**bare["pipeline"]}
    return {
        "event": event,
        **({"job": made} if made is not None else {}),
        "build": bare,
        "pipeline": about,
        "sender": _SENDER,
    }


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


def webhooks_body(payload: dict[str, Any]) -> bytes:
    return json.dumps(payload).encode()


Instants = list[tuple[datetime, list[tuple[str, dict[str, Any]]] | None]]


def _instants(deliveries: dict[datetime, list[tuple[str, dict[str, Any]]]]) -> Instants:
    """Each instant's deliveries, and the schedule's ticks (None) every TICKS."""
    first, last = min(deliveries), max(deliveries)
    ticks = [first + TICKS * n for n in range(int((last - first) / TICKS) + 1)]
    found: Instants = [*deliveries.items()]
    found += [(at, None) for at in ticks if at not in deliveries]
    return sorted(found, key=lambda moment: (moment[0], moment[1] is None))


def _kind(event: str, payload: dict[str, Any]) -> str:
    """A delivery's kind: its event, or a job's status."""
    return str(payload["workflow_job"]["status"]) if event == "workflow_job" else event


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


def _deployed(at: datetime, calls: list[Call], sources: dict[str, Any]) -> list[Published]:
    """The instant's messages at their deployed publish time (see the module's docstring)."""
    closes = (
        -(-at.timestamp() // GROUP_WINDOW.total_seconds())
    ) * GROUP_WINDOW.total_seconds() - at.timestamp()
    chain = max((c.seconds for c in calls if c.function == "WebhookFunction"), default=0.0)
    out: list[Published] = []
    for call in calls:
        source = sources.get(call.function)
        if call.records is None or source is None:
            continue
        if call.function == "NotifierFunction":
            chain = max(chain, closes)  # the group settles no earlier than its bucket's end
        window = source.batching_window_s if call.records < source.batch_size else 0.0
        chain += STREAM_HOP_S + window + call.seconds
        out += [
            Published(at + timedelta(seconds=chain), m.subject, m.attributes, m.message)
            for m in call.published
        ]
    return out


def _firsts(sent: list[tuple[Published, datetime]]) -> list[tuple[str, Published, datetime]]:
    return [
        (m.attributes.get("alertname", ""), m, delivered)
        for m, delivered in sent
        if m.message.get("status") == alerts.FIRING and m.message.get("notification_reason") == "firing"
    ]


def _named(sent: list[tuple[Published, datetime]]) -> list[tuple[str, float]]:
    return [(name, (m.at - delivered).total_seconds()) for name, m, delivered in _firsts(sent)]


def _delays(sent: list[tuple[Published, datetime]]) -> list[float]:
    """Every first firing message is published by the second whose deliveries decided it."""
    return [delay for _, delay in _named(sent)]


def _percentile(values: list[float], pct: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(pct / 100 * (len(ordered) - 1)))]


@dataclass
class Settles:
    """What the groups' settles took: CPU seconds, each; calls through the storage port, all."""

    cpu_s: list[float] = field(default_factory=list)
    store_calls: int = 0


def _count_settles(runtime: LocalRuntime, meter: Meter, label: str, store_calls: StoreCalls) -> Settles:
    """Count a group's settle, which the delivery that opened the group runs (deployed: in
    its own invocation, after sleeping until the bucket closed), under `label`, into the
    `Settles` returned."""
    clock = runtime.clock
    call_at = clock.call_at
    settles = Settles()

    def counted(when: datetime, action: Callable[[], object]) -> None:
        def labelled() -> object:
            started, calls_before = time.thread_time(), store_calls.count
            try:
                with meter.as_(label):
                    return action()
            finally:
                settles.cpu_s.append(time.thread_time() - started)
                settles.store_calls += store_calls.count - calls_before

        call_at(when, labelled)

    clock.call_at = counted  # type: ignore[method-assign]
    return settles


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


def _gb_s_per_day(volume: Volume, per_job: dict[str, float], dropped_s: float, gb: float) -> float:
    """Billed GB-s a day at `gb` of memory: CPU time slowed by the CPU share below a full
    vCPU, waits as they are; the deliveries not about a trunk job are dropped ones."""
    trunk_jobs = volume.trunk_jobs_per_day
    dropped = volume.deliveries_per_day(per_job["deliveries"]) - trunk_jobs * per_job["deliveries"]
    cpu_s = max(0.0, dropped) * dropped_s + trunk_jobs * per_job["cpu_s"]
    return (cpu_s * cpu_slowdown(gb) + trunk_jobs * per_job["wait_s"]) * gb


def _secret_reads_per_day(volume: Volume, per_job: dict[str, float], dropped_s: float) -> float:
    """Each warm container reads the secret once per cache period; the containers are the
    function's mean concurrency at its memory size, rounded up (assumed: bursts reuse them)."""
    gb = memory_gb("webhook")
    busy_s = _gb_s_per_day(volume, per_job, dropped_s, gb) / gb
    containers = max(1, math.ceil(busy_s / SECONDS_PER_DAY))
    return containers * SECONDS_PER_DAY / WEBHOOK_SECRET_CACHE_SECONDS


def _platform_log_bytes() -> int:
    """Lambda's START/END/REPORT lines for every delivery, unless the function's system log
    level drops them."""
    return 0 if _system_log_level("WebhookFunction") in ("WARN", "ERROR", "FATAL") else PLATFORM_LOG_BYTES


def _cost(volume: Volume, per_job: dict[str, float], dropped_s: float) -> tuple[dict[str, float], float]:
    """The month's items at `volume`, and the deliveries a day."""
    trunk_jobs = volume.trunk_jobs_per_day
    per_day = volume.deliveries_per_day(per_job["deliveries"])
    month = DAYS_PER_MONTH
    gb_s = _gb_s_per_day(volume, per_job, dropped_s, memory_gb("webhook"))
    # The application's line and metrics only for a stored delivery.
    stored = trunk_jobs * per_job["deliveries"]
    log_gb = (
        per_day * _platform_log_bytes() + stored * APP_LOG_BYTES
    ) / GB  # the function publishes no metric
    secret_reads = _secret_reads_per_day(volume, per_job, dropped_s)
    items = {
        "lambda_requests": per_day * month / 1e6 * prices.LAMBDA_REQUESTS_PER_MILLION,
        "lambda_duration": gb_s * month * prices.LAMBDA_ARM_GB_SECOND,
        "dynamodb_writes": trunk_jobs
        * per_job["ddb_write_units"]
        * month
        / 1e6
        * prices.DYNAMODB_WRITE_REQUEST_UNITS_PER_MILLION,
        "dynamodb_reads": trunk_jobs
        * per_job["ddb_read_units"]
        * month
        / 1e6
        * prices.DYNAMODB_READ_REQUEST_UNITS_PER_MILLION,
        "logs": log_gb * month * prices.CLOUDWATCH_LOGS_INGESTED_GB,
        # A standard SSM parameter is free; each read decrypts it with the aws/ssm key.
        "secret": secret_reads * month / 1e6 * prices.KMS_REQUESTS_PER_MILLION,
    }
    return {k: round(v, 2) for k, v in items.items()}, per_day


def _dropped_usd(dropped_s: float) -> float:
    """What one delivery about no trunk costs: its Lambda request, its CPU time at the
    function's memory and CPU share, Lambda's own log lines."""
    gb = memory_gb("webhook")
    return (
        prices.LAMBDA_REQUESTS_PER_MILLION / 1e6
        + dropped_s * cpu_slowdown(gb) * gb * prices.LAMBDA_ARM_GB_SECOND
        + _platform_log_bytes() / GB * prices.CLOUDWATCH_LOGS_INGESTED_GB
    )


def _system_log_level(function: str) -> str:
    """The function's LoggingConfig SystemLogLevel in template.yaml ("" if it sets none)."""
    props = read_wiring(find_template()).resources[function].get("Properties") or {}
    return str((props.get("LoggingConfig") or {}).get("SystemLogLevel", ""))


def api_gateway_usd_per_month(per_day: float) -> float:
    """What an API Gateway REST route in front would add per month: its request charge."""
    return round(per_day * DAYS_PER_MONTH / 1e6 * prices.API_GATEWAY_REST_REQUESTS_PER_MILLION, 2)
