"""Workload 3: one simulated day through the local runtime, and how late the alerts are.

`LocalRuntime` (moto in-process, the real handlers, the stream pump) and `HudServer` replay
the day's schedule ticks, the HUD stand-in serving the trunk as it is at each. The trunk is
smaller than PyTorch's (fewer job columns, a shorter HUD window) and the deployed schedule (a
tick every 60 s) runs only around each episode's deciding job (DENSE_BEFORE/DENSE_AFTER);
between them the day steps `coarse` (5 minutes), whose polls only see commits land and jobs
finish a little later, so the day runs in minutes.

Detection delay of a first `firing` message: its publish minus the finish of the deciding
job, the job on the commit whose failure made the streak reach `failures_to_open` (a
trunk-level alert: the job alert that moved it into its band). The ground truth comes from
the synthetic trunk's episodes; a firing message for a job outside every episode counts as a
false alarm.

The publish moment is the tick's time plus the deployed path after it, with the stream
settings read from template.yaml: the dispatcher's measured duration, one queue hop
(QUEUE_HOP_S) and the trunk's ingest invocation's measured duration; per stream invocation
one stream hop (STREAM_HOP_S), the mapping's MaximumBatchingWindowInSeconds when its batch is
smaller than its BatchSize (a full batch goes at once), and the invocation's measured
duration, one after the other (one shard, so batches run in order). A scheduled invocation
(the dispatcher, the evaluator's sweep) starts at the tick itself; the stream path the
sweep's settled tick starts is counted after the poll's (the local runtime runs them in
turn), an upper bound.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any
from unittest import mock

from benchmarks.ingest import deployment
from benchmarks.trunk import DAY_START, EPISODES, Day, episode_of
from benchmarks.usage import stored_by_kind
from trunkwatch.app import settings
from trunkwatch.domain import alerts
from trunkwatch.domain.config import Deployment, RuleConfig
from trunkwatch.storage.port import Storage
from trunkwatch_local.hud_server import HudServer
from trunkwatch_local.runtime import NAME, REGION, LocalRuntime, Published
from trunkwatch_local.wiring import StreamSource

FIRST_FIRING = "firing"  # notification_reason of an alert's first firing message
# From a stream record's write to its Lambda invocation, beyond the batching window: an
# assumption (DynamoDB Streams publish records in near real time and Lambda polls each shard
# about four times a second); one per stream invocation, so a full batch pays it too.
STREAM_HOP_S = 1.0
# From the dispatcher's SendMessageBatch to ingest's invocation on a message: an assumption
# of the same kind (Lambda long-polls the queue and invokes as a message arrives).
QUEUE_HOP_S = 1.0
# Ticks every period (60 s) from this long before an episode's deciding job finishes until
# this long after.
DENSE_BEFORE = timedelta(minutes=10)
DENSE_AFTER = timedelta(minutes=20)


@dataclass
class Call:
    """One handler invocation of a tick, as the local runtime made it."""

    function: str  # logical id
    records: int | None  # stream batch size; None for a scheduled invocation
    seconds: float
    published: list[Published]


@dataclass
class DayFigures:
    commits: int
    job_columns: int
    notifications: int
    detection_delay_s_p50: float
    detection_delay_s_max: float
    schedule_period_s: float
    # what explains the figures above
    stream_hop_s: float = STREAM_HOP_S
    batching_windows_s: dict[str, float] = field(default_factory=dict)
    batch_sizes: dict[str, int] = field(default_factory=dict)
    pipeline_s_max: float = 0.0  # the longest tick-to-publish time of a tick that published
    invocations: dict[str, int] = field(default_factory=dict)  # by function, the delay's path
    # A job that finishes just after a poll waits a whole period for the next one.
    detection_delay_s_bound: float = 0.0  # schedule period + pipeline_s_max
    detection_delay_commits_p50: float = 0.0
    detection_delay_commits_max: float = 0.0
    detections: list[dict[str, Any]] = field(default_factory=list)
    false_alarms: int = 0
    messages: dict[str, int] = field(default_factory=dict)
    ticks: int = 0
    polls_with_changes: int = 0
    hud_window: int = 0
    wall_s: float = 0.0
    # (items, bytes) per kind in the table after the day: the cost's notification logs,
    # alerts and the trunk's own items.
    stored: dict[str, list[int]] = field(default_factory=dict)


@dataclass
class Ticking:
    """A started local runtime whose invocations `time_invocations` records (`calls`), and
    the deployment as its functions read it (the configuration and the template's defaults)."""

    runtime: LocalRuntime
    deployed: Deployment
    calls: list[Call]

    @property
    def rule(self) -> RuleConfig:
        return self.deployed.rule_for(self.deployed.trunks[0])

    @property
    def sources(self) -> dict[str, StreamSource]:
        return {source.function: source for source in self.runtime.wiring.streams}

    def tick(self, at: datetime) -> tuple[dict[str, Any], list[tuple[float, Published]]]:
        """A schedule tick at `at`: what its polls came to, and its messages on the deployed
        timeline (`deployed_times`)."""
        self.calls.clear()
        result = self.runtime.tick(at) or {}
        queued = frozenset(source.function for source in self.runtime.wiring.queues)
        return result, deployed_times(at, self.calls, self.sources, queued)


@contextlib.contextmanager
def ticking(
    deployment: Deployment,
    store: str,
    servers: list[HudServer] | None = None,
    wrap_storage: Callable[[Storage], Storage] | None = None,
    network_s: Callable[[], float] = lambda: 0.0,
) -> Iterator[Ticking]:
    """A fresh local runtime on `deployment` (its storage wrapped in `wrap_storage`), stopped
    after with the stand-ins it polls (`servers`), its invocations timed (`time_invocations`):
    scheduled, stream and queue (ingest's polls) alike."""
    # The runtime sets the process's AWS settings for its emulation: put them back after.
    # stdout carries the benchmark's report.
    with mock.patch.dict(os.environ), contextlib.redirect_stdout(sys.stderr):
        try:
            runtime = LocalRuntime(store=store, wrap_storage=wrap_storage).start(deployment)
            try:
                calls: list[Call] = []
                time_invocations(runtime, calls, network_s)
                runtime.queues.invoke = runtime.invoke
                yield Ticking(runtime, settings.Edge.from_environ(settings.PIPELINE).deployment(), calls)
            finally:
                runtime.stop()
        finally:
            for server in servers or []:
                server.stop()


def run_day(day: Day, period: timedelta, hours: float = 24.0, coarse: timedelta | None = None) -> DayFigures:
    """Tick every `period` for `hours` from DAY_START on a fresh local runtime (every `coarse`
    away from the episodes' deciding jobs, when given)."""
    started = datetime.now()
    hud = HudServer()
    sent: list[Published] = []
    served: tuple[int, int] | None = None
    changed, pipeline_s = 0, 0.0
    invocations: Counter[str] = Counter()
    with ticking(deployment("hud", hud.url, day.window), "dynamodb", [hud]) as run:
        deciding = [day.finished(e.deciding_commit(run.rule.failures_to_open)) for e in EPISODES]
        times = list(tick_times(period, hours, deciding, coarse or period))
        for at in times:
            # The snapshot changes only when a commit lands or finishes.
            moment = (day.commits_landed(at), day.commits_landed(at - day.trunk.job_duration))
            if moment != served:
                hud.serve(day.trunk.snapshot(at))
                served = moment
            result, published = run.tick(at)
            invocations.update(call.function for call in run.calls)
            changed += any(p.get("cells_written") for p in result.get("polled", []))
            sent += [message for _, message in published]
            pipeline_s = max([pipeline_s, *(seconds for seconds, _ in published)])
        stored = stored_by_kind(REGION, NAME)
    figures = day_figures(day, sent, period, hours, run.rule)
    figures.ticks, figures.polls_with_changes = len(times), changed
    figures.batching_windows_s = {f: s.batching_window_s for f, s in run.sources.items()}
    figures.batch_sizes = {f: s.batch_size for f, s in run.sources.items()}
    figures.pipeline_s_max = round(pipeline_s, 3)
    figures.invocations = dict(sorted(invocations.items()))
    figures.detection_delay_s_bound = round(period.total_seconds() + pipeline_s, 3)
    figures.wall_s = round((datetime.now() - started).total_seconds(), 2)
    figures.stored = {kind: list(counts) for kind, counts in sorted(stored.items())}
    return figures


def time_invocations(
    runtime: LocalRuntime, calls: list[Call], network_s: Callable[[], float] = lambda: 0.0
) -> None:
    """Record every invocation of the runtime (scheduled and the pump's) with its duration and
    the messages it published; `network_s` (the network wait of every request made so far,
    for a store that answers in the process without one) adds its invocation's share."""
    invoke = runtime.invoke

    def timed(function: str, event: dict[str, Any]) -> Any:
        started, waited = time.perf_counter(), network_s()
        try:
            return invoke(function, event)
        finally:
            seconds = time.perf_counter() - started + network_s() - waited
            records = len(event["Records"]) if "Records" in event else None
            logical_id = runtime.stack.logical_id(function)
            calls.append(Call(logical_id, records, seconds, runtime.published(runtime.clock.now())))

    runtime.invoke = timed  # type: ignore[method-assign]
    runtime.pump.invoke = timed


def deployed_times(
    at: datetime,
    calls: list[Call],
    sources: dict[str, StreamSource],
    queued: frozenset[str] = frozenset(),
    settles_s: float = 0.0,
) -> list[tuple[float, Published]]:
    """(seconds after the tick, message) of what the tick's invocations published, on the
    deployed timeline (see the module's docstring); `queued`: the functions a queue invokes
    (ingest, one invocation per trunk the dispatcher sent, side by side); `settles_s`: when a
    delivery group's tick settles (its bucket's end), before which the notifier cannot run."""
    out: list[tuple[float, Published]] = []
    chain = 0.0  # when the stream-driven path has got this far, in seconds after `at`
    dispatched = 0.0  # when the scheduled invocation's messages were sent
    for call in calls:
        source = sources.get(call.function)
        if call.function in queued:
            done = dispatched + QUEUE_HOP_S + call.seconds
            chain = max(chain, done)
        elif call.records is None or source is None:
            done = call.seconds  # scheduled or a webhook delivery: starts with the tick
            dispatched = max(dispatched, done)
            chain = max(chain, done)
        else:
            if call.function == "NotifierFunction":
                chain = max(chain, settles_s)
            window = source.batching_window_s if call.records < source.batch_size else 0.0
            done = chain = chain + STREAM_HOP_S + window + call.seconds
        out += [(done, dataclasses.replace(m, at=at + timedelta(seconds=done))) for m in call.published]
    return out


def tick_times(
    period: timedelta, hours: float, dense_around: list[datetime], coarse: timedelta | None
) -> Iterator[datetime]:
    """Schedule ticks from DAY_START: every `period` near `dense_around`, else every `coarse`
    (a multiple of `period`, so every tick is one the schedule makes; None: none there)."""
    at, end = DAY_START, DAY_START + timedelta(hours=hours)
    while at < end:
        dense = any(moment - DENSE_BEFORE <= at < moment + DENSE_AFTER for moment in dense_around)
        if dense or coarse is not None:
            yield at
        at += period if dense or coarse is None else coarse


def percentile(values: list[float], pct: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(pct / 100 * (len(ordered) - 1)))]


def day_figures(
    day: Day, sent: list[Published], period: timedelta, hours: float, rule: RuleConfig
) -> DayFigures:
    delays_s: list[float] = []
    delays_commits: list[int] = []
    detections = []
    false_alarms = 0
    for message in sent:
        body = message.message
        if body["status"] != alerts.FIRING or body.get("notification_reason") != FIRST_FIRING:
            continue
        labels = body["commonLabels"]
        name = labels["alertname"]
        if name == alerts.JOB_FAILING:
            jobs = [labels["job"]]
        else:
            jobs = body["commonAnnotations"]["failing_jobs"].split("\n")
        deciding = sorted(
            e.deciding_commit(rule.failures_to_open) for job in jobs if (e := episode_of(job)) is not None
        )
        if len(deciding) < len(jobs):
            false_alarms += 1
            continue
        # A trunk-level alert is decided by the job alert that moved K into its band.
        decided = deciding[rule.trunk_band_max_jobs] if name == alerts.TRUNK_BADLY_BROKEN else deciding[0]
        finished = day.finished(decided)
        delay = (message.at - finished).total_seconds()
        commits = day.commits_landed(message.at) - day.commits_landed(finished)
        delays_s.append(delay)
        delays_commits.append(commits)
        detections.append(
            {"alertname": name, "deciding_commit": decided, "delay_s": delay, "delay_commits": commits}
        )
    messages = Counter(f"{m.message['status']} {m.attributes.get('alertname', '')}" for m in sent)
    return DayFigures(
        commits=day.commits_landed(DAY_START + timedelta(hours=hours)) - day.commits_landed(DAY_START),
        job_columns=day.columns,
        notifications=len(sent),
        detection_delay_s_p50=statistics.median(delays_s) if delays_s else 0.0,
        detection_delay_s_max=max(delays_s, default=0.0),
        schedule_period_s=period.total_seconds(),
        detection_delay_commits_p50=statistics.median(delays_commits) if delays_commits else 0.0,
        detection_delay_commits_max=max(delays_commits, default=0),
        detections=detections,
        false_alarms=false_alarms,
        messages=dict(sorted(messages.items())),
        hud_window=day.window,
    )
