"""The table's steady-state size at PyTorch scale, for the cost: each kind of item, what a day
adds times how long it stays (its TTL, plus the days DynamoDB takes to delete an expired item,
which is billed until then).

Measured: the bytes a commit adds (its cells and commit item) and a tick item's bytes, on the
full-scale cycle; the notification logs, alert items and the trunk's own
items the simulated day leaves in its table; a silence's and its audit records' bytes, from
the items the API writes. Assumed (stated in the basis): how many silences a day are made and
how long they last. Cells and commits stay the rule's default `retention` after the commit's
time; a resolved alert's logs the same after their last write; ticks TICK_TTL; silences
their `endsAt` + 120 h; job episodes (the status
page's history) EPISODE_RETENTION after they resolved, as many a day as the simulated day
wrote. Alert items and the trunk's items never expire: at most one alert item per job column.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from benchmarks.evaluator import Cycle
from benchmarks.usage import item_bytes
from trunkwatch.domain.config import RuleConfig
from trunkwatch.domain.episodes import EPISODE_RETENTION
from trunkwatch.domain.ticks import TICK_TTL
from trunkwatch.silences.matchers import Matcher
from trunkwatch.silences.model import Silence
from trunkwatch.silences.store import RETENTION as SILENCE_RETENTION
from trunkwatch.silences.store import audit_record, silence_record
from trunkwatch.storage.items import SilenceAuditItem, SilenceItem
from trunkwatch.storage.silences import audit_item, silence_item

GB = 1e9
DAY = timedelta(days=1)
# AWS: TTL deletes an expired item "typically within a few days"; until then it is billed.
TTL_DELETION_LAG = timedelta(days=2)
# Assumed: silences made a day (a job being fixed, a known infra outage), and how long each lasts.
SILENCES_PER_DAY = 5
SILENCE_LASTS = timedelta(hours=24)
AUDITS_PER_SILENCE = 2  # created, then expired (or ended)
TYPICAL_JOB = "pull / linux-jammy-py3.10-gcc11 / test (default, linux.2xlarge)"
NEVER_EXPIRE = ("trunk", "jobs", "source")


@dataclass
class StorageFigures:
    gb: float
    retention_days: float
    # Per part: items and GB in the steady state.
    items: dict[str, float] = field(default_factory=dict)
    gb_by_part: dict[str, float] = field(default_factory=dict)
    item_bytes: dict[str, float] = field(default_factory=dict)
    basis: str = ""


def steady_state(
    cycle: Cycle,
    day_stored: dict[str, list[int]],
    day_hours: float,
    commits_per_day: float,
    ticks_per_day: float,
    job_columns: int,
) -> StorageFigures:
    retention = RuleConfig().retention

    def kept(ttl: timedelta, items: float, size: float) -> tuple[float, float]:
        """(items, bytes) of what a day adds (`items` of `size` bytes), each kept `ttl` and
        billed until DynamoDB deletes it."""
        days = (ttl + TTL_DELETION_LAG) / DAY
        return items * days, size * days

    def per_day(kind: str) -> tuple[float, float]:
        items, size = day_stored.get(kind, [0, 0])
        return items * 24 / day_hours, size * 24 / day_hours

    silence_bytes = _silence_bytes()
    alerts, alert_bytes = day_stored.get("alert", [0, 0])
    logs, log_bytes = per_day("notification")
    episodes, episode_bytes = per_day("episode")
    # A sweep's tick every schedule tick, and a poll's on each commit's finishing and landing
    # polls (the polls that write cells).
    ticks = ticks_per_day + 2 * commits_per_day
    silence_items = SILENCES_PER_DAY * (1 + AUDITS_PER_SILENCE)
    silence_size = SILENCES_PER_DAY * (silence_bytes["silence"] + AUDITS_PER_SILENCE * silence_bytes["audit"])
    parts: dict[str, tuple[float, float]] = {  # (items, bytes)
        "cells_and_commits": kept(
            retention,
            cycle.stored_items_per_commit * commits_per_day,
            cycle.stored_bytes_per_commit * commits_per_day,
        ),
        "ticks": kept(TICK_TTL, ticks, ticks * cycle.tick_bytes),
        "notification_logs": kept(retention, logs, log_bytes),
        "episodes": kept(EPISODE_RETENTION, episodes, episode_bytes),
        "alerts": (float(job_columns), job_columns * alert_bytes / alerts if alerts else 0.0),
        "trunk": (
            float(sum(day_stored.get(k, [0, 0])[0] for k in NEVER_EXPIRE)),
            float(sum(day_stored.get(k, [0, 0])[1] for k in NEVER_EXPIRE)),
        ),
        "silences": kept(SILENCE_LASTS + SILENCE_RETENTION, silence_items, silence_size),
    }
    total = sum(size for _, size in parts.values()) / GB
    return StorageFigures(
        gb=round(total, 4),
        retention_days=retention / DAY,
        items={part: round(items) for part, (items, _) in parts.items()},
        gb_by_part={part: round(size / GB, 5) for part, (_, size) in parts.items()},
        item_bytes={
            "cells_and_commits_per_commit": cycle.stored_bytes_per_commit,
            "tick": cycle.tick_bytes,
            "notification_log": round(log_bytes / logs, 1) if logs else 0.0,
            "alert": round(alert_bytes / alerts, 1) if alerts else 0.0,
            "episode": round(episode_bytes / episodes, 1) if episodes else 0.0,
            **silence_bytes,
        },
        basis=(
            f"cells and commits {retention / DAY:g} days (retention), resolved alerts' logs the "
            f"same, ticks {TICK_TTL / DAY:g} days, job episodes {EPISODE_RETENTION / DAY:g} days after "
            f"they resolved, each plus {TTL_DELETION_LAG / DAY:g} days until "
            f"DynamoDB deletes it; one alert item per job column; {SILENCES_PER_DAY} silences a day "
            f"assumed, each lasting {SILENCE_LASTS / timedelta(hours=1):g} h and kept 120 h more"
        ),
    )


def _silence_bytes() -> dict[str, float]:
    """A typical silence (one job's alerts, a sentence of comment) and one audit record, as
    the API writes them."""
    at = datetime(2026, 11, 18, tzinfo=UTC)
    silence = Silence(
        id=str(uuid.UUID(int=0)),
        matchers=(
            Matcher(name="alertname", value="TrunkJobFailing", is_regex=False, is_equal=True),
            Matcher(name="job", value=TYPICAL_JOB, is_regex=False, is_equal=True),
        ),
        starts_at=at,
        ends_at=at + SILENCE_LASTS,
        created_by="ci-oncall",
        comment="known breakage, fix in review: https://github.com/pytorch/pytorch/pull/160000",
        updated_at=at,
    )
    return {
        "silence": float(item_bytes(silence_item(SilenceItem, silence_record(silence, None)))),
        "audit": float(
            item_bytes(audit_item(SilenceAuditItem, audit_record("create", "ci-oncall", at, None, silence)))
        ),
    }
