"""Workload 5: a month at PyTorch scale, priced from the measured counts (prices.py only).

A day is COMMITS_PER_DAY commits and one schedule tick per schedule period (template.yaml's
Schedule, rate(1 minute) by default). Each commit costs what the full-scale cycle measured
for one commit finishing plus one landing (the ingest poll, the evaluator's batches and the
notifier woken by the settled tick); every other tick costs a quiet ingest poll; every tick
also costs the evaluator's scheduled sweep and the notifier woken by the settled tick the
sweep writes. SNS publishes are the notifications of the
simulated day. Lambda duration is each invocation's own measured time in-process, scaled
to the CPU share of the function's MemorySize, plus moto's time answering its requests
(standing in for DynamoDB's latency). Storage is the table's steady-state size (storage.py:
every kind of item for as long as its TTL keeps it), billed with point-in-time recovery.
A 30-day month; free tiers ignored.

`items` prices every resource template.yaml deploys, at its parameters' defaults (Tracing,
CreateDashboard, EncryptAlarmTopic): the fixed monthly charges (the dashboard, the alarm
topic's KMS key, each alarm counted from the template, each custom metric the code emits
with its dimension set in every hour of a month without failures, each Secrets Manager secret
the default configuration reads) and the usage charges (the
measured pipeline above, the API at API_REQUESTS_PER_DAY through the authorizer, X-Ray
traces, CloudWatch Logs kept for the LogRetentionDays default, KMS requests).
`usd_per_month` is the usage part, as before plus the API, X-Ray, logs and KMS requests;
`usd_per_month_all_in` adds the fixed part.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

from benchmarks import prices
from benchmarks.evaluator import Cycle
from benchmarks.storage import steady_state
from benchmarks.trunk import COMMITS_PER_DAY
from benchmarks.usage import Usage
from trunkwatch.app.configuration import load_configuration
from trunkwatch.app.trunk_metrics import ALERTS_FIRING, FAILING_JOBS, SECONDS_SINCE_GOOD_POLL
from trunkwatch.domain.config import TokenRef
from trunkwatch_local.schedule import period_seconds
from trunkwatch_local.template import find_template, load_template
from trunkwatch_local.wiring import read_wiring

DAYS_PER_MONTH = 30
GB = 1e9
# Lambda gives a function CPU in proportion to its memory, one vCPU at 1,769 MB (AWS Lambda
# developer guide, "Configuring Lambda function memory"); this machine runs the code on a
# full core.
FULL_VCPU_MB = 1769
# Assumptions where nothing measures the volume (stated in the summary's basis):
# API requests a day (amtool, scripts, a dashboard polling silences), each one authorizer
# invocation (no authorizer cache) and one API invocation, of these durations.
API_REQUESTS_PER_DAY = 500
API_INVOCATION_S = 0.1
AUTHORIZER_INVOCATION_S = 0.02
# Log bytes per invocation: Lambda's START/END/REPORT lines (with the X-Ray segment line),
# Powertools' EMF metrics blob where the function emits metrics, and application lines.
PLATFORM_LOG_BYTES = 450
EMF_LOG_BYTES = 600
APP_LOG_BYTES = 300
# SNS asks KMS for a data key at most once per KmsDataKeyReusePeriodSeconds (300 s default).
SNS_DATA_KEY_REUSE_S = 300
SECONDS_PER_DAY = 86400
# The poll queue: per tick and trunk, a tenth of the dispatcher's SendMessageBatch and
# Lambda's ReceiveMessage and DeleteMessage of the message; and Lambda's own long polls while
# the queue is empty (an assumption: SQS_POLLERS connections, each a ReceiveMessage every
# SQS_LONG_POLL_S, as the SQS event source mapping long-polls).
SQS_REQUESTS_PER_POLL = 0.1 + 1 + 1
SQS_POLLERS = 5
SQS_LONG_POLL_S = 20
PACKAGE = Path(__file__).resolve().parents[1] / "layers" / "trunkwatch" / "trunkwatch"


def memory_gb(function: str) -> float:
    """MemorySize of functions/<function> (its own, else Globals'), in GB."""
    wiring = read_wiring(find_template())
    template = load_template(find_template())
    default_mb = ((template.get("Globals") or {}).get("Function") or {}).get("MemorySize", 128)
    logical_id = next(lid for lid, path in wiring.functions.items() if path.parent.name == function)
    props = wiring.resources[logical_id].get("Properties") or {}
    return float(props.get("MemorySize", default_mb)) / 1024


def ticks_per_day() -> float:
    """The dispatcher's schedule ticks a day (each starts the polls of the due trunks)."""
    wiring = read_wiring(find_template())
    dispatcher = next(
        expr for lid, expr in wiring.schedules.items() if wiring.functions[lid].parent.name == "dispatcher"
    )
    return 86400 / period_seconds(dispatcher)


def _parameter_default(name: str) -> str:
    template = load_template(find_template())
    return str(((template.get("Parameters") or {}).get(name) or {}).get("Default", ""))


def alarm_count() -> int:
    """CloudWatch alarms in template.yaml (each watches one standard-resolution metric)."""
    resources = read_wiring(find_template()).resources
    return sum(1 for r in resources.values() if r.get("Type") == "AWS::CloudWatch::Alarm")


TRUNK_GAUGES = (FAILING_JOBS, ALERTS_FIRING, SECONDS_SINCE_GOOD_POLL)
# AWS bills a custom metric for each hour in which it is published. These are published only
# when something fails (each add_metric sits on an error path), so a month without failures
# pays nothing for them; tests/unit/test_cost_metrics.py holds them to that.
FAILURE_METRICS = frozenset(
    {
        "PollErrors",
        "NotificationErrors",
        "NotificationsRejected",
        "NotificationsDeferred",
        "NotificationsInProgress",
        "ApiErrors",
        "TicksSettledBySweep",
        "StreamRecordsFailed",
    }
)
# Published only when the stack has its dashboard, the one place that shows them
# (Settings.dashboard_metrics); so are the per-trunk gauges.
DASHBOARD_METRICS = frozenset({"AlertsFiring"})


def emitted_metrics() -> set[str]:
    """Every metric name the code passes to `add_metric(name=...)`."""
    return {
        match
        for path in PACKAGE.rglob("*.py")
        for match in re.findall(r"add_metric\(\s*name=\"(\w+)\"", path.read_text(encoding="utf-8"))
    }


def custom_metrics(dashboard: bool = False) -> list[str]:
    """The custom metrics billed for a whole month without failures: the EMF metrics the code
    emits on its normal paths, each with Powertools' one dimension set (service), one
    CloudWatch custom metric per name; with the dashboard, its metrics and the per-trunk
    gauges of one trunk."""
    names = emitted_metrics() - FAILURE_METRICS
    if not dashboard:
        return sorted(names - DASHBOARD_METRICS)
    return sorted(names) + [f"{name}[trunk 1]" for name in TRUNK_GAUGES]


def secrets_in_default_config() -> int:
    """Secrets Manager secrets the packaged configuration (config/trunkwatch.yaml) reads
    (source tokens, receiver URLs and tokens)."""
    deployment = load_configuration(find_template().parent / "config" / "trunkwatch.yaml")
    refs = [trunk.token for trunk in deployment.trunks]
    refs += [getattr(r, key, None) for r in deployment.receivers for key in ("url", "token")]
    return len({ref.secret for ref in refs if isinstance(ref, TokenRef) and ref.secret})


def dashboard_by_default() -> bool:
    return _parameter_default("CreateDashboard") == "true"


def trunk_gauges_usd(dashboard: bool) -> float:
    """A month of one trunk's gauges: published only for the stack's dashboard."""
    return len(TRUNK_GAUGES) * prices.CLOUDWATCH_CUSTOM_METRIC_MONTH if dashboard else 0.0


def _per_trunk(cycle: Cycle, ticks: float, dashboard: bool) -> dict[str, float]:
    """A month of one more trunk's quiet polls (its own ingest invocation on every tick, its
    poll queue requests, its logs) and its per-trunk gauges, by item, with the total."""
    per_day = ingest_items(repeated(cycle.quiet.of("ingest"), ticks), ticks)
    items = {name: usd * DAYS_PER_MONTH for name, usd in per_day.items()}
    items["metrics"] = trunk_gauges_usd(dashboard)
    items = {name: round(usd, 4) for name, usd in items.items()}
    return {**items, "total": round(sum(items.values()), 4)}


def ingest_items(usage: Usage, ticks: float) -> dict[str, float]:
    """A day of one trunk's ingest invocations (`usage`, one a tick, `ticks` a day) in
    dollars, by item: Lambda, its table requests, the poll queue's requests, the logs."""
    gb = memory_gb("ingest")
    return {
        "lambda": usage.invocations * prices.LAMBDA_REQUESTS_PER_MILLION / 1e6
        + lambda_seconds(usage, gb) * gb * prices.LAMBDA_ARM_GB_SECOND,
        "dynamodb": usage.read_units * prices.DYNAMODB_READ_REQUEST_UNITS_PER_MILLION / 1e6
        + usage.write_units * prices.DYNAMODB_WRITE_REQUEST_UNITS_PER_MILLION / 1e6,
        "sqs": ticks * SQS_REQUESTS_PER_POLL * prices.SQS_FIFO_REQUESTS_PER_MILLION / 1e6,
        "logs": usage.invocations
        * (PLATFORM_LOG_BYTES + APP_LOG_BYTES + EMF_LOG_BYTES)
        / GB
        * prices.CLOUDWATCH_LOGS_INGESTED_GB,
    }


def project(
    cycle: Cycle,
    notifications_per_day: float,
    job_columns: int,
    day_stored: dict[str, list[int]],
    day_hours: float,
) -> dict[str, Any]:
    """The month, with template.yaml's parameter defaults; `day_stored` is what the simulated
    day of `day_hours` left in its table (per kind, see end_to_end)."""
    dashboard = dashboard_by_default()
    tracing = _parameter_default("Tracing") == "Active"
    ticks = ticks_per_day()
    commits = COMMITS_PER_DAY
    quiet_polls = ticks - 2 * commits  # each commit's finishing and landing polls are measured
    per_function: dict[str, Usage] = {}
    for function in ("dispatcher", "ingest", "evaluator", "notifier"):
        usage = Usage()
        for phase in (cycle.finish, cycle.land):
            usage += repeated(phase.of(function), commits)
        if function in ("dispatcher", "ingest"):
            usage += repeated(cycle.quiet.of(function), quiet_polls)
        if function in ("evaluator", "notifier"):
            # The evaluator's sweep on every tick, and the notifier on the tick it settles.
            usage += repeated(cycle.quiet.of(function), ticks)
        per_function[function] = usage
    total = sum(per_function.values(), Usage())
    gb_seconds = sum(lambda_seconds(u, memory_gb(f)) * memory_gb(f) for f, u in per_function.items())
    storage = steady_state(cycle, day_stored, day_hours, commits, ticks, job_columns)

    def monthly(daily: float, usd_per_million: float) -> float:
        return daily * DAYS_PER_MONTH / 1e6 * usd_per_million

    month = {
        "dynamodb_writes": monthly(total.write_units, prices.DYNAMODB_WRITE_REQUEST_UNITS_PER_MILLION),
        "dynamodb_reads": monthly(total.read_units, prices.DYNAMODB_READ_REQUEST_UNITS_PER_MILLION),
        "dynamodb_storage": storage.gb * (prices.DYNAMODB_STORAGE_GB_MONTH + prices.DYNAMODB_PITR_GB_MONTH),
        "lambda_requests": monthly(total.invocations, prices.LAMBDA_REQUESTS_PER_MILLION),
        "lambda_compute": gb_seconds * DAYS_PER_MONTH * prices.LAMBDA_ARM_GB_SECOND,
        "sns_publishes": monthly(notifications_per_day, prices.SNS_PUBLISHES_PER_MILLION),
    }
    # The API: requests through API Gateway, each an authorizer and an API invocation.
    api_gb_s = API_REQUESTS_PER_DAY * (
        API_INVOCATION_S * memory_gb("api") + AUTHORIZER_INVOCATION_S * memory_gb("authorizer")
    )
    invocations = total.invocations + 2 * API_REQUESTS_PER_DAY
    month["api_requests"] = monthly(API_REQUESTS_PER_DAY, prices.API_GATEWAY_REST_REQUESTS_PER_MILLION)
    month["api_lambda"] = monthly(2 * API_REQUESTS_PER_DAY, prices.LAMBDA_REQUESTS_PER_MILLION) + (
        api_gb_s * DAYS_PER_MONTH * prices.LAMBDA_ARM_GB_SECOND
    )
    # X-Ray: at these rates (well under the default rule's one a second) every invocation is
    # sampled; an API request is one trace through the stage, authorizer and function.
    traces = total.invocations + API_REQUESTS_PER_DAY if tracing else 0
    month["xray_traces"] = monthly(traces, prices.XRAY_TRACES_RECORDED_PER_MILLION)
    # Logs: every invocation's platform lines, an EMF blob from those that emit metrics
    # (all but the authorizer), application lines; each log group keeps LogRetentionDays of
    # them, so that many days' worth is stored in the steady state.
    log_gb_per_day = (
        invocations * (PLATFORM_LOG_BYTES + APP_LOG_BYTES)
        + (invocations - API_REQUESTS_PER_DAY) * EMF_LOG_BYTES
    ) / GB
    month["logs_ingested"] = log_gb_per_day * DAYS_PER_MONTH * prices.CLOUDWATCH_LOGS_INGESTED_GB
    retention_days = int(_parameter_default("LogRetentionDays"))
    month["logs_stored"] = log_gb_per_day * retention_days * prices.CLOUDWATCH_LOGS_STORED_GB_MONTH
    # KMS requests: SNS data keys for the alert topic (AWS managed key) at most once per
    # reuse period while publishing; the authorizer's SecureString decrypt, at most once a
    # minute per warm container, bounded by its requests.
    data_keys = min(notifications_per_day, SECONDS_PER_DAY / SNS_DATA_KEY_REUSE_S)
    decrypts = min(API_REQUESTS_PER_DAY, SECONDS_PER_DAY / 60)
    month["kms_requests"] = monthly(data_keys + decrypts, prices.KMS_REQUESTS_PER_MILLION)
    secrets = secrets_in_default_config()
    # Each secret read at most once per 5-minute cache per warm ingest container.
    month["secrets_api_calls"] = monthly(
        secrets * min(ticks, SECONDS_PER_DAY / 300), prices.SECRETS_MANAGER_API_CALLS_PER_MILLION
    )
    metrics = custom_metrics(dashboard=dashboard)
    alarms = alarm_count()
    alarm_topic_key = _parameter_default("EncryptAlarmTopic") == "true"
    fixed = {
        "dashboard": prices.CLOUDWATCH_DASHBOARD_MONTH if dashboard else 0.0,
        "kms_key": prices.KMS_KEY_MONTH if alarm_topic_key else 0.0,  # AlarmTopicKey
        "alarms": alarms * prices.CLOUDWATCH_ALARM_METRIC_MONTH,
        "metrics": len(metrics) * prices.CLOUDWATCH_CUSTOM_METRIC_MONTH,
        "secrets": secrets * prices.SECRETS_MANAGER_SECRET_MONTH,
    }
    month["sqs_requests"] = monthly(
        ticks * SQS_REQUESTS_PER_POLL + SQS_POLLERS * SECONDS_PER_DAY / SQS_LONG_POLL_S,
        prices.SQS_FIFO_REQUESTS_PER_MILLION,
    )
    per_trunk = _per_trunk(cycle, ticks, dashboard)
    month = {item: round(usd, 4) for item, usd in month.items()}
    fixed = {item: round(usd, 4) for item, usd in fixed.items()}
    groups = {
        "dashboard": {"dashboard": fixed["dashboard"]},
        "kms": {"key": fixed["kms_key"], "requests": month["kms_requests"]},
        "alarms": {"alarms": fixed["alarms"]},
        "metrics": {"custom_metrics": fixed["metrics"]},
        "xray": {"traces": month["xray_traces"]},
        "logs": {"ingested": month["logs_ingested"], "stored": month["logs_stored"]},
        "secrets": {"secrets": fixed["secrets"], "api_calls": month["secrets_api_calls"]},
        "dynamodb": {
            k.removeprefix("dynamodb_"): month[k]
            for k in ("dynamodb_writes", "dynamodb_reads", "dynamodb_storage")
        },
        "lambda": {
            "requests": month["lambda_requests"],
            "compute": month["lambda_compute"],
            "api_and_authorizer": month["api_lambda"],
        },
        "sns": {"publishes": month["sns_publishes"]},
        "api": {"requests": month["api_requests"]},
        "sqs": {"poll_queue": month["sqs_requests"]},
    }
    items = {name: round(sum(parts.values()), 2) for name, parts in groups.items()}
    usage_usd = sum(month.values())
    fixed_total = sum(fixed.values())
    return {
        "usd_per_month": round(usage_usd, 2),
        "commits_per_day": commits,
        "job_columns": job_columns,
        "prices": prices.as_dict(),
        "usd_per_month_all_in": round(usage_usd + fixed_total, 2),
        "items": items,
        "fixed_usd_per_month": round(fixed_total, 2),
        "items_detail": groups,
        "deployed": {
            "dashboard": dashboard,
            "tracing": tracing,
            "alarms": alarms,
            "custom_metrics": metrics,
            "secrets": secrets,
            "api_requests_per_day": API_REQUESTS_PER_DAY,
        },
        "prices_source": prices.source(),
        "usd_per_month_by_item": month,
        "per_day": {
            "ticks": ticks,
            "write_request_units": round(total.write_units),
            "read_request_units": round(total.read_units),
            "dynamodb_requests": total.ddb_requests,
            "lambda_invocations": total.invocations,
            "lambda_gb_seconds": round(gb_seconds, 1),
            "sns_publishes": notifications_per_day,
            **{
                f"{f}_lambda_seconds": round(lambda_seconds(u, memory_gb(f)), 1)
                for f, u in per_function.items()
            },
            **{f"{f}_write_request_units": round(u.write_units) for f, u in per_function.items()},
            **{f"{f}_read_request_units": round(u.read_units) for f, u in per_function.items()},
        },
        "storage": dataclasses.asdict(storage),
        "per_trunk_usd_per_month": per_trunk,
        "basis": (
            f"{commits} commits/day x (a commit finishing + a commit landing, measured at "
            f"{job_columns} job columns) + {quiet_polls:g} quiet polls + {ticks:g} sweeps (the "
            "evaluator's, then the notifier on the settled tick it writes); "
            f"SNS from the simulated day; storage: {storage.gb:g} GB in the steady state ({storage.basis}); "
            f"API: {API_REQUESTS_PER_DAY} requests/day assumed ({API_INVOCATION_S:g} s API, "
            f"{AUTHORIZER_INVOCATION_S:g} s authorizer invocations); logs: {PLATFORM_LOG_BYTES} + "
            f"{APP_LOG_BYTES} bytes per invocation + {EMF_LOG_BYTES} bytes of EMF, kept "
            f"{retention_days} days; fixed: "
            f"dashboard {'on' if dashboard else 'off'}, alarm topic key "
            f"{'on' if alarm_topic_key else 'off'}, {alarms} alarms, {len(metrics)} custom metrics "
            f"published every hour ({', '.join(metrics)}; {len(FAILURE_METRICS)} more only on "
            f"failures, billed by the hour they appear), {secrets} secrets; "
            f"X-Ray {'on' if tracing else 'off'}"
        ),
    }


def cpu_slowdown(memory_gb: float) -> float:
    """How much longer CPU-bound time measured on a full core takes at the function's CPU
    share (FULL_VCPU_MB), never faster than a full core."""
    return max(1.0, FULL_VCPU_MB / (memory_gb * 1024))


def lambda_seconds(usage: Usage, memory_gb: float) -> float:
    """Billed duration: the code's own time slowed to the function's CPU share, plus the
    time the emulator took to answer (standing in for DynamoDB's)."""
    return usage.code_seconds * cpu_slowdown(memory_gb) + usage.emulator_seconds


def repeated(usage: Usage, n: float) -> Usage:
    """`usage` repeated n times (n may be fractional)."""
    scaled = Usage(
        items_written=round(usage.items_written * n),
        items_read=round(usage.items_read * n),
        read_units=usage.read_units * n,
        write_units=usage.write_units * n,
        invocations=round(usage.invocations * n),
        seconds=usage.seconds * n,
        emulator_seconds=usage.emulator_seconds * n,
        meter_seconds=usage.meter_seconds * n,
    )
    scaled.calls.update({name: round(count * n) for name, count in usage.calls.items()})
    return scaled
