"""Silences and their audit records in DynamoDB (pk `SILENCE` / `SILENCE#AUDIT`, see the key
design). A change is one transaction holding the silence item(s) and their audit records, so
a failure leaves nothing half-written; a silence item is version-checked."""

from __future__ import annotations

from datetime import datetime

from pynamodb.exceptions import DoesNotExist, TransactWriteError
from pynamodb.transactions import TransactWrite

from trunkwatch.domain.clock import format_time
from trunkwatch.domain.silences import SilenceAudit, SilenceRecord, StoredMatcher
from trunkwatch.storage import keys
from trunkwatch.storage.errors import Conflict
from trunkwatch.storage.items import MatcherMap, SilenceAuditItem, SilenceItem
from trunkwatch.storage.table import BoundModels


def _record(item: SilenceItem) -> SilenceRecord:
    return SilenceRecord(
        id=str(item.sk),
        matchers=tuple(
            StoredMatcher(str(m.label), str(m.pattern), bool(m.is_regex), bool(m.is_equal))
            for m in item.matchers
        ),
        starts_at=item.starts_at,
        ends_at=item.ends_at,
        updated_at=item.updated_at,
        created_by=str(item.created_by),
        comment=str(item.comment),
        expires_at=item.expires_at,
        version=int(item.version) if item.version is not None else None,
    )


def silence_item(model: type[SilenceItem], record: SilenceRecord) -> SilenceItem:
    item = model(
        keys.SILENCES,
        record.id,
        matchers=[
            MatcherMap(label=m.name, pattern=m.value, is_regex=m.is_regex, is_equal=m.is_equal)
            for m in record.matchers
        ],
        starts_at=record.starts_at,
        ends_at=record.ends_at,
        updated_at=record.updated_at,
        created_by=record.created_by,
        comment=record.comment,
        expires_at=record.expires_at,
    )
    if record.version is not None:  # a silence read before: saved only if still at that version
        item.version = record.version
    return item


def audit_item(model: type[SilenceAuditItem], audit: SilenceAudit) -> SilenceAuditItem:
    return model(
        keys.SILENCE_AUDIT,
        f"{format_time(audit.at)}#{audit.silence_id}#{audit.action}",
        silence_id=audit.silence_id,
        action=audit.action,
        who=audit.who,
        at=audit.at,
        before=audit.before,
        after=audit.after,
        expires_at=audit.expires_at,
    )


class DynamoSilences:
    def __init__(self, table: BoundModels) -> None:
        self.silences = table.model(SilenceItem)
        self.audits = table.model(SilenceAuditItem)
        self.connection = table.connection

    def get(self, silence_id: str) -> SilenceRecord | None:
        try:
            return _record(self.silences.get(keys.SILENCES, silence_id, consistent_read=True))
        except DoesNotExist:
            return None

    def listable(self, now: datetime) -> list[SilenceRecord]:
        """Every silence not past its expiry (DynamoDB deletes expired-TTL items only
        eventually; until then they are gone for us)."""
        query = self.silences.query(
            keys.SILENCES, filter_condition=SilenceItem.expires_at > now, consistent_read=True
        )
        return [_record(item) for item in query]

    def audit(self) -> list[SilenceAudit]:
        """Every recorded change, oldest first."""
        return [
            SilenceAudit(
                silence_id=str(item.silence_id),
                action=str(item.action),
                who=str(item.who),
                at=item.at,
                before=item.before,
                after=dict(item.after or {}),
                expires_at=item.expires_at,
            )
            for item in self.audits.query(keys.SILENCE_AUDIT, consistent_read=True)
        ]

    def commit(self, silences: list[SilenceRecord], audits: list[SilenceAudit]) -> None:
        """Write the silences (each at its version, else `Conflict`) and their new audit
        records in one transaction."""
        try:
            with TransactWrite(connection=self.connection) as transaction:
                for record in silences:
                    transaction.save(silence_item(self.silences, record))
                for audit in audits:
                    transaction.save(
                        audit_item(self.audits, audit), condition=SilenceAuditItem.pk.does_not_exist()
                    )
        except TransactWriteError as err:
            reasons = [reason.code for reason in err.cancellation_reasons or [] if reason is not None]
            if "ConditionalCheckFailed" in reasons:
                raise Conflict("the silence was changed by another request") from None
            raise
