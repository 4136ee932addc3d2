"""Workload: the push path. Detection delay from the deciding job's `completed` delivery to
the SNS publish, how it pages a red trunk, and what the webhook path costs at PyTorch's
delivery volume.

PUSH_DAYS of a generated red trunk (benchmarks.redtrunk, seed SEED: breakages, flaky and
retried jobs, a dependency breakage, a runner outage) run through the local runtime fed by
webhook deliveries alone (no poll), as GitHub sends them (tests/support/timeline.py): each
commit's `push` and its runs' `workflow_run` when it lands, each job's `queued` and
`in_progress` then, its `completed` at its own finish time (a retried job's first attempt
failing, its retry queued a minute later); the schedule ticks every TICKS. Deliveries of
one GROUP_WINDOW bucket settle together (storage.ticks). Its pages are scored against the
trunk's truth (benchmarks.redtrunk_score): pages per breakage, jobs paged again within 3
hours of resolving, precision.

Deployed timeline after an instant's deliveries, from its first delivery: the webhook
invocations run side by side (the longest counts), then the stream path as in
`end_to_end.deployed_times` (one STREAM_HOP_S per stream invocation, the mapping's batching
window when its batch is not full, the invocation's measured duration); the group's tick
settles no earlier than its bucket's end, and the notifier's invocation on it publishes.
The delay of a first `firing` message runs from the deciding job's delivery to its publish.

Cost at the measured volume (JOBS_PER_MONTH, see there): every delivery is one Lambda
invocation through the function URL (no request charge beyond Lambda's); the deliveries
dropped before the table cost their measured duration only (no storage call, no log line
but Lambda's own); a trunk job costs what its deliveries (its `queued`, `in_progress` and
`completed`, and its share of its commit's `push` and runs' deliveries) were measured to
cost here: DynamoDB request units and duration. Billed duration separates CPU from waiting: the
handler's own CPU time (the invocation's thread CPU time, less moto's in-process answers
and the meter's sizing) runs at the function's CPU share (FULL_VCPU_MB), while each DynamoDB request is a
network wait of DYNAMODB_REQUEST_S and a group's opener sleeps until its bucket closes,
neither slowed by the CPU share; the opener's settle of its group counts with the
deliveries (its writes and requests). `usd_per_million_deliveries` is the month's cost over its
deliveries.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any
from unittest import mock

from benchmarks import prices
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
from benchmarks.redtrunk_score import Truth, score
from benchmarks.usage import Meter
from tests.support import webhooks
from tests.support.timeline import Timeline
from trunkwatch.app.settings import WEBHOOK_SECRET_CACHE_SECONDS
from trunkwatch.domain import alerts
from trunkwatch.domain.clock import format_time, parse_time
from trunkwatch.domain.config import PYTORCH_INCLUDE, load_deployment
from trunkwatch.domain.ticks import GROUP_WINDOW
from trunkwatch_local.runtime import LocalRuntime, Published
from trunkwatch_local.template import find_template
from trunkwatch_local.wiring import read_wiring

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
    # Billed GB-s a day at each memory size (MEMORY_SIZES_MB), the template's marked.
    lambda_gb_s_per_day_by_memory_mb: dict[int, float] = field(default_factory=dict)
    memory_mb: int = 0
    group_window_s: float = GROUP_WINDOW.total_seconds()
    detections: list[dict[str, Any]] = field(default_factory=list)
    basis: str = ""
    wall_s: float = 0.0


def run_push(days: float = PUSH_DAYS, other_trunks: int = 0) -> PushFigures:
    """The push path on `days` of the red trunk SEED; `other_trunks` more webhook-fed trunks
    of the same organization configured beside it (their repositories send nothing here)."""
    started = time.perf_counter()
    red = RedTrunk(SEED, days)
    history = Timeline.of_redtrunk(red)
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
    with mock.patch.dict(os.environ), contextlib.redirect_stdout(sys.stderr):
        runtime = LocalRuntime(store="dynamodb").start(load_deployment({"trunks": [trunk, *others]}))
        try:
            sources = {source.function: source for source in runtime.wiring.streams}
            calls: list[Call] = []
            time_invocations(runtime, calls)
            meter = Meter()
            settles_cpu_s = _count_settles(runtime, meter, "trunk")
            sent: list[tuple[Published, datetime]] = []
            kinds: Counter[str] = Counter()
            trunk_cpu_s = group_wait_s = 0.0
            with meter:
                for at, events in _instants(history):
                    if events is None:
                        runtime.tick(at)  # the schedule: the dispatcher and the sweeps
                        sent += [(m, at) for m in runtime.published(at)]
                        continue
                    calls.clear()
                    for event, payload in events:
                        with meter.as_("trunk"):
                            cpu_started = time.thread_time()
                            runtime.deliver(event, webhooks_body(payload), at)
                            trunk_cpu_s += time.thread_time() - cpu_started
                        kinds[_kind(event, payload)] += 1
                    opener_wakes = runtime.clock.next_due()  # a group opened: its opener sleeps
                    if opener_wakes is not None:
                        group_wait_s += max(0.0, (opener_wakes - at).total_seconds())
                    runtime.settle_deliveries(at)
                    sent += [(m, at) for m in _deployed(at, calls, sources)]
                trunk_usage = meter.get("trunk")
                dropped_s = _dropped_delivery_s(runtime, meter, history.landings[0].at)
        finally:
            runtime.stop()
    deliveries = sum(kinds.values())
    jobs = kinds["completed"]
    delays = _delays(sent)
    # CPU time (this thread's: the load of other processes does not count), less moto's and
    # the meter's own.
    code_s = max(
        0.0,
        trunk_cpu_s + sum(settles_cpu_s) - trunk_usage.emulator_cpu_seconds - trunk_usage.meter_cpu_seconds,
    )
    per_job = {
        "deliveries": deliveries / max(1, jobs),
        "ddb_read_units": trunk_usage.read_units / max(1, jobs),
        "ddb_write_units": trunk_usage.write_units / max(1, jobs),
        "ddb_requests": trunk_usage.ddb_requests / max(1, jobs),
        "cpu_s": code_s / max(1, jobs),
        "wait_s": (trunk_usage.ddb_requests * DYNAMODB_REQUEST_S + group_wait_s) / max(1, jobs),
    }
    gb_s_by_memory = {mb: _gb_s_per_day(per_job, dropped_s, mb / 1024) for mb in MEMORY_SIZES_MB}
    items, per_day = _cost(per_job, dropped_s)
    paging = score(Truth(red.truth()), [_scored(m) for m, _ in sent if not m.is_digest])
    return PushFigures(
        deliveries=deliveries,
        notifications=len(sent),
        detection_delay_s_p50=round(statistics.median(delays), 3) if delays else 0.0,
        detection_delay_s_p95=round(_percentile(delays, 95), 3),
        detection_delay_s_max=round(max(delays, default=0.0), 3),
        usd_per_month=round(sum(items.values()), 2),
        days=days,
        trunk_jobs=jobs,
        deliveries_by_kind=dict(sorted(kinds.items())),
        paging={key: paging[key] for key in PAGING_FIGURES},
        ddb_write_units_per_trunk_job=round(per_job["ddb_write_units"], 3),
        usd_per_million_deliveries=round(sum(items.values()) / (per_day * DAYS_PER_MONTH) * 1e6, 3),
        deliveries_per_day_assumed=round(per_day),
        trunk_jobs_per_day=TRUNK_JOBS_PER_DAY,
        usd_per_month_items=items,
        api_gateway_rest_usd_per_month=api_gateway_usd_per_month(per_day),
        per_trunk_job={k: round(v, 4) for k, v in per_job.items()},
        per_dropped_delivery_s=round(dropped_s, 5),
        lambda_gb_s_per_day_by_memory_mb={mb: round(v, 1) for mb, v in gb_s_by_memory.items()},
        memory_mb=round(memory_gb("webhook") * 1024),
        detections=[{"alertname": a, "delay_s": round(d, 3)} for a, d in _named(sent)],
        basis=(
            f"{per_day:,.0f} deliveries a day: {JOBS_PER_MONTH:,} pytorch/pytorch jobs in 30 days "
            "(pytorch/ci-infra osdc/docs/current_runner_load_distribution.md, March 2026), "
            f"{JOB_DELIVERIES} workflow_job deliveries per job plus {RUN_DELIVERIES_PER_JOB:g} "
            f"workflow_run deliveries per job (assumed); {TRUNK_JOBS_PER_DAY:,} of the daily jobs on "
            "main (the upper end of 10-20 k), each costing what a trunk job's deliveries cost here "
            f"({per_job['deliveries']:.2f} deliveries a job: its queued, in_progress and completed, "
            "retries, and its share of its commit's push and runs); the others dropped before the "
            f"table; Lambda duration: the handler's CPU time at the function's CPU share ({FULL_VCPU_MB} "
            f"MB a vCPU), each DynamoDB request a {DYNAMODB_REQUEST_S * 1000:g} ms wait (assumed; moto's "
            "in-process answers left out) and a group's opener asleep until its bucket closes, both "
            "unscaled; the secret a free SSM SecureString, decrypted (one KMS request) once per "
            f"{WEBHOOK_SECRET_CACHE_SECONDS} s per container, as many containers as the mean concurrency "
            "(assumed)"
        ),
        wall_s=round(time.perf_counter() - started, 2),
    )


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


def webhooks_body(payload: dict[str, Any]) -> bytes:
    return json.dumps(payload).encode()


def _instants(
    history: Timeline,
) -> list[tuple[datetime, list[tuple[str, dict[str, Any]]] | None]]:
    """Each instant's deliveries, and the schedule's ticks (None) every TICKS."""
    moments: dict[datetime, list[tuple[str, dict[str, Any]]]] = {}
    for event in history.deliveries(ticks=()):
        delivery = event["webhook"]
        moments.setdefault(parse_time(event["at"]), []).append((delivery["event"], delivery["payload"]))
    first, last = min(moments), max(moments)
    ticks = [first + TICKS * n for n in range(int((last - first) / TICKS) + 1)]
    found: list[tuple[datetime, list[tuple[str, dict[str, Any]]] | None]] = [*moments.items()]
    found += [(at, None) for at in ticks if at not in moments]
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


def _count_settles(runtime: LocalRuntime, meter: Meter, label: str) -> list[float]:
    """Count a group's settle, which the delivery that opened the group runs (deployed: in
    its own invocation, after sleeping until the bucket closed), under `label`; the CPU
    seconds of each settle are appended to the list returned."""
    clock = runtime.clock
    call_at = clock.call_at
    cpu_s: list[float] = []

    def counted(when: datetime, action: Callable[[], object]) -> None:
        def labelled() -> object:
            started = time.thread_time()
            try:
                with meter.as_(label):
                    return action()
            finally:
                cpu_s.append(time.thread_time() - started)

        call_at(when, labelled)

    clock.call_at = counted  # type: ignore[method-assign]
    return cpu_s


def _dropped_delivery_s(runtime: LocalRuntime, meter: Meter, at: datetime) -> float:
    """CPU time of a delivery dropped before the table (a pull request's job): the best
    batch's mean (DROP_BATCHES), less anything the emulator answered (nothing, when the
    path makes no storage call)."""
    payload = webhooks.workflow_job("f" * 40, "linux-jammy / build", branch="some-feature")
    body = webhooks_body(payload)
    runtime.deliver("workflow_job", body, at)  # the container's first: the secret cached
    batches = []
    for batch in range(DROP_BATCHES):
        with meter.as_(f"dropped-{batch}") as usage:
            started = time.thread_time()
            for _ in range(DROP_ROUNDS):
                runtime.deliver("workflow_job", body, at)
            elapsed = time.thread_time() - started - usage.emulator_cpu_seconds - usage.meter_cpu_seconds
        batches.append(elapsed / DROP_ROUNDS)
    return min(batches)


def _gb_s_per_day(per_job: dict[str, float], dropped_s: float, gb: float) -> float:
    """Billed GB-s a day at `gb` of memory: CPU time slowed by the CPU share below a full
    vCPU, waits as they are; the deliveries not about a trunk job are dropped ones."""
    dropped = _deliveries_per_day() - TRUNK_JOBS_PER_DAY * per_job["deliveries"]
    cpu_s = max(0.0, dropped) * dropped_s + TRUNK_JOBS_PER_DAY * per_job["cpu_s"]
    return (cpu_s * cpu_slowdown(gb) + TRUNK_JOBS_PER_DAY * per_job["wait_s"]) * gb


def _secret_reads_per_day(per_job: dict[str, float], dropped_s: float) -> float:
    """Each warm container reads the secret once per cache period; the containers are the
    function's mean concurrency at its memory size, rounded up (assumed: bursts reuse them)."""
    gb = memory_gb("webhook")
    busy_s = _gb_s_per_day(per_job, dropped_s, gb) / gb
    containers = max(1, math.ceil(busy_s / SECONDS_PER_DAY))
    return containers * SECONDS_PER_DAY / WEBHOOK_SECRET_CACHE_SECONDS


def _deliveries_per_day() -> float:
    return JOBS_PER_MONTH / DAYS_PER_MONTH * (JOB_DELIVERIES + RUN_DELIVERIES_PER_JOB)


def _cost(per_job: dict[str, float], dropped_s: float) -> tuple[dict[str, float], float]:
    """The month's items at the measured volume (see JOBS_PER_MONTH), and the deliveries a
    day."""
    trunk_jobs = TRUNK_JOBS_PER_DAY
    per_day = _deliveries_per_day()
    month = DAYS_PER_MONTH
    gb_s = _gb_s_per_day(per_job, dropped_s, memory_gb("webhook"))
    # Lambda's START/END/REPORT lines for every delivery, unless the function's system log
    # level drops them; the application's line and metrics only for a stored delivery.
    platform = 0 if _system_log_level("WebhookFunction") in ("WARN", "ERROR", "FATAL") else PLATFORM_LOG_BYTES
    stored = trunk_jobs * per_job["deliveries"]
    log_gb = (per_day * platform + stored * APP_LOG_BYTES) / GB  # the function publishes no metric
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
        "secret": _secret_reads_per_day(per_job, dropped_s) * month / 1e6 * prices.KMS_REQUESTS_PER_MILLION,
    }
    return {k: round(v, 2) for k, v in items.items()}, per_day


def _system_log_level(function: str) -> str:
    """The function's LoggingConfig SystemLogLevel in template.yaml ("" if it sets none)."""
    props = read_wiring(find_template()).resources[function].get("Properties") or {}
    return str((props.get("LoggingConfig") or {}).get("SystemLogLevel", ""))


def api_gateway_usd_per_month(per_day: float) -> float:
    """What an API Gateway REST route in front would add per month: its request charge."""
    return round(per_day * DAYS_PER_MONTH / 1e6 * prices.API_GATEWAY_REST_REQUESTS_PER_MILLION, 2)
