"""What a person is told about a notification, whatever the receiver: status and summary,
when, the culprit (or, when reruns cleared it, the suspect) and the verdict in words, the
failing jobs (each with its culprit, streak and verdict, for the trunk-level alerts people
are paged with), the first failure lines, the links, the ids.

Each receiver (email text, Slack blocks, a GitHub issue) lays this out in its own markup;
the selection and the limits are decided once, here. Parts the alert has nothing for are
empty, so no receiver shows an empty heading or a `None`.
"""

from __future__ import annotations

from dataclasses import dataclass

from trunkwatch.channels.base import Notification
from trunkwatch.domain import acks, alerts
from trunkwatch.domain.alerts import FailingJob, plural
from trunkwatch.domain.clock import format_time
from trunkwatch.domain.verdict import verdict_words

FAILURE_LINES_SHOWN = 5
MAX_LINE_CHARS = 300  # a failure line can be a minified stack; the webhook body keeps it whole
MAX_JOBS_SHOWN = 50


@dataclass(frozen=True)
class Culprit:
    """The commit the alert names: its culprit, or a suspect that reruns cleared (`blamed`
    False: an environmental or flaky verdict)."""

    sha: str  # the first 12 characters
    pr: str = ""
    title: str = ""
    author: str = ""
    commit_url: str = ""
    pr_url: str = ""
    blamed: bool = True

    @property
    def heading(self) -> str:
        return "Culprit" if self.blamed else "Suspect (not to blame)"


@dataclass(frozen=True)
class Content:
    firing: bool
    summary: str
    when: tuple[str, ...]  # "Since: ...", "Resolved: ...", "Failed on 3 commits in a row"
    culprit: Culprit | None
    verdict: str  # "Verdict: ..." in words with its reason; empty without confirmation
    jobs: tuple[str, ...]  # the failing jobs shown (trunk-level alerts)
    jobs_total: int
    failing: dict[str, FailingJob]  # each job shown: its streak and culprit
    failure_lines: tuple[str, ...]
    links: tuple[tuple[str, str], ...]  # (title, url): View, Runbook, Dashboard, Silence
    source: str  # repo@branch; `trunkwatch` for an alert of no trunk
    fingerprint: str
    # "Acknowledged by <who> at <when>: <note>"; empty while no one has acknowledged it.
    acknowledged: str = ""

    @property
    def jobs_heading(self) -> str:
        return f"Failing: {plural(self.jobs_total, 'job')}"

    def job_culprit(self, job: str) -> str:
        """`culprit <sha12> #<pr> by <author>, <n> commits in a row` (`suspect` when the verdict
        clears it), then the verdict in words when there is one."""
        before, author, after = self.job_culprit_parts(job)
        return f"{before}{author or 'unknown'}{after}"

    def job_culprit_parts(self, job: str) -> tuple[str, str, str]:
        """`job_culprit` around its author's GitHub login (empty when not known), so that a
        receiver can name the author its own way (Slack: a mention)."""
        found = self.failing[job]
        culprit = found.culprit
        pr = f" #{culprit.pr}" if culprit.pr else ""
        named = "culprit" if found.blamed else "suspect"
        verdict = f" ({verdict_words(found.verdict)})" if found.verdict else ""
        return (
            f"{named} {culprit.sha[:12]}{pr} by ",
            culprit.author,
            f", {plural(found.streak, 'commit')} in a row{verdict}",
        )

    @property
    def more_jobs(self) -> str:
        """`... and 3 more jobs` when not all are shown, else empty."""
        hidden = self.jobs_total - len(self.jobs)
        return f"... and {plural(hidden, 'more job')}" if hidden > 0 else ""


def content(notification: Notification) -> Content:
    alert = notification.alert
    notes = {k: v.strip() for k, v in alert.annotations.items() if v and v.strip()}
    firing = notification.status == alerts.FIRING
    when = [f"Since: {format_time(alert.starts_at)}"]
    if not firing and alert.ends_at:
        when.append(f"Resolved: {format_time(alert.ends_at)}")
    failing = alert.failing
    if failing is not None:
        when.append(f"Failed on {plural(failing.streak, 'commit')} in a row")
    jobs = list(alert.jobs)
    lines = [line for line in notes.get("failure_lines", "").splitlines() if line.strip()]
    links = (
        ("View", alert.generator_url),
        ("Runbook", notes.get("runbook_url", "")),
        ("Dashboard", notes.get("dashboard_url", "")),
        ("Silence", notes.get("silence_url", "")),
    )
    labels = alert.labels
    return Content(
        firing=firing,
        summary=" ".join(notes.get("summary", alert.name).split()),
        when=tuple(when),
        culprit=_culprit(failing) if failing else None,
        verdict=_verdict(failing) if failing else "",
        jobs=tuple(jobs[:MAX_JOBS_SHOWN]),
        jobs_total=len(jobs),
        failing={job: alert.jobs[job] for job in jobs[:MAX_JOBS_SHOWN]},
        failure_lines=tuple(clip(line) for line in lines[:FAILURE_LINES_SHOWN]),
        links=tuple((title, url) for title, url in links if url),
        # An alert of no trunk (Watchdog) comes from trunkwatch itself.
        source=f"{labels['repo']}@{labels.get('branch', '?')}" if labels.get("repo") else "trunkwatch",
        fingerprint=alert.fingerprint,
        acknowledged=_acknowledged(notes),
    )


def _acknowledged(notes: dict[str, str]) -> str:
    by = notes.get(acks.BY_ANNOTATION, "")
    if not by:
        return ""
    note = notes.get(acks.NOTE_ANNOTATION, "")
    return f"Acknowledged by {by} at {notes.get(acks.AT_ANNOTATION, '?')}" + (
        f": {clip(note)}" if note else ""
    )


def _culprit(failing: FailingJob) -> Culprit:
    """A job alert's culprit, with its author and links; a suspect without them."""
    commit = failing.culprit
    pr = str(commit.pr) if commit.pr else ""
    title = clip(commit.title.strip())
    if not failing.blamed:
        return Culprit(sha=commit.sha[:12], pr=pr, title=title, blamed=False)
    return Culprit(
        sha=commit.sha[:12],
        pr=pr,
        title=title,
        author=commit.author,
        commit_url=commit.url,
        pr_url=commit.pr_url,
    )


def _verdict(failing: FailingJob) -> str:
    if not failing.verdict:
        return ""
    reason = failing.reason
    return f"Verdict: {verdict_words(failing.verdict)}" + (f" ({clip(reason)})" if reason else "")


def clip(line: str, limit: int = MAX_LINE_CHARS) -> str:
    line = line.rstrip()
    return line if len(line) <= limit else line[: limit - 3] + "..."
