"""Workload 5: a month at PyTorch scale, priced from the measured counts (prices.py only).

A day is COMMITS_PER_DAY commits and one schedule tick per schedule period (template.yaml's
Schedule, rate(1 minute) by default). Each commit costs what the full-scale cycle measured
for one commit finishing plus one landing (the ingest poll, the evaluator's batches and the
notifier woken by the settled tick); every other tick costs a quiet ingest poll; every tick
also costs the notifier's scheduled sweep. SNS publishes are the notifications of the
simulated day. Lambda duration is each invocation's own measured time in-process, scaled
to the CPU share of the function's MemorySize, plus moto's time answering its requests
(standing in for DynamoDB's latency). Storage is what a month of commits adds to the table
for good (cells and commits carry no TTL), billed with point-in-time recovery; it is
charged again every later month. A 30-day month; free tiers ignored.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from benchmarks import prices
from benchmarks.evaluator import Cycle
from benchmarks.trunk import COMMITS_PER_DAY
from benchmarks.usage import Usage
from trunkwatch_local.schedule import period_seconds
from trunkwatch_local.template import find_template, load_template
from trunkwatch_local.wiring import read_wiring

DAYS_PER_MONTH = 30
GB = 1e9
# Lambda gives a function CPU in proportion to its memory, one vCPU at 1,769 MB (AWS Lambda
# developer guide, "Configuring Lambda function memory"); this machine runs the code on a
# full core.
FULL_VCPU_MB = 1769


@dataclass
class CostFigures:
    usd_per_month: float
    commits_per_day: int
    job_columns: int
    prices: dict[str, float]
    # beyond SPEC 8
    prices_source: str = ""
    usd_per_month_by_item: dict[str, float] = field(default_factory=dict)
    per_day: dict[str, float] = field(default_factory=dict)
    basis: str = ""


def _memory_gb(function: str) -> float:
    """MemorySize of functions/<function> (its own, else Globals'), in GB."""
    wiring = read_wiring(find_template())
    template = load_template(find_template())
    default_mb = ((template.get("Globals") or {}).get("Function") or {}).get("MemorySize", 128)
    logical_id = next(lid for lid, path in wiring.functions.items() if path.parent.name == function)
    props = wiring.resources[logical_id].get("Properties") or {}
    return float(props.get("MemorySize", default_mb)) / 1024


def ticks_per_day() -> float:
    wiring = read_wiring(find_template())
    ingest = next(
        expr for lid, expr in wiring.schedules.items() if wiring.functions[lid].parent.name == "ingest"
    )
    return 86400 / period_seconds(ingest)


def project(cycle: Cycle, notifications_per_day: float, job_columns: int) -> CostFigures:
    ticks = ticks_per_day()
    commits = COMMITS_PER_DAY
    quiet_polls = ticks - 2 * commits  # each commit's finishing and landing polls are measured
    per_function: dict[str, Usage] = {}
    for function in ("ingest", "evaluator", "notifier"):
        usage = Usage()
        for phase in (cycle.finish, cycle.land):
            usage += _times(phase.of(function), commits)
        if function == "ingest":
            usage += _times(cycle.quiet.of("ingest"), quiet_polls)
        if function == "notifier":
            usage += _times(cycle.quiet.of("notifier"), ticks)  # the scheduled sweep
        per_function[function] = usage
    total = sum(per_function.values(), Usage())
    gb_seconds = sum(lambda_seconds(u, _memory_gb(f)) * _memory_gb(f) for f, u in per_function.items())
    stored_gb_per_month = cycle.stored_bytes_per_commit * commits * DAYS_PER_MONTH / GB

    def monthly(daily: float, usd_per_million: float) -> float:
        return daily * DAYS_PER_MONTH / 1e6 * usd_per_million

    month = {
        "dynamodb_writes": monthly(total.write_units, prices.DYNAMODB_WRITE_REQUEST_UNITS_PER_MILLION),
        "dynamodb_reads": monthly(total.read_units, prices.DYNAMODB_READ_REQUEST_UNITS_PER_MILLION),
        "dynamodb_storage_added": stored_gb_per_month
        * (prices.DYNAMODB_STORAGE_GB_MONTH + prices.DYNAMODB_PITR_GB_MONTH),
        "lambda_requests": monthly(total.invocations, prices.LAMBDA_REQUESTS_PER_MILLION),
        "lambda_compute": gb_seconds * DAYS_PER_MONTH * prices.LAMBDA_ARM_GB_SECOND,
        "sns_publishes": monthly(notifications_per_day, prices.SNS_PUBLISHES_PER_MILLION),
    }
    month = {item: round(usd, 4) for item, usd in month.items()}
    return CostFigures(
        usd_per_month=round(sum(month.values()), 2),
        commits_per_day=commits,
        job_columns=job_columns,
        prices=prices.as_dict(),
        prices_source=prices.source(),
        usd_per_month_by_item=month,
        per_day={
            "ticks": ticks,
            "write_request_units": round(total.write_units),
            "read_request_units": round(total.read_units),
            "dynamodb_requests": total.ddb_requests,
            "lambda_invocations": total.invocations,
            "lambda_gb_seconds": round(gb_seconds, 1),
            "sns_publishes": notifications_per_day,
            "stored_gb_added": round(stored_gb_per_month / DAYS_PER_MONTH, 4),
            **{
                f"{f}_lambda_seconds": round(lambda_seconds(u, _memory_gb(f)), 1)
                for f, u in per_function.items()
            },
            **{f"{f}_write_request_units": round(u.write_units) for f, u in per_function.items()},
            **{f"{f}_read_request_units": round(u.read_units) for f, u in per_function.items()},
        },
        basis=(
            f"{commits} commits/day x (a commit finishing + a commit landing, measured at "
            f"{job_columns} job columns) + {quiet_polls:g} quiet polls + {ticks:g} notifier sweeps; "
            "SNS from the simulated day; storage: one month of cells, charged again each later month"
        ),
    )


def lambda_seconds(usage: Usage, memory_gb: float) -> float:
    """Billed duration: the code's own time slowed to the function's CPU share, plus the
    time the emulator took to answer (standing in for DynamoDB's)."""
    slowdown = max(1.0, FULL_VCPU_MB / (memory_gb * 1024))
    return usage.code_seconds * slowdown + usage.emulator_seconds


def _times(usage: Usage, n: float) -> Usage:
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
