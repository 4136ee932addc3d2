"""Stored alerts of a trunk (TrunkJobFailing items) in DynamoDB and the trunk's failing set,
written together in one transaction so K (design.md §3.3) never disagrees with the alert
items; an alert that starts firing or resolves writes its episode in the same transaction.
Beside them, the breakages fixed before they could page (design.md §3.7)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime

from pynamodb.exceptions import DoesNotExist, TransactWriteError
from pynamodb.expressions.update import Action
from pynamodb.transactions import TransactWrite

from trunkwatch.domain.alerts import FIRING, JOB_FAILING
from trunkwatch.domain.cells import line_ids
from trunkwatch.domain.clock import format_time
from trunkwatch.domain.episodes import EPISODE_RETENTION, Episode, FixedEpisode
from trunkwatch.domain.job_alerts import AlertCommit, JobAlert
from trunkwatch.storage import keys
from trunkwatch.storage.errors import Conflict
from trunkwatch.storage.items import AlertCommitMap, AlertItem, EpisodeItem, FixedItem, TrunkStateItem
from trunkwatch.storage.table import BoundModels


def _ref(stored: AlertCommitMap) -> AlertCommit:
    return AlertCommit(
        seq=int(stored.seq),
        sha=str(stored.sha),
        time=stored.time,
        title=str(stored.title),
        author=str(stored.author),
        pr=int(stored.pr) if stored.pr is not None else None,
        url=str(stored.url),
        job_url=str(stored.job_url),
    )


def _ref_map(ref: AlertCommit) -> AlertCommitMap:
    return AlertCommitMap(
        seq=ref.seq,
        sha=ref.sha,
        time=ref.time,
        title=ref.title,
        author=ref.author,
        pr=ref.pr,
        url=ref.url,
        job_url=ref.job_url,
    )


def _alert(item: AlertItem) -> JobAlert:
    return JobAlert(
        job=str(item.job),
        status=str(item.status),
        starts_at=item.starts_at,
        ends_at=item.ends_at,
        streak=int(item.streak),
        first_fail=_ref(item.first_fail),
        last_pass=_ref(item.last_pass) if item.last_pass is not None else None,
        newest_fail=_ref(item.newest_fail),
        failure_lines=tuple(str(line) for line in item.failure_lines or ()),
        failing_urls=tuple(str(url) for url in item.failing_urls or ()),
        culprit_autoreverted_by=item.culprit_autoreverted_by,
        culprit_verdict=item.culprit_verdict,
        verdict_reason=item.verdict_reason or "",
        confirmed_culprit=_ref(item.confirmed_culprit) if item.confirmed_culprit is not None else None,
        version=int(item.version) if item.version is not None else None,
    )


def episode_item(model: type[EpisodeItem], trunk_id: str, alert: JobAlert) -> EpisodeItem:
    return model(
        keys.episodes(trunk_id),
        keys.episode(format_time(alert.starts_at), alert.job),
        job=alert.job,
        starts_at=alert.starts_at,
        ends_at=alert.ends_at,
        culprit=_ref_map(alert.culprit),
        verdict=alert.culprit_verdict,
        failure_line_ids=sorted(line_ids(alert.failure_lines)) or None,
        expires_at=alert.ends_at + EPISODE_RETENTION if alert.ends_at is not None else None,
    )


def _fixed_item(model: type[FixedItem], trunk_id: str, episode: FixedEpisode) -> FixedItem:
    return model(
        keys.fixed(trunk_id),
        keys.fixed_episode(episode.culprit.sha, episode.job),
        job=episode.job,
        culprit=_ref_map(episode.culprit),
        fix=_ref_map(episode.fix),
        last_pass=_ref_map(episode.last_pass) if episode.last_pass is not None else None,
        failed_commits=episode.failed_commits,
        failure_lines=list(episode.failure_lines) or None,
        detected_at=episode.detected_at,
        expires_at=episode.detected_at + EPISODE_RETENTION,
    )


def _fixed(item: FixedItem) -> FixedEpisode:
    return FixedEpisode(
        job=str(item.job),
        culprit=_ref(item.culprit),
        fix=_ref(item.fix),
        failed_commits=int(item.failed_commits),
        detected_at=item.detected_at,
        last_pass=_ref(item.last_pass) if item.last_pass is not None else None,
        failure_lines=tuple(str(line) for line in item.failure_lines or ()),
    )


class DynamoAlerts:
    def __init__(self, table: BoundModels) -> None:
        self.alerts = table.model(AlertItem)
        self.episode_items = table.model(EpisodeItem)
        self.trunk_states = table.model(TrunkStateItem)
        self.fixed_items = table.model(FixedItem)
        self.connection = table.connection

    def job_alert(self, trunk_id: str, job: str) -> JobAlert | None:
        try:
            item = self.alerts.get(keys.alerts(trunk_id), keys.alert(JOB_FAILING, job), consistent_read=True)
        except DoesNotExist:
            return None
        return _alert(item)

    def of_trunk(self, trunk_id: str, firing_only: bool = False) -> list[JobAlert]:
        condition = AlertItem.status == FIRING if firing_only else None
        query = self.alerts.query(keys.alerts(trunk_id), filter_condition=condition)
        return [_alert(item) for item in query]

    def save_with_failing_set(self, trunk_id: str, alert: JobAlert, now_firing: bool | None) -> JobAlert:
        """Save the alert if it is still at its version (else `Conflict`); `now_firing`
        True/False adds/removes its job from the trunk's failing set and writes its episode in
        the same transaction, None leaves both alone. Returns the alert at its new version."""
        item = self.alerts(
            keys.alerts(trunk_id),
            keys.alert(JOB_FAILING, alert.job),
            job=alert.job,
            status=alert.status,
            starts_at=alert.starts_at,
            ends_at=alert.ends_at,
            streak=alert.streak,
            first_fail=_ref_map(alert.first_fail),
            last_pass=_ref_map(alert.last_pass) if alert.last_pass is not None else None,
            newest_fail=_ref_map(alert.newest_fail),
            failure_lines=list(alert.failure_lines) or None,
            failing_urls=list(alert.failing_urls) or None,
            culprit_autoreverted_by=alert.culprit_autoreverted_by,
            culprit_verdict=alert.culprit_verdict,
            verdict_reason=alert.verdict_reason or None,
            confirmed_culprit=_ref_map(alert.confirmed_culprit) if alert.confirmed_culprit else None,
        )
        if alert.version is not None:  # an alert read before: saved only if still at that version
            item.version = alert.version
        try:
            with TransactWrite(connection=self.connection) as transaction:
                transaction.save(item)
                if now_firing is not None:
                    transaction.save(episode_item(self.episode_items, trunk_id, alert))
                    states = self.trunk_states
                    failing = states.failing
                    change: Action = (failing.add if now_firing else failing.delete)({alert.job})
                    transaction.update(
                        states(keys.trunk(trunk_id), keys.STATE), actions=[change, states.kind.set(states)]
                    )
        except TransactWriteError as err:
            reasons = [reason.code for reason in err.cancellation_reasons or [] if reason is not None]
            if "ConditionalCheckFailed" in reasons:
                raise Conflict(f"alert of {alert.job} changed since it was read") from None
            raise
        return replace(alert, version=int(item.version))

    def episodes(self, trunk_id: str, since: datetime) -> list[Episode]:
        """The trunk's episodes still firing or resolved at or after `since`, by start (the
        partition holds only what TTL has not removed yet: about a month)."""
        return [
            Episode(
                str(item.job),
                item.starts_at,
                item.ends_at,
                _ref(item.culprit),
                item.verdict,
                tuple(item.failure_line_ids or ()),
            )
            for item in self.episode_items.query(keys.episodes(trunk_id))
            if item.ends_at is None or item.ends_at >= since
        ]

    def fixed(self, trunk_id: str) -> list[FixedEpisode]:
        """The trunk's breakages fixed before they could page (the partition holds those TTL
        has not removed yet: about a month), by culprit sha, then job."""
        return [_fixed(item) for item in self.fixed_items.query(keys.fixed(trunk_id))]

    def save_fixed(
        self, trunk_id: str, episode: FixedEpisode, supersedes: Sequence[FixedEpisode] = ()
    ) -> None:
        """Write the episode (replacing the one of its job and culprit) and delete those it
        supersedes, all or nothing."""
        item = _fixed_item(self.fixed_items, trunk_id, episode)
        if not supersedes:
            item.save()
            return
        with TransactWrite(connection=self.connection) as transaction:
            transaction.save(item)
            for old in supersedes:
                key = keys.fixed_episode(old.culprit.sha, old.job)
                transaction.delete(self.fixed_items(keys.fixed(trunk_id), key))
