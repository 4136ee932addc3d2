"""The daily digest as a person reads it (design.md §4.4): a short report, laid out once here
(`report`) for the email's plain text and Slack's blocks; the subject an SNS message
carries. Every other receiver gets the digest's JSON body (`DigestNotification.body`)."""

from __future__ import annotations

from dataclasses import dataclass

from trunkwatch.channels.base import DigestNotification
from trunkwatch.domain.alerts import plural
from trunkwatch.domain.digest import Digest, FixedBreakage
from trunkwatch.domain.links import trunk_url

JOBS_SHOWN = 10  # per breakage; the JSON body lists them all


@dataclass(frozen=True)
class Report:
    """The digest's sections: a headline, then (heading, lines) each, then its links."""

    headline: str
    sections: tuple[tuple[str, tuple[str, ...]], ...]
    links: tuple[tuple[str, str], ...]  # (title, url)
    source: str


def subject(digest: Digest, max_chars: int) -> str:
    """`[DIGEST] <repo>@<branch> <day>: 2 fixed before a page, 1 page, 3.5h broken`."""
    text = (
        f"[DIGEST] {digest.repo}@{digest.branch} {digest.day.isoformat()}: "
        f"{len(digest.fixed_before_page)} fixed before a page, {plural(len(digest.pages), 'page')}, "
        f"{digest.hours_broken:g}h broken"
    )
    return text if len(text) <= max_chars else text[: max_chars - 3] + "..."


def report(notification: DigestNotification) -> Report:
    digest = notification.digest
    fixed = digest.fixed_before_page
    sections = [
        (
            f"Fixed before anyone was paged: {plural(len(fixed), 'breakage') if fixed else 'none'}",
            tuple(line for breakage in fixed for line in _breakage(breakage)),
        ),
        (
            f"Pages: {len(digest.pages) or 'none'}",
            tuple(
                f"- {page.at.strftime('%H:%M')} {page.alertname}: {plural(len(page.jobs), 'job')}"
                + (f", culprit {', '.join(sorted({sha[:12] for _, sha in page.jobs}))}" if page.jobs else "")
                for page in digest.pages
            ),
        ),
    ]
    if digest.verdicts:
        sections.append(
            (
                f"Verdicts: {len(digest.verdicts)}",
                tuple(f"- {v.job}: {v.verdict} ({v.culprit_sha[:12]})" for v in digest.verdicts),
            )
        )
    sections.append((f"Hours broken: {digest.hours_broken:g}", ()))
    url = trunk_url(notification.external_url, digest.trunk)
    return Report(
        headline=f"Daily digest: {digest.repo}@{digest.branch}, {digest.day.isoformat()} (UTC)",
        sections=tuple(sections),
        links=(("Status page", url),) if url else (),
        source=f"{digest.repo}@{digest.branch}",
    )


def _breakage(breakage: FixedBreakage) -> list[str]:
    culprit = breakage.culprit
    head = f"- {culprit.sha[:12]}"
    if culprit.pr:
        head += f" #{culprit.pr}"
    if culprit.title:
        head += f' "{culprit.title}"'
    if culprit.author:
        head += f" by {culprit.author}"
    failed = plural(breakage.failed_commits, "commit")
    fixed = f"fixed by {breakage.fix_sha[:12]} {_duration(breakage.broken_for.total_seconds())} later"
    jobs = list(breakage.jobs[:JOBS_SHOWN])
    hidden = len(breakage.jobs) - len(jobs)
    return [
        head,
        f"  {failed} failed, {fixed}",
        *(f"  {job}" for job in jobs),
        *([f"  ... and {plural(hidden, 'more job')}"] if hidden > 0 else []),
    ]


def _duration(seconds: float) -> str:
    """`1h20m`, `45m`, `2d3h`: how long the trunk carried the breakage."""
    minutes = int(seconds // 60)
    days, hours, minutes = minutes // 1440, minutes // 60 % 24, minutes % 60
    return "".join(f"{n}{unit}" for n, unit in ((days, "d"), (hours, "h"), (minutes, "m")) if n) or "0m"


def email_text(notification: DigestNotification) -> str:
    told = report(notification)
    sections = [[told.headline]]
    sections += [[heading, *lines] for heading, lines in told.sections]
    if told.links:
        sections.append([f"{title}: {url}" for title, url in told.links])
    sections.append([f"Source: {told.source}"])
    return "\n\n".join("\n".join(section) for section in sections) + "\n"
