"""The plain-text body an email subscriber gets (SNS's `email` protocol key): what broke,
since when and who to ask first, read in ten seconds; the links below, the ids at the end.

Every section is left out when the alert has nothing for it: no empty headings, no `None`.
"""

from __future__ import annotations

from trunkwatch.channels.base import Notification
from trunkwatch.channels.content import Culprit, content


def email_text(notification: Notification) -> str:
    told = content(notification)
    status = "FIRING" if told.firing else "RESOLVED"
    sections: list[list[str]] = [[f"{status}: {told.summary}", *told.when]]
    if told.acknowledged:
        sections.append([told.acknowledged])
    if told.culprit:
        sections.append([*_culprit(told.culprit), *([told.verdict] if told.verdict else [])])
    if told.jobs:
        more = [f"- {told.more_jobs}"] if told.more_jobs else []
        listed: list[str] = []
        for job in told.jobs:
            listed += [f"- {job}", f"  {told.job_culprit(job)}"]
        sections.append([told.jobs_heading, *listed, *more])
    if told.failure_lines:
        sections.append(["First failure lines:", *told.failure_lines])
    if told.links:
        sections.append([f"{title}: {url}" for title, url in told.links])
    sections.append([f"Source: {told.source}", f"Fingerprint: {told.fingerprint}"])
    return "\n\n".join("\n".join(section) for section in sections) + "\n"


def _culprit(culprit: Culprit) -> list[str]:
    """`Culprit: <sha12> #<pr> "<title>" by <author>` and its commit and PR links."""
    head = f"{culprit.heading}: {culprit.sha}"
    if culprit.pr:
        head += f" #{culprit.pr}"
    if culprit.title:
        head += f' "{culprit.title}"'
    if culprit.author:
        head += f" by {culprit.author}"
    return [head, *(f"  {url}" for url in (culprit.commit_url, culprit.pr_url) if url)]
