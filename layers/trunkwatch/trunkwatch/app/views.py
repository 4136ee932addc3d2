"""The alerts of a trunk as people see them: stored job alerts, the derived trunk-level
alert (design.md §3.3), and what silences or inhibits each (design.md §4). Read-only: the evaluator
alone writes alert items."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime, timedelta

from trunkwatch import sources
from trunkwatch.domain import alerts
from trunkwatch.domain.acks import Acknowledgement, is_ack_comment, live_by_fingerprint
from trunkwatch.domain.alerts import (
    Alert,
    AlertView,
    CommitSummary,
    FailingJob,
    Links,
    blamed_authors,
    plural,
)
from trunkwatch.domain.cells import workflow_of
from trunkwatch.domain.clock import format_time
from trunkwatch.domain.config import Deployment, RuleConfig, TrunkConfig
from trunkwatch.domain.job_alerts import AlertCommit, JobAlert
from trunkwatch.domain.links import silence_url
from trunkwatch.domain.rule import source_down, trunk_alertname
from trunkwatch.domain.trunk_state import TrunkState
from trunkwatch.domain.verdict import verdict_words
from trunkwatch.silences import Silence
from trunkwatch.storage.port import Storage

MAX_FAILURE_LINES_CHARS = 1500


def trunk_views(
    storage: Storage,
    trunk: TrunkConfig,
    rule: RuleConfig,
    silences: Sequence[Silence],
    links: Links,
    now: datetime,
    include_resolved: bool = False,
    acks: Sequence[Acknowledgement] | None = None,
) -> list[AlertView]:
    """Every job alert of the trunk (firing; resolved too if asked), its trunk-level alert,
    and SourceDown while the trunk's source cannot be read; each with its live
    acknowledgement (of `acks`, else as stored), which its annotations say too. An `ACK!`
    silence acknowledges (`app/acks.py`) and holds nothing back."""
    items = storage.alerts.of_trunk(trunk.trunk_id)
    firing = [i for i in items if i.status == alerts.FIRING and rule.in_scope(i.job)]
    shown = items if include_resolved else firing
    shown = [item for item in shown if rule.in_scope(item.job)]
    reverted = storage.commits.autoreverted(trunk.trunk_id, (item.culprit.seq for item in shown))
    job_alerts = [job_alert(item, trunk, rule, links, _reverted_by(item, reverted)) for item in shown]
    level = trunk_level_alert(firing, trunk, rule, links)
    state = storage.trunks.state(trunk.trunk_id)
    down = source_down_alert(state, trunk, rule, links, now)
    deliveries = webhooks_down_alert(state, trunk, rule, links)
    views = [AlertView(a, trunk.trunk_id) for a in [*job_alerts, level, down, deliveries] if a is not None]
    badly = level.fingerprint if level and level.name == alerts.TRUNK_BADLY_BROKEN else None
    muting = [s for s in silences if not is_ack_comment(s.comment)]
    live = live_by_fingerprint(storage.logs.acks(trunk.trunk_id) if acks is None else acks)
    for view in views:
        view.silenced_by = [s.id for s in muting if s.matches(view.alert.labels)]
        if badly and view.alert.name == alerts.JOB_FAILING and view.alert.status == alerts.FIRING:
            view.inhibited_by = [badly]
        ack = live.get(view.alert.fingerprint)
        if ack is not None:
            view.acknowledge(ack)
    return views


def _reverted_by(item: JobAlert, live: dict[int, str]) -> str | None:
    """As the culprit's commit item says now, or as it said when the alert was last written
    (after the commit item expired)."""
    return live.get(int(item.culprit.seq)) or item.culprit_autoreverted_by


def _trunk_labels(alertname: str, priority: str, trunk: TrunkConfig, rule: RuleConfig) -> dict[str, str]:
    """The labels of a trunk-level alert (no job): it goes to the trunk's team."""
    return {
        "alertname": alertname,
        "repo": trunk.repo,
        "branch": trunk.branch,
        "priority": priority,
        "team": rule.team,
    }


def source_down_alert(
    state: TrunkState, trunk: TrunkConfig, rule: RuleConfig, links: Links, now: datetime
) -> Alert | None:
    """Never inhibited: a blind pipeline matters most when everything else is quiet."""
    since = state.polls_failing_since
    if since is None or not source_down(since, now, rule):
        return None
    labels = _trunk_labels(alerts.SOURCE_DOWN, "P2", trunk, rule)
    last_ok = format_time(state.last_poll_ok_at) if state.last_poll_ok_at else "none recorded"
    cause = state.poll_error_cause or "unknown"
    annotations = {
        "summary": f"trunkwatch cannot read {trunk.source} for {trunk.repo}@{trunk.branch} ({cause})",
        "description": (
            f"Every poll of {trunk.repo}@{trunk.branch} since {format_time(since)} failed; "
            f"trunk breakage is not being seen.\nCause: {cause}\nError: {state.poll_error or ''}\n"
            f"Last successful poll: {last_ok}"
        ),
        "cause": cause,
        "error": state.poll_error or "",
        "last_successful_poll": last_ok,
        **_common_annotations(labels, rule, links),
    }
    return Alert(labels, _present(annotations), starts_at=since, generator_url=sources.trunk_link(trunk))


def webhooks_down_alert(
    state: TrunkState, trunk: TrunkConfig, rule: RuleConfig, links: Links
) -> Alert | None:
    """A webhook-fed trunk whose poll finds what no delivery brought: detection is back to
    the backstop poll's period. Resolves when a delivery writes cells again."""
    since, last = state.deliveries_missing_since, state.last_delivery_at
    if since is None or (last is not None and last > since):
        return None
    labels = _trunk_labels(alerts.WEBHOOKS_DOWN, "P2", trunk, rule)
    last_seen = format_time(last) if last else "none recorded"
    every = trunk.poll_period
    annotations = {
        "summary": f"GitHub webhook deliveries for {trunk.repo}@{trunk.branch} are not arriving",
        "description": (
            f"Since {format_time(since)} the backstop poll of {trunk.repo}@{trunk.branch} finds job "
            f"results no webhook delivery brought; breaks are seen only at the poll"
            + (f" (every {every})" if every else "")
            + f".\nLast delivery with results: {last_seen}\n"
            "Check the webhook's recent deliveries on GitHub (failed ones are not retried) and the "
            "WebhookUrl output it should point at."
        ),
        "last_delivery": last_seen,
        **_common_annotations(labels, rule, links),
    }
    return Alert(labels, _present(annotations), starts_at=since, generator_url=sources.trunk_link(trunk))


def watchdog_alert(links: Links, every: timedelta, now: datetime) -> Alert:
    """The heartbeat (design.md §4.2): Alertmanager's always-firing `Watchdog`, of no trunk
    and no priority, sent only to the heartbeat's receivers. It starts at each beat: what a
    dead man's switch reads is that it came."""
    labels = {"alertname": alerts.WATCHDOG, "priority": "none", "severity": "none"}
    annotations = {
        "summary": "trunkwatch is alive: this alert is always firing",
        "description": (
            f"An alert that is always firing, sent every {_duration(every)} to certify that trunkwatch's "
            "schedule, pipeline and notifier work. A dead man's switch that receives it alerts when "
            "it stops coming."
        ),
        "runbook_url": runbook_url(links.api_url, alerts.WATCHDOG),
    }
    return Alert(labels, _present(annotations), starts_at=now, generator_url=links.api_url)


def _duration(value: timedelta) -> str:
    """`5m`, `1h30m`, `90s`: as the configuration writes durations."""
    seconds = int(value.total_seconds())
    hours, minutes, rest = seconds // 3600, seconds // 60 % 60, seconds % 60
    return "".join(f"{n}{unit}" for n, unit in ((hours, "h"), (minutes, "m"), (rest, "s")) if n) or "0s"


def job_alert(
    item: JobAlert, trunk: TrunkConfig, rule: RuleConfig, links: Links, autoreverted_by: str | None = None
) -> Alert:
    labels = {
        "alertname": alerts.JOB_FAILING,
        "repo": trunk.repo,
        "branch": trunk.branch,
        "priority": "P3",
        "team": rule.team_for(item.job),
        "job": item.job,
        "workflow": workflow_of(item.job),
    }
    last_pass, newest = item.last_pass, item.newest_fail
    failing = job_failure(item, trunk)
    culprit = failing.culprit
    verdict = (
        [f"Verdict: {verdict_words(failing.verdict)}" + (f" ({failing.reason})" if failing.reason else "")]
        if failing.verdict
        else []
    )
    lines = "\n".join(str(line) for line in item.failure_lines or [])[:MAX_FAILURE_LINES_CHARS]
    runs = "\n".join(str(url) for url in item.failing_urls or [])
    description = (
        f"{item.job} failed on {failing.streak} commits in a row on {trunk.repo}@{trunk.branch}.\n"
        # An environmental or flaky verdict blames no commit: the suspect is named, not as culprit.
        + f"{'Culprit' if failing.blamed else 'Suspect'}: {culprit.describe()}\n"
        + "".join(f"{line}\n" for line in verdict)
        + (f"Already reverted: {autoreverted_by}\n" if autoreverted_by else "")
        + (
            f"Last pass: {_summary(last_pass).describe()}\n"
            if last_pass
            else "Last pass: not in the window (range clipped)\n"
        )
        + (f"Failure lines:\n{lines}\n" if lines else "")
        + (f"Failing runs:\n{runs}\n" if runs else "")
    )
    annotations = {
        "summary": f"{item.job} failing on {trunk.repo} ({failing.streak} commits in a row)",
        "description": description,
        "streak": str(failing.streak),
        "culprit_verdict": failing.verdict,
        "culprit_verdict_reason": failing.reason,
        "culprit_sha": culprit.sha,
        "culprit_pr": str(culprit.pr) if culprit.pr else "",
        "culprit_title": culprit.title,
        "culprit_author": culprit.author,
        "culprit_time": format_time(culprit.time),
        "culprit_url": culprit.url,
        "culprit_pr_url": culprit.pr_url,
        "last_pass_sha": last_pass.sha if last_pass else "",
        "culprit_autoreverted_by": autoreverted_by or "",
        "culprit_range": f"{last_pass.sha[:12] if last_pass else 'clipped'}..{culprit.sha[:12]}",
        "clipped": "false" if last_pass else "true",
        "failure_lines": lines,
        "failing_runs": runs,
        **_common_annotations(labels, rule, links),
    }
    if not failing.blamed:
        annotations = _as_suspect(annotations)
    annotations = _present(annotations)
    generator = sources.job_link(trunk, item.job, newest.job_url)
    return Alert(
        labels,
        annotations,
        starts_at=item.starts_at,
        ends_at=item.ends_at,
        generator_url=generator,
        failing=failing,
    )


def job_failure(item: JobAlert, trunk: TrunkConfig) -> FailingJob:
    """The job alert's streak, culprit (with its links) and verdict, as receivers read them;
    its annotations tell the same as text."""
    first = item.culprit
    pr_url = f"https://github.com/{trunk.repo}/pull/{first.pr}" if first.pr else ""
    culprit = replace(_summary(first), url=first.url, pr_url=pr_url)
    return FailingJob(int(item.streak), culprit, item.culprit_verdict or "", item.verdict_reason)


def _as_suspect(annotations: dict[str, str]) -> dict[str, str]:
    """No commit named as culprit: the verdict stays (`culprit_verdict` and its reason), the
    commit moves to `suspect_sha`, `suspect_pr`, `suspect_title`, `suspect_range`."""
    renamed = {
        "culprit_sha": "suspect_sha",
        "culprit_pr": "suspect_pr",
        "culprit_title": "suspect_title",
        "culprit_range": "suspect_range",
    }
    kept = ("culprit_verdict", "culprit_verdict_reason")
    return {
        renamed.get(name, name): value
        for name, value in annotations.items()
        if name in renamed or name in kept or not name.startswith("culprit_")
    }


def trunk_level_alert(
    firing: list[JobAlert], trunk: TrunkConfig, rule: RuleConfig, links: Links
) -> Alert | None:
    name = trunk_alertname(len(firing), rule)
    if name is None:
        return None
    band = rule.trunk_band_max_jobs
    if name == alerts.TRUNK_BROKEN:
        commits = plural(rule.failures_to_open, "commit")
        priority, summary = "P2", f"HUD is broken - {commits} in a row (<={plural(band, 'job')} failing)"
    else:
        priority, summary = (
            "P1",
            f"HUD is badly broken - likely infra related (>{plural(band, 'job')} failing)",
        )
    labels = _trunk_labels(name, priority, trunk, rule)
    ordered = sorted(firing, key=lambda i: i.job)
    jobs = {i.job: FailingJob(int(i.streak), _summary(i.culprit), i.culprit_verdict or "") for i in ordered}
    description = f"{plural(len(firing), 'job')} failing on {trunk.repo}@{trunk.branch}:\n" + "\n".join(
        f"- {job}: {failing.detail()}" for job, failing in jobs.items()
    )
    annotations = {
        "summary": summary,
        "description": description,
        "failing_jobs": "\n".join(jobs),
        "culprit_authors": ", ".join(blamed_authors(jobs.values())),
        **_common_annotations(labels, rule, links),
    }
    annotations = _present(annotations)
    generator = sources.trunk_link(trunk)
    starts = min(i.starts_at for i in firing)
    return Alert(labels, annotations, starts_at=starts, generator_url=generator, jobs=jobs)


def _present(annotations: dict[str, str]) -> dict[str, str]:
    """Annotations with no value are left out, never sent empty (design.md §4)."""
    return {k: v for k, v in annotations.items() if v}


def _summary(ref: AlertCommit) -> CommitSummary:
    return CommitSummary(ref.sha, ref.title, int(ref.pr) if ref.pr else None, ref.author, ref.time)


def _common_annotations(labels: dict[str, str], rule: RuleConfig, links: Links) -> dict[str, str]:
    matchers = " ".join(
        shlex.quote(f'{k}="{v}"') for k, v in labels.items() if k in ("alertname", "repo", "branch", "job")
    )
    return {
        "runbook_url": rule.runbook_url or runbook_url(links.api_url, labels["alertname"]),
        "dashboard_url": rule.dashboard_url or links.dashboard_url,
        "silence_url": silence_url(links.api_url, labels),
        "silence_command": f"amtool --alertmanager.url={links.api_url} silence add --comment=why {matchers}",
    }


def runbook_url(api_url: str, alertname: str) -> str:
    """The API's runbook page at the alert's section; none without an http(s) API URL."""
    if not api_url.startswith(("http://", "https://")):
        return ""
    return f"{api_url.rstrip('/')}/runbook#{alertname.lower()}"


def current_alerts(storage: Storage, deployment: Deployment, now: datetime, links: Links) -> list[AlertView]:
    """Firing alerts of every configured trunk, for the API's `GET /api/v2/alerts`."""
    from trunkwatch.silences import store

    silences = store.active(storage.silences, now)
    return [
        view
        for trunk in deployment.trunks
        for view in trunk_views(storage, trunk, deployment.rule_for(trunk), silences, links, now)
    ]
