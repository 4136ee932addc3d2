"""Workload: an organization on one deployment. TRUNKS trunks (PYTORCH_SIZED of them at
PyTorch's job columns, the rest small) polled through the deployed shape: each schedule tick
the dispatcher sends one message per due trunk and ingest polls each in an invocation of its
own, side by side; the table's stream then drives the evaluator and the notifier.

Every trunk replays the synthetic trunk's day (benchmarks.trunk) from HUD stand-ins on
127.0.0.1 (one serving the PyTorch-sized trunks, one the small ones), ticking every schedule
period around the deciding jobs of the first `episodes` episodes (end_to_end.tick_times, no
coarse steps). All trunks break at the same moments, the worst case for the stream path
they share.

Detection delay through poll: from the deciding job's finish to the first `firing` message's
publish on the deployed timeline (end_to_end.deployed_times: the dispatcher's duration, one
queue hop, the trunk's own ingest invocation, then the stream path one batch after another).
Through push: the push workload's trunk fed by webhook deliveries alone, on a deployment that
configures the other TRUNKS - 1 trunks of the organization too (each delivery is routed by
its `repository.full_name`).

Cost per trunk and month: one poll per schedule tick of the trunk's measured ingest
invocation (requests, duration scaled to the function's CPU share as cost.py does, and its
logs), its SQS messages (the dispatcher's send, a tenth of a batch; Lambda's receive and
delete), and the per-trunk gauges (cost.TRUNK_GAUGES) when the template's default deploys
the dashboard they feed. Nothing else grows with trunks; the organization's cost is the
one-trunk deployment's plus that much per further trunk.

The in-memory store (`--store memory`, trunkwatch_local/memory_stream.py) keeps the items:
moto's table would take hours for PyTorch-sized first polls of 100 trunks here.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field
from datetime import timedelta

from benchmarks.cost import DAYS_PER_MONTH, dashboard_by_default, ingest_items, trunk_gauges_usd
from benchmarks.end_to_end import day_figures, percentile, tick_times, ticking
from benchmarks.push import METERED_DAYS, run_push
from benchmarks.trunk import DAY_START, EPISODES, Day
from benchmarks.usage import Usage
from trunkwatch.domain.config import PYTORCH_INCLUDE, load_deployment
from trunkwatch_local.hud_server import HudServer
from trunkwatch_local.runtime import Published
from trunkwatch_local.schedule import period_seconds

TRUNKS = 100
PYTORCH_SIZED = 5


@dataclass(frozen=True)
class OrgScale:
    trunks: int
    pytorch_sized: int
    big: Day  # a PyTorch-sized trunk
    small: Day
    push_days: float  # the push path runs through this many days of a red trunk
    push_metered_days: float  # metered on moto over its first this many days (benchmarks.push)
    episodes: int  # how many of the synthetic trunk's episodes (in order) it ticks around


@dataclass
class OrgFigures:
    trunks: int
    pytorch_sized: int
    schedule_period_s: float
    ticks: int
    every_trunk_polled_each_tick: bool
    polls_missed: int  # (trunk, tick) pairs without exactly one poll
    poll_detection_delay_s_p95: float
    push_detection_delay_s_p95: float
    per_trunk_usd_per_month: float  # a small trunk's; the PyTorch-sized one's below
    # beyond the summary's required keys
    store: str = "memory"
    job_columns: dict[str, int] = field(default_factory=dict)
    polls_per_tick: dict[str, int] = field(default_factory=dict)
    invocations_per_tick: dict[str, float] = field(default_factory=dict)
    poll_detection_delay_s_p50: float = 0.0
    poll_detection_delay_s_max: float = 0.0
    push_detection_delay_s_max: float = 0.0
    detections: int = 0
    false_alarms: int = 0
    tick_to_last_poll_s_max: float = 0.0  # dispatcher + queue hop + the slowest ingest
    ingest_s: dict[str, float] = field(default_factory=dict)
    per_trunk_usd_per_month_by_size: dict[str, float] = field(default_factory=dict)
    added_usd_per_month: dict[str, float] = field(default_factory=dict)  # n trunks over one
    basis: str = ""
    wall_s: float = 0.0


FULL = OrgScale(
    trunks=TRUNKS,
    pytorch_sized=PYTORCH_SIZED,
    big=Day(environments=40, window=10),
    small=Day(environments=2, window=10, tests=6),
    push_days=1.0,
    push_metered_days=METERED_DAYS,
    episodes=1,
)
QUICK = OrgScale(
    trunks=4,
    pytorch_sized=1,
    big=Day(environments=2, window=10, tests=6),
    small=Day(environments=2, window=10, tests=6),
    push_days=0.3,
    push_metered_days=0.03,  # the organization reads the push run's delays, not its metering
    episodes=1,
)


def run_org(scale: OrgScale = FULL) -> OrgFigures:
    started = time.perf_counter()
    big_hud, small_hud = HudServer(), HudServer()
    trunks = []
    for index in range(scale.trunks):
        big = index < scale.pytorch_sized
        trunks.append(
            {
                "repo": f"example-org/{'large' if big else 'small'}-{index:03d}",
                "source": "hud",
                "url": big_hud.url if big else small_hud.url,
                "per_page": (scale.big if big else scale.small).window,
                "config": {"include": PYTORCH_INCLUDE},
            }
        )
    deployment = load_deployment({"trunks": trunks})
    sent: list[Published] = []
    polls: list[int] = []
    ingest_s: dict[str, list[float]] = {"big": [], "small": []}
    last_poll_s = 0.0
    dispatcher_s: list[float] = []
    with ticking(deployment, "memory", [big_hud, small_hud]) as run:
        rule = run.rule
        period = timedelta(seconds=period_seconds(run.deployed.schedule))
        queued = frozenset(source.function for source in run.runtime.wiring.queues)
        deciding = [
            scale.small.finished(e.deciding_commit(rule.failures_to_open)) for e in EPISODES[: scale.episodes]
        ]
        hours = (max(deciding) - DAY_START).total_seconds() / 3600 + 0.5
        times = list(tick_times(period, hours, deciding, None))
        for index, at in enumerate(times):
            big_hud.serve(scale.big.trunk.snapshot(at))
            small_hud.serve(scale.small.trunk.snapshot(at))
            result, published = run.tick(at)
            polled = [p["trunk"] for p in result.get("polled", [])]
            polls.append(len(set(polled)) if len(polled) == len(set(polled)) else -1)
            sent += [message for _, message in published]
            ingest = [c.seconds for c in run.calls if c.function in queued]
            dispatch = [c.seconds for c in run.calls if c.function not in queued and c.records is None]
            dispatcher_s.append(dispatch[0] if dispatch else 0.0)
            last_poll_s = max(last_poll_s, dispatcher_s[-1] + 1.0 + max(ingest, default=0.0))
            if index:  # the first tick's polls store every trunk's window: not a steady poll
                ingest_s["big"] += ingest[: scale.pytorch_sized]
                ingest_s["small"] += ingest[scale.pytorch_sized :]
    day = day_figures(scale.small, sent, period, hours, rule)
    delays = sorted(d["delay_s"] for d in day.detections)
    push = run_push("github", scale.push_days, scale.push_metered_days, other_trunks=scale.trunks - 1)
    per_trunk = {
        size: _per_trunk_usd(statistics.median(s) if s else 0.0, period) for size, s in ingest_s.items()
    }
    return OrgFigures(
        trunks=scale.trunks,
        pytorch_sized=scale.pytorch_sized,
        schedule_period_s=period.total_seconds(),
        ticks=len(times),
        every_trunk_polled_each_tick=all(count == scale.trunks for count in polls),
        polls_missed=sum(scale.trunks - count if count >= 0 else scale.trunks for count in polls),
        poll_detection_delay_s_p95=round(percentile(delays, 95), 3),
        push_detection_delay_s_p95=push.detection_delay_s_p95,
        per_trunk_usd_per_month=per_trunk["small"],
        job_columns={"pytorch_sized": scale.big.columns, "small": scale.small.columns},
        polls_per_tick={"min": min(polls), "max": max(polls)},
        invocations_per_tick={"dispatcher": 1, "ingest": scale.trunks},
        poll_detection_delay_s_p50=round(statistics.median(delays), 3) if delays else 0.0,
        poll_detection_delay_s_max=round(max(delays, default=0.0), 3),
        push_detection_delay_s_max=push.detection_delay_s_max,
        detections=len(delays),
        false_alarms=day.false_alarms,
        tick_to_last_poll_s_max=round(last_poll_s, 3),
        ingest_s={
            "dispatcher_p50": round(statistics.median(dispatcher_s), 4),
            **{f"{size}_p50": round(statistics.median(s), 4) for size, s in ingest_s.items() if s},
            **{f"{size}_max": round(max(s), 4) for size, s in ingest_s.items() if s},
        },
        per_trunk_usd_per_month_by_size={"pytorch_sized": per_trunk["big"], "small": per_trunk["small"]},
        added_usd_per_month={
            str(n): round(
                (min(n, scale.pytorch_sized) - 1) * per_trunk["big"]
                + max(0, n - scale.pytorch_sized) * per_trunk["small"],
                2,
            )
            for n in (10, scale.trunks)
        },
        basis=(
            f"{scale.trunks} trunks ({scale.pytorch_sized} at {scale.big.columns} job columns, the rest at "
            f"{scale.small.columns}), {len(times)} ticks every {period.total_seconds():g} s around the "
            "episodes' deciding jobs, the in-memory store; push: the push workload with the other "
            f"{scale.trunks - 1} trunks configured (its delays on the in-memory store, metered on moto "
            f"over its first {scale.push_metered_days:g} days); a trunk's cost: its poll on each tick of "
            "a 30-day month"
        ),
        wall_s=round(time.perf_counter() - started, 2),
    )


def _per_trunk_usd(ingest_s: float, period: timedelta) -> float:
    """A month of one trunk's polls, priced as cost.py prices a trunk's (`ingest_items`):
    see the module's docstring."""
    ticks = 86400 / period.total_seconds()
    per_day = ingest_items(Usage(invocations=round(ticks), seconds=ingest_s * ticks), ticks)
    return round(sum(per_day.values()) * DAYS_PER_MONTH + trunk_gauges_usd(dashboard_by_default()), 4)
