"""The plain-text body an email subscriber gets (SNS's `email` protocol key): what broke,
since when and who to ask first, read in ten seconds; the links below, the ids at the end.

Every section is left out when the alert has nothing for it: no empty headings, no `None`.
"""

from __future__ import annotations

from trunkwatch.channels.base import Notification
from trunkwatch.domain import alerts
from trunkwatch.domain.alerts import plural
from trunkwatch.domain.clock import format_time

FAILURE_LINES_SHOWN = 5
MAX_LINE_CHARS = 300  # a failure line can be a minified stack; the webhook body keeps it whole
MAX_JOBS_SHOWN = 50


def email_text(notification: Notification) -> str:
    alert = notification.alert
    notes = {k: v.strip() for k, v in alert.annotations.items() if v and v.strip()}
    status = "FIRING" if notification.status == alerts.FIRING else "RESOLVED"
    summary = " ".join(notes.get("summary", alert.name).split())
    sections: list[list[str]] = [[f"{status}: {summary}"]]

    when = [f"Since: {format_time(alert.starts_at)}"]
    if notification.status != alerts.FIRING and alert.ends_at:
        when.append(f"Resolved: {format_time(alert.ends_at)}")
    if notes.get("streak", "").isdigit():
        when.append(f"Failed on {plural(int(notes['streak']), 'commit')} in a row")
    sections[0] += when

    culprit = _culprit(notes)
    if culprit:
        sections.append(culprit)

    jobs = notes.get("failing_jobs", "").splitlines()
    if jobs:
        shown = [f"- {job}" for job in jobs[:MAX_JOBS_SHOWN]]
        if len(jobs) > MAX_JOBS_SHOWN:
            shown.append(f"- ... and {plural(len(jobs) - MAX_JOBS_SHOWN, 'more job')}")
        sections.append([f"Failing: {plural(len(jobs), 'job')}", *shown])

    lines = [line for line in notes.get("failure_lines", "").splitlines() if line.strip()]
    if lines:
        sections.append(["First failure lines:", *(_clip(line) for line in lines[:FAILURE_LINES_SHOWN])])

    links = [
        f"{title}: {value}"
        for title, value in (
            ("View", alert.generator_url),
            ("Runbook", notes.get("runbook_url", "")),
            ("Dashboard", notes.get("dashboard_url", "")),
            ("Silence", notes.get("silence_url", "")),
        )
        if value
    ]
    if links:
        sections.append(links)

    labels = alert.labels
    sections.append(
        [
            f"Source: {labels.get('repo', '?')}@{labels.get('branch', '?')}",
            f"Fingerprint: {alert.fingerprint}",
        ]
    )
    return "\n\n".join("\n".join(section) for section in sections) + "\n"


def _culprit(notes: dict[str, str]) -> list[str]:
    """`Culprit: <sha12> #<pr> "<title>" by <author>` and its commit and PR links."""
    sha = notes.get("culprit_sha", "")
    if not sha:
        return []
    head = f"Culprit: {sha[:12]}"
    if notes.get("culprit_pr"):
        head += f" #{notes['culprit_pr'].lstrip('#')}"
    if notes.get("culprit_title"):
        head += f' "{_clip(notes["culprit_title"])}"'
    if notes.get("culprit_author"):
        head += f" by {notes['culprit_author']}"
    out = [head]
    out += [f"  {notes[k]}" for k in ("culprit_url", "culprit_pr_url") if notes.get(k)]
    return out


def _clip(line: str) -> str:
    line = line.rstrip()
    return line if len(line) <= MAX_LINE_CHARS else line[: MAX_LINE_CHARS - 3] + "..."
