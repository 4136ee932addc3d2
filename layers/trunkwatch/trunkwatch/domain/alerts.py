"""Alerts (design.md §3.4): identity labels, details, and Alertmanager's label fingerprint."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from trunkwatch.domain.clock import format_time

JOB_FAILING = "TrunkJobFailing"
TRUNK_BROKEN = "TrunkBroken"
TRUNK_BADLY_BROKEN = "TrunkBadlyBroken"
SOURCE_DOWN = "SourceDown"
WEBHOOKS_DOWN = "WebhooksDown"

RECEIVER = "trunkwatch-sns"  # the SNS topic's receiver name, in messages and in the API

FIRING = "firing"
RESOLVED = "resolved"

_FNV_OFFSET = 14695981039346656037
_FNV_PRIME = 1099511628211
_MASK = (1 << 64) - 1
_SEPARATOR = 0xFF


def plural(count: int, noun: str) -> str:
    """`1 job`, `2 jobs`, `0 commits`: a count with its noun agreeing."""
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def describe_commit(sha: str, title: str, pr: int | None, author: str, time: str) -> str:
    """`<sha12> '<title>' (#<pr>) by <author> at <time>`, as descriptions name a commit."""
    number = f" (#{pr})" if pr else ""
    return f"{sha[:12]} {title!r}{number} by {author or 'unknown'} at {time}"


def job_detail(streak: int, culprit: str) -> str:
    """A trunk-level alert's line for one failing job (its `jobs` value, and the text after
    `- <job>: ` in its description): the streak, and the culprit as `describe_commit`."""
    return f"{streak} commits, culprit {culprit}"


@dataclass(frozen=True)
class JobCulprit:
    """One failing job of a trunk-level alert, read back from its description."""

    streak: int
    sha: str  # the first 12 characters
    title: str
    pr: str  # digits, or empty
    author: str


_JOB_DETAIL = re.compile(
    r"^(\d+) commits, culprit (\S+) ('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")(?: \(#(\d+)\))? by (.*) at \S+$"
)


def job_culprits(description: str, jobs: Iterable[str]) -> dict[str, JobCulprit]:
    """The streak and culprit of each of `jobs` from a trunk-level alert's description (its
    annotations are what the notification log keeps, so a resolution has them too)."""
    wanted = {f"- {job}: ": job for job in jobs}
    found: dict[str, JobCulprit] = {}
    for line in description.splitlines():
        for prefix, job in wanted.items():  # a job's name may start like another's: `lint`, `lint: 1`
            matched = _JOB_DETAIL.match(line[len(prefix) :]) if line.startswith(prefix) else None
            if matched:
                streak, sha, title, pr, author = matched.groups()
                found[job] = JobCulprit(int(streak), sha, ast.literal_eval(title), pr or "", author)
                break
    return found


def fingerprint(labels: dict[str, str]) -> str:
    """Prometheus' LabelSet fingerprint: FNV-1a 64 over sorted `name 0xFF value 0xFF`.

    Alertmanager drops empty-valued labels before fingerprinting, and so does this.
    """
    value = _FNV_OFFSET
    for name in sorted(n for n in labels if labels[n] != ""):
        for part in (name, labels[name]):
            for byte in part.encode():
                value = ((value ^ byte) * _FNV_PRIME) & _MASK
            value = ((value ^ _SEPARATOR) * _FNV_PRIME) & _MASK
    return f"{value:016x}"


@dataclass
class Alert:
    labels: dict[str, str]
    annotations: dict[str, str]
    starts_at: datetime
    ends_at: datetime | None = None
    generator_url: str = ""
    # Jobs a trunk-level alert covers (name -> streak summary); empty for job alerts.
    jobs: dict[str, str] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.labels["alertname"]

    @property
    def status(self) -> str:
        return RESOLVED if self.ends_at is not None else FIRING

    @property
    def fingerprint(self) -> str:
        return fingerprint(self.labels)

    def webhook_form(self) -> dict[str, Any]:
        """One entry of an Alertmanager webhook's `alerts` list."""
        return {
            "status": self.status,
            "labels": dict(self.labels),
            "annotations": dict(self.annotations),
            "startsAt": format_time(self.starts_at),
            "endsAt": format_time(self.ends_at) if self.ends_at else "0001-01-01T00:00:00Z",
            "generatorURL": self.generator_url,
            "fingerprint": self.fingerprint,
        }


@dataclass(frozen=True)
class Links:
    """Where the links in annotations point: the API and status page, and the dashboard."""

    api_url: str
    dashboard_url: str = ""


@dataclass
class AlertView:
    """An alert as the notifier and the API see it: what silences or inhibits it."""

    alert: Alert
    trunk: str
    silenced_by: list[str] = field(default_factory=list)
    inhibited_by: list[str] = field(default_factory=list)

    @property
    def suppressed(self) -> bool:
        return bool(self.silenced_by or self.inhibited_by)
