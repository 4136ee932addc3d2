"""What is due to be sent (design.md §4): Alertmanager's notification-log rules, per alert and
receiver. Pure functions of the alert, what was last sent, and the clock."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from trunkwatch.domain import alerts
from trunkwatch.domain.acks import ACKNOWLEDGED
from trunkwatch.domain.alerts import AlertView
from trunkwatch.domain.verdict import VERDICT_UPDATES, CulpritVerdict

# The annotation that tells a job alert's verdict: what the log's entry (the message as last
# sent, entries of any age) says was told.
VERDICT_ANNOTATION = "culprit_verdict"


@dataclass(frozen=True)
class LogState:
    """What was last sent for an alert (the notification log entry)."""

    last_status: str | None = None
    last_sent_at: datetime | None = None
    jobs: tuple[str, ...] = ()
    held_by: tuple[str, ...] = ()
    verdict: str = ""  # the job alert's `culprit_verdict` as last sent
    # A trunk-level alert's jobs' verdicts as last sent (job -> verdict).
    job_verdicts: tuple[tuple[str, str], ...] = ()
    acknowledged: str = ""  # the key of the acknowledgement last told (Acknowledgement.key)


@dataclass(frozen=True)
class DueNotification:
    status: str  # firing | resolved
    reason: str


def due_notification(
    view: AlertView, log: LogState, now: datetime, repeat_interval: timedelta, tells_acks: bool = False
) -> DueNotification | None:
    """None when nothing is due; suppressed alerts are held (decided again next tick). An
    acknowledgement stops reminders only; a receiver that `tells_acks` is told of it once,
    before anything else due (its resolution in the same tick included)."""
    alert = view.alert
    if view.suppressed:
        return None
    ack = view.acknowledgement
    if tells_acks and ack is not None and log.last_status == alerts.FIRING and log.acknowledged != ack.key:
        return DueNotification(alerts.FIRING, ACKNOWLEDGED)
    if alert.status == alerts.RESOLVED:
        return DueNotification(alerts.RESOLVED, "resolved") if log.last_status == alerts.FIRING else None
    if log.last_status != alerts.FIRING:
        return DueNotification(alerts.FIRING, _released(log.held_by) or "firing")
    if alert.jobs and tuple(sorted(alert.jobs)) != log.jobs:
        started = sorted(set(alert.jobs) - set(log.jobs))
        stopped = sorted(set(log.jobs) - set(alert.jobs))
        parts = ([f"started failing: {', '.join(started)}"] if started else []) + (
            [f"stopped failing: {', '.join(stopped)}"] if stopped else []
        )
        return DueNotification(alerts.FIRING, "update; " + "; ".join(parts))
    # TrunkBadlyBroken holds its jobs' alerts back (inhibition): it tells their verdicts.
    badly = alert.name == alerts.TRUNK_BADLY_BROKEN
    if badly and (changed := _verdicts_changed(alert, dict(log.job_verdicts))):
        return DueNotification(alerts.FIRING, "update; " + "; ".join(changed))
    verdict = alert.failing.verdict if alert.failing else ""
    if verdict != log.verdict and verdict in VERDICT_UPDATES:
        return DueNotification(alerts.FIRING, f"update; {VERDICT_UPDATES[CulpritVerdict(verdict)]}")
    if ack is None and repeat_interval and log.last_sent_at and now - log.last_sent_at >= repeat_interval:
        return DueNotification(alerts.FIRING, "reminder")
    return None


def _verdicts_changed(alert: alerts.Alert, sent: dict[str, str]) -> list[str]:
    """`culprit confirmed: <jobs>`, ...: the trunk-level alert's jobs whose verdict became
    decisive since the last message (in VERDICT_UPDATES' order)."""
    became: dict[str, list[str]] = {}
    for job, failing in sorted(alert.jobs.items()):
        if failing.verdict in VERDICT_UPDATES and failing.verdict != sent.get(job, ""):
            became.setdefault(failing.verdict, []).append(job)
    return [f"{VERDICT_UPDATES[v]}: {', '.join(became[v])}" for v in VERDICT_UPDATES if v in became]


def holders(view: AlertView) -> tuple[str, ...]:
    return tuple(
        [f"silence {s}" for s in view.silenced_by] + [f"inhibited by {i}" for i in view.inhibited_by]
    )


def _released(held_by: tuple[str, ...]) -> str:
    silences = [h for h in held_by if h.startswith("silence ")]
    if silences:
        return f"{', '.join(silences)} expired"
    return "inhibition ended" if held_by else ""
