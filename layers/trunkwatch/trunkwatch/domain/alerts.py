"""Alerts (design.md §3.4): identity labels, details, and Alertmanager's label fingerprint."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from trunkwatch.domain.acks import Acknowledgement
from trunkwatch.domain.clock import format_time, parse_time
from trunkwatch.domain.verdict import CulpritVerdict

JOB_FAILING = "TrunkJobFailing"
TRUNK_BROKEN = "TrunkBroken"
TRUNK_BADLY_BROKEN = "TrunkBadlyBroken"
SOURCE_DOWN = "SourceDown"
WEBHOOKS_DOWN = "WebhooksDown"
WATCHDOG = "Watchdog"  # the heartbeat: always firing (Alertmanager's convention)

RECEIVER = "trunkwatch-sns"  # the SNS topic's receiver name, in messages and in the API
# What a receiver's matchers call the GitHub login of a commit the alert blames: routing
# only, never a label (the culprit may change within an episode; a label names the alert).
ROUTE_AUTHOR = "author"

FIRING = "firing"
RESOLVED = "resolved"

_FNV_OFFSET = 14695981039346656037
_FNV_PRIME = 1099511628211
_MASK = (1 << 64) - 1
_SEPARATOR = 0xFF


def plural(count: int, noun: str) -> str:
    """`1 job`, `2 jobs`, `0 commits`: a count with its noun agreeing."""
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


@dataclass(frozen=True)
class CommitSummary:
    """A commit as a message tells it (a job alert's culprit, a trunk-level alert's culprits,
    the digest), kept as data in the notification log. A job alert's culprit carries its
    links (`url`, `pr_url`); a trunk-level alert's jobs' culprits do not."""

    sha: str
    title: str
    pr: int | None
    author: str
    time: datetime
    url: str = ""  # the commit's page
    pr_url: str = ""  # its pull request's page

    def describe(self) -> str:
        """`<sha12> '<title>' (#<pr>) by <author> at <time>`, as descriptions name a commit."""
        number = f" (#{self.pr})" if self.pr else ""
        author = self.author or "unknown"
        return f"{self.sha[:12]} {self.title!r}{number} by {author} at {format_time(self.time)}"

    def as_data(self) -> dict[str, Any]:
        data = {
            "sha": self.sha,
            "title": self.title,
            "pr": self.pr,
            "author": self.author,
            "time": format_time(self.time),
        }
        links = {"url": self.url, "pr_url": self.pr_url}
        return {**data, **{name: link for name, link in links.items() if link}}

    @classmethod
    def from_data(cls, data: dict[str, Any]) -> CommitSummary:
        """As `as_data` wrote it; the links absent (entries written without them) read empty."""
        pr = data.get("pr")
        return cls(
            str(data["sha"]),
            str(data["title"]),
            int(pr) if pr else None,
            str(data["author"]),
            parse_time(str(data["time"])),
            str(data.get("url") or ""),
            str(data.get("pr_url") or ""),
        )


@dataclass(frozen=True)
class FailingJob:
    """A failing job as an alert tells it: how many commits in a row it failed on, the first
    of them (its culprit, or a suspect when the verdict clears it), and the verdict of
    confirmation by reruns with its reason. A job alert carries its own (`Alert.failing`), a
    trunk-level alert one per job it covers (`Alert.jobs`). Receivers render it; the
    notification log keeps a trunk-level alert's as data (`as_data`), so a resolution sent
    from the log has them too."""

    streak: int
    culprit: CommitSummary
    # The job alert's `culprit_verdict` (confirmation by reruns); empty without confirmation.
    verdict: str = ""
    reason: str = ""  # why the verdict (`culprit_verdict_reason`); empty without one

    @property
    def blamed(self) -> bool:
        """Whether the commit is named as culprit: not when the verdict clears it."""
        return self.verdict not in (CulpritVerdict.ENVIRONMENTAL, CulpritVerdict.FLAKY)

    def detail(self) -> str:
        """The job's line in the trunk-level alert's description, after `- <job>: `."""
        named = "culprit" if self.blamed else "suspect"
        verdict = f" ({self.verdict})" if self.verdict else ""
        return f"{self.streak} commits, {named} {self.culprit.describe()}{verdict}"

    def as_data(self) -> dict[str, Any]:
        data = {"streak": self.streak, "culprit": self.culprit.as_data()}
        told = {"verdict": self.verdict, "reason": self.reason}
        return {**data, **{name: value for name, value in told.items() if value}}

    @classmethod
    def from_data(cls, data: dict[str, Any]) -> FailingJob:
        return cls(
            int(data["streak"]),
            CommitSummary.from_data(data["culprit"]),
            str(data.get("verdict") or ""),
            str(data.get("reason") or ""),
        )


def blamed_authors(jobs: Iterable[FailingJob]) -> tuple[str, ...]:
    """The GitHub logins of the jobs' culprits (not a suspect's), in order, each once."""
    return tuple(dict.fromkeys(job.culprit.author for job in jobs if job.blamed and job.culprit.author))


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
    # The jobs a trunk-level alert covers, by name; empty for the other alerts.
    jobs: dict[str, FailingJob] = field(default_factory=dict)
    # A job alert's own job: its streak, culprit and verdict (what its annotations tell as
    # text); None for the other alerts.
    failing: FailingJob | None = None

    @property
    def name(self) -> str:
        return self.labels["alertname"]

    @property
    def status(self) -> str:
        return RESOLVED if self.ends_at is not None else FIRING

    @property
    def fingerprint(self) -> str:
        return fingerprint(self.labels)

    @property
    def authors(self) -> tuple[str, ...]:
        """The GitHub logins of the commits it blames: its culprit's (a job alert), or its
        jobs' culprits' (a trunk-level alert); none for a suspect not to blame."""
        return blamed_authors([self.failing] if self.failing else self.jobs.values())

    def routing_labels(self) -> list[dict[str, str]]:
        """What a receiver's matchers match: the labels with ROUTE_AUTHOR, once per author it
        blames (a receiver takes the alert when its matchers match any one), or the labels
        alone (the author matching as empty)."""
        return [{**self.labels, ROUTE_AUTHOR: author} for author in self.authors] or [dict(self.labels)]

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
    """An alert as the notifier and the API see it: what silences or inhibits it, and who
    acknowledged it (its live acknowledgement)."""

    alert: Alert
    trunk: str
    silenced_by: list[str] = field(default_factory=list)
    inhibited_by: list[str] = field(default_factory=list)
    acknowledgement: Acknowledgement | None = None

    @property
    def suppressed(self) -> bool:
        return bool(self.silenced_by or self.inhibited_by)

    def acknowledge(self, ack: Acknowledgement) -> None:
        """Mark it acknowledged; its annotations say by whom, when and why (the non-empty)."""
        self.acknowledgement = ack
        self.alert.annotations.update({name: value for name, value in ack.annotations().items() if value})
