"""Workload 3: one simulated day through the local runtime, and how late the alerts are.

`LocalRuntime` (moto in-process, the real handlers, the stream pump) and
`HudServer` replay the day's schedule ticks: before each tick the HUD stand-in is given the
trunk as it is at that moment, then the tick polls, evaluates and notifies. The scale is
reduced so the day runs in a few minutes (see `__main__`): fewer job columns, a shorter HUD
window and a longer schedule period than production's `rate(1 minute)`.

Detection delay of a first `firing` message: its tick's time minus the moment the deciding
job finished, i.e. the job on the commit whose failure made the streak reach
`failures_to_open` (a trunk-level alert: the job alert that moved it into its band). The
ground truth comes from the synthetic trunk's episodes; a firing message for a job outside
every episode counts as a false alarm.
"""

from __future__ import annotations

import contextlib
import os
import statistics
import sys
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any
from unittest import mock

from benchmarks.ingest import deployment
from benchmarks.trunk import DAY_START, Day, episode_of
from trunkwatch.app import settings
from trunkwatch.domain import alerts
from trunkwatch.domain.config import RuleConfig
from trunkwatch_local.hud_server import HudServer
from trunkwatch_local.runtime import LocalRuntime, Published

FIRST_FIRING = "firing"  # notification_reason of an alert's first firing message


@dataclass
class DayFigures:
    commits: int
    job_columns: int
    notifications: int
    detection_delay_s_p50: float
    detection_delay_s_max: float
    schedule_period_s: float
    # beyond SPEC 8
    detection_delay_commits_p50: float = 0.0
    detection_delay_commits_max: float = 0.0
    detections: list[dict[str, Any]] = field(default_factory=list)
    false_alarms: int = 0
    messages: dict[str, int] = field(default_factory=dict)
    ticks: int = 0
    polls_with_changes: int = 0
    hud_window: int = 0
    wall_s: float = 0.0


def run_day(day: Day, period: timedelta, hours: float = 24.0) -> DayFigures:
    """Tick every `period` for `hours` from DAY_START on a fresh local runtime."""
    started = datetime.now()
    hud = HudServer()
    # The runtime sets the process's AWS settings for its emulation: put them back after.
    # stdout carries the benchmark's report.
    with mock.patch.dict(os.environ), contextlib.redirect_stdout(sys.stderr):
        runtime = LocalRuntime().start(deployment("hud", hud.url, day.window))
        try:
            # The rule as the deployed functions read it (configuration and template defaults).
            deployed = settings.deployment()
            rule = deployed.rule_for(deployed.trunks[0])
            sent, ticks, changed = _replay(runtime, hud, day, period, hours)
        finally:
            runtime.stop()
            hud.stop()
    figures = _figures(day, sent, period, hours, rule)
    figures.ticks, figures.polls_with_changes = ticks, changed
    figures.wall_s = round((datetime.now() - started).total_seconds(), 2)
    return figures


def _replay(
    runtime: LocalRuntime, hud: HudServer, day: Day, period: timedelta, hours: float
) -> tuple[list[Published], int, int]:
    trunk = day.trunk
    sent: list[Published] = []
    served: tuple[int, int] | None = None
    ticks = changed = 0
    at = DAY_START
    while at < DAY_START + timedelta(hours=hours):
        # The snapshot changes only when a commit lands or finishes.
        moment = (day.commits_landed(at), day.commits_landed(at - trunk.job_duration))
        if moment != served:
            hud.serve(trunk.snapshot(at))
            served = moment
        result = runtime.tick(at)
        changed += any(p.get("cells_written") for p in (result or {}).get("polled", []))
        sent += runtime.published(at)
        ticks += 1
        at += period
    return sent, ticks, changed


def _figures(
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
