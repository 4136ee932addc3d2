"""PynamoDB models of the table's items (the key design is in this package's docstring).

These describe the items and name no table: `table.bind` makes, for each table, a subclass
of each bound to it, and the stores use only those. Unbound, a model still builds,
serializes and reads an item (stream images, item sizes), but reaches no table."""

from __future__ import annotations

from typing import Any

from pynamodb.attributes import (
    BooleanAttribute,
    DiscriminatorAttribute,
    JSONAttribute,
    ListAttribute,
    MapAttribute,
    NumberAttribute,
    NumberSetAttribute,
    TTLAttribute,
    UnicodeAttribute,
    UnicodeSetAttribute,
    UTCDateTimeAttribute,
    VersionAttribute,
)
from pynamodb.expressions.condition import Condition
from pynamodb.expressions.update import Action
from pynamodb.models import Model


class BaseItem(Model):
    """Every item of the table; each subclass is one `kind` (PynamoDB polymorphism)."""

    pk = UnicodeAttribute(hash_key=True)
    sk = UnicodeAttribute(range_key=True)
    kind = DiscriminatorAttribute()

    @classmethod
    def upsert(cls, pk: str, sk: str, actions: list[Action], condition: Condition | None = None) -> Any:
        """UpdateItem that also stamps `kind`, so an item created by an update is typed."""
        return cls(pk, sk).update(actions=[*actions, cls.kind.set(cls)], condition=condition)


class TrunkStateItem(BaseItem, discriminator="trunk"):
    """Per-trunk counters the evaluator and notifier share (sk `STATE`)."""

    # Jobs with a firing TrunkJobFailing: K of design.md §3.3, kept with atomic ADD/DELETE.
    failing = UnicodeSetAttribute(null=True)
    # Jobs whose newest failures have not paged (design.md §3.7), kept the same way.
    unpaged = UnicodeSetAttribute(null=True)
    # Seqs of the newest commits that ran any job (for staleness), newest first.
    recent_seqs = JSONAttribute(null=True)
    # Polls and webhook groups whose ticks have not settled, as `poll@opened-at` (one ADD
    # opens, one DELETE closes, so concurrent polls never overwrite each other's).
    unsettled = UnicodeSetAttribute(null=True)
    # The source's health (SourceDown): the last good poll, and since when polls fail.
    last_poll_ok_at = UTCDateTimeAttribute(null=True)
    polls_failing_since = UTCDateTimeAttribute(null=True)
    poll_error_cause = UnicodeAttribute(null=True)
    poll_error = UnicodeAttribute(null=True)
    # When a webhook-fed trunk was last polled (it is polled only every `poll_every`).
    last_polled_at = UTCDateTimeAttribute(null=True)
    # The last second a delivery wrote cells (kept by the group that second opened), and
    # since when the poll finds results without deliveries (WebhooksDown).
    last_delivery_at = UTCDateTimeAttribute(null=True)
    deliveries_missing_since = UTCDateTimeAttribute(null=True)


class JobIndex(BaseItem, discriminator="jobs"):
    """Stable column numbers for job keys, so commits store states as one short string."""

    names = JSONAttribute(null=True)


class SourceState(BaseItem, discriminator="source"):
    """What a source wants back next poll (ETags, run versions); rewritten only on change."""

    state = JSONAttribute(null=True)


class CommitItem(BaseItem, discriminator="commit"):
    seq = NumberAttribute()
    sha = UnicodeAttribute()
    time = UTCDateTimeAttribute()
    title = UnicodeAttribute(default="")
    author = UnicodeAttribute(default="")
    pr = NumberAttribute(null=True)
    url = UnicodeAttribute(default="")
    # Set when the source says the commit was already reverted (PyTorch's autorevert).
    autoreverted_by = UnicodeAttribute(null=True)
    # One CellState code per JobIndex column ('-' = no cell): what ingest compares against.
    states = UnicodeAttribute(default="")
    # The commit's time + the rule's retention: the commit goes with its cells, oldest first.
    expires_at = TTLAttribute(null=True)


class ShaPointerItem(BaseItem, discriminator="commit_sha"):
    """A trunk commit's seq by sha: how a webhook delivery finds the commit it is about. A
    commit not placed yet may have one holding only `child`: the seq its child was placed
    at first (its push was delivered before this commit's), the bound it is placed below."""

    seq = NumberAttribute(null=True)
    child = NumberAttribute(null=True)
    expires_at = TTLAttribute(null=True)  # with its commit item (or its child's)


class ShardItem(BaseItem, discriminator="shard"):
    """One shard of a job on one commit as webhook deliveries reported it (sk: the shard's
    job name), `domain.shards.Shard`: its newest attempt, its newest attempt with a result,
    and the attempts that failed. The job's cell merges every shard of its key, as the poll
    merges runs."""

    attempt = NumberAttribute()
    completed = BooleanAttribute()
    conclusion = UnicodeAttribute()  # the status while not completed
    url = UnicodeAttribute(default="")
    result_attempt = NumberAttribute(null=True)
    result_conclusion = UnicodeAttribute(null=True)
    result_url = UnicodeAttribute(null=True)
    failed_attempts = NumberSetAttribute(null=True)  # attempts that failed: a later pass is flaky
    version = VersionAttribute()
    expires_at = TTLAttribute()


class RunItem(BaseItem, discriminator="run"):
    """A workflow run a webhook delivery told of (sk `RUN`): whether it is a trunk run."""

    sha = UnicodeAttribute()
    of_trunk = BooleanAttribute()
    expires_at = TTLAttribute()


class HeldReportItem(BaseItem, discriminator="held"):
    """A job's report held under its run (sk `HELD#<name>#<attempt>#<status>`) until a
    delivery says whether the run is a trunk run."""

    sha = UnicodeAttribute()
    name = UnicodeAttribute()
    attempt = NumberAttribute()
    completed = BooleanAttribute()
    conclusion = UnicodeAttribute()
    url = UnicodeAttribute(default="")
    expires_at = TTLAttribute()


class CellItem(BaseItem, discriminator="cell"):
    """One job cell; written only when its merged state changes (design.md §2)."""

    trunk = UnicodeAttribute()
    job = UnicodeAttribute()
    seq = NumberAttribute()
    sha = UnicodeAttribute()
    state = UnicodeAttribute()
    poll = UnicodeAttribute()  # the poll that wrote it: the evaluator reports to its tick
    url = UnicodeAttribute(default="")
    attempt = NumberAttribute(default=1)
    failure_lines = JSONAttribute(null=True)
    commit_time = UTCDateTimeAttribute()
    title = UnicodeAttribute(default="")
    author = UnicodeAttribute(default="")
    pr = NumberAttribute(null=True)
    commit_url = UnicodeAttribute(default="")
    # The job's newest cell before the poll that wrote this one (if among the commits the
    # ingest reads back): tells the evaluator whether this cell can end the job's staleness.
    prior_seq = NumberAttribute(null=True)
    # The commit's time + the rule's retention, as its commit item's: expiring oldest commit
    # first only ever clips the far end of the rule's walk.
    expires_at = TTLAttribute(null=True)


class AlertCommitMap(MapAttribute[str, object]):
    seq = NumberAttribute()
    sha = UnicodeAttribute()
    time = UTCDateTimeAttribute()
    title = UnicodeAttribute(default="")
    author = UnicodeAttribute(default="")
    pr = NumberAttribute(null=True)
    url = UnicodeAttribute(default="")
    job_url = UnicodeAttribute(default="")


class AlertItem(BaseItem, discriminator="alert"):
    """A TrunkJobFailing alert's current state, as the evaluator last derived it."""

    job = UnicodeAttribute()
    status = UnicodeAttribute()  # firing | resolved
    starts_at = UTCDateTimeAttribute()
    ends_at = UTCDateTimeAttribute(null=True)
    streak = NumberAttribute()
    first_fail = AlertCommitMap()
    last_pass = AlertCommitMap(null=True)
    newest_fail = AlertCommitMap()
    failure_lines = JSONAttribute(null=True)
    failing_urls = JSONAttribute(null=True)
    # The culprit commit's `autoreverted_by` when the alert was last written: shown once the
    # commit item has expired (while it exists, it is read live: reverts land late).
    culprit_autoreverted_by = UnicodeAttribute(null=True)
    # With `confirm: rerun`: the verdict on the culprit and why (domain/verdict.py).
    culprit_verdict = UnicodeAttribute(null=True)
    verdict_reason = UnicodeAttribute(null=True)
    confirmed_culprit = AlertCommitMap(null=True)
    version = VersionAttribute()


class EpisodeItem(BaseItem, discriminator="episode"):
    """A job alert's episode (`domain.episodes.Episode`), written with the alert when it fires and
    when it resolves; it expires EPISODE_RETENTION after it resolved, never while firing."""

    job = UnicodeAttribute()
    starts_at = UTCDateTimeAttribute()
    ends_at = UTCDateTimeAttribute(null=True)
    culprit = AlertCommitMap()
    verdict = UnicodeAttribute(null=True)  # the alert's culprit_verdict then
    failure_line_ids = JSONAttribute(null=True)  # the alert's failure lines' ids then
    expires_at = TTLAttribute(null=True)


class FixedItem(BaseItem, discriminator="fixed"):
    """A breakage of one job fixed before it could page (`domain.episodes.FixedEpisode`); it expires
    EPISODE_RETENTION after it was detected."""

    job = UnicodeAttribute()
    culprit = AlertCommitMap()
    fix = AlertCommitMap()
    last_pass = AlertCommitMap(null=True)
    failed_commits = NumberAttribute()
    failure_lines = JSONAttribute(null=True)
    detected_at = UTCDateTimeAttribute()
    expires_at = TTLAttribute()


class RerunItem(BaseItem, discriminator="rerun"):
    """A rerun a job alert's episode asked for (`domain.reruns.RerunRecord`)."""

    job = UnicodeAttribute()
    episode = UTCDateTimeAttribute()
    role = UnicodeAttribute()
    sha = UnicodeAttribute()
    culprit_sha = UnicodeAttribute()
    last_pass_sha = UnicodeAttribute(null=True)
    planned_at = UTCDateTimeAttribute()
    status = UnicodeAttribute()
    requested_at = UTCDateTimeAttribute(null=True)
    job_id = NumberAttribute(null=True)  # GitHub's job ids
    job_uuid = UnicodeAttribute(null=True)  # Buildkite's
    shard = UnicodeAttribute(null=True)
    reason = UnicodeAttribute(null=True)
    tries = NumberAttribute(default=0)
    expires_at = TTLAttribute()


class TickItem(BaseItem, discriminator="tick"):
    """Per-poll barrier: settled once every cell the poll wrote has been evaluated (a sweep's
    tick is written settled: it has no cells to wait for)."""

    trunk = UnicodeAttribute()
    poll = UnicodeAttribute()
    expected = NumberAttribute()  # cells the poll wrote
    evaluated = NumberAttribute(null=True)  # records evaluated so far: the union of its TickCounts
    settled = BooleanAttribute(null=True)
    at = UTCDateTimeAttribute()
    expires_at = TTLAttribute()
    # A group of webhook deliveries: deliveries join it until then, and it settles no earlier.
    closes_at = UTCDateTimeAttribute(null=True)
    opened_by = UnicodeAttribute(null=True)  # the delivery that opened the group


class TickCount(BaseItem, discriminator="tick-count"):
    """The stream records of one tick that one evaluator batch evaluated (sk `<poll>#<digest>`).
    A tick's count is the union of its batches' records: a retried batch, or the halves of a
    bisected one, add no record twice."""

    sequences = UnicodeSetAttribute()
    expires_at = TTLAttribute()


class NotificationLog(BaseItem, discriminator="notification"):
    """What was last sent for one alert fingerprint to one receiver (Alertmanager's
    notification log: each receiver keeps its own)."""

    receiver = UnicodeAttribute(default="")
    fingerprint = UnicodeAttribute(default="")
    alertname = UnicodeAttribute()
    job = UnicodeAttribute(null=True)
    seq = NumberAttribute(default=0)  # transitions sent so far; a claim holds only at the seq it read
    last_status = UnicodeAttribute(null=True)  # firing | resolved | None (never sent)
    last_sent_at = UTCDateTimeAttribute(null=True)
    starts_at = UTCDateTimeAttribute(null=True)
    jobs = JSONAttribute(null=True)  # trunk-level: jobs in the last message, with streak and culprit
    held_by = JSONAttribute(null=True)  # silences/inhibitions holding it now
    labels = JSONAttribute(null=True)  # as last sent: a trunk-level alert resolves from these
    annotations = JSONAttribute(null=True)
    acknowledged = UnicodeAttribute(null=True)  # the acknowledgement last told (its time)
    # The lease of a delivery under way (`domain.notification_log.Lease`): its claim's id and end.
    claim_id = UnicodeAttribute(null=True)
    claimed_until = UTCDateTimeAttribute(null=True)
    # None while it was last sent firing (its resolution is still to be sent), else the last
    # write + the rule's retention.
    expires_at = TTLAttribute(null=True)


class RejectionItem(BaseItem, discriminator="rejection"):
    """A message a receiver refused for good, in the trunk's notification log partition under
    its own sort key prefix (one Query lists a trunk's rejections and reads nothing else); one
    per receiver and alert, the latest."""

    receiver = UnicodeAttribute()
    fingerprint = UnicodeAttribute()
    alertname = UnicodeAttribute()
    job = UnicodeAttribute(null=True)
    status = UnicodeAttribute()
    reason = UnicodeAttribute()
    at = UTCDateTimeAttribute()
    answer = UnicodeAttribute()
    # The rule's retention after the rejection.
    expires_at = TTLAttribute()


class AckItem(BaseItem, discriminator="ack"):
    """An alert's acknowledgement (`domain.acks.Acknowledgement`), under the trunk's
    `ACKS#` partition by fingerprint: the live one, or the last one ended. A live one never
    expires (it ends with its episode); an ended one expires the rule's retention after."""

    fingerprint = UnicodeAttribute()
    alertname = UnicodeAttribute()
    job = UnicodeAttribute(null=True)
    at = UTCDateTimeAttribute()
    by = UnicodeAttribute()
    comment = UnicodeAttribute(default="")
    via = UnicodeAttribute()
    ended_at = UTCDateTimeAttribute(null=True)
    expires_at = TTLAttribute(null=True)


class MatcherMap(MapAttribute[str, Any]):
    label = UnicodeAttribute(attr_name="name")
    pattern = UnicodeAttribute(attr_name="value")
    is_regex = BooleanAttribute()
    is_equal = BooleanAttribute()


class SilenceItem(BaseItem, discriminator="silence"):
    """A silence; its version attribute keeps two concurrent changes from both winning, its
    TTL (`endsAt` plus the retention) keeps an expired silence listable for a while."""

    matchers = ListAttribute(of=MatcherMap)
    starts_at = UTCDateTimeAttribute()
    ends_at = UTCDateTimeAttribute()
    updated_at = UTCDateTimeAttribute()
    created_by = UnicodeAttribute()
    comment = UnicodeAttribute()
    expires_at = TTLAttribute()
    version = VersionAttribute()


class SilenceAuditItem(BaseItem, discriminator="audit"):
    silence_id = UnicodeAttribute()
    action = UnicodeAttribute()
    who = UnicodeAttribute()
    at = UTCDateTimeAttribute()
    before = JSONAttribute(null=True)
    after = JSONAttribute(null=True)
    expires_at = TTLAttribute()
