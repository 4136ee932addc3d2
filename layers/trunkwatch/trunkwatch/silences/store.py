"""Creating, updating, expiring and reading silences in the table.

Every change is one DynamoDB transaction holding the silence item(s) and their audit
records, so a failure leaves nothing half-written. Nothing is hard-deleted: expiring sets
`endsAt` to now and DynamoDB's TTL removes the item once the retention has passed.
"""

from __future__ import annotations

import dataclasses
import uuid
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from pynamodb.connection import Connection
from pynamodb.exceptions import TransactWriteError
from pynamodb.transactions import TransactWrite

from trunkwatch.silences.items import AUDIT_PK, SILENCE_PK, SilenceAuditItem, SilenceItem
from trunkwatch.silences.matchers import SilenceError
from trunkwatch.silences.model import (
    ACTIVE,
    EXPIRED,
    PENDING,
    Silence,
    SilenceConflict,
    SilenceNotFound,
    check_id,
)

if TYPE_CHECKING:
    from trunkwatch.silences.postable import PostableSilence

RETENTION = timedelta(hours=120)


def _load(silence_id: str, now: datetime) -> SilenceItem:
    key = check_id(silence_id)
    try:
        item = SilenceItem.get(SILENCE_PK, key, consistent_read=True)
    except SilenceItem.DoesNotExist:
        raise SilenceNotFound(f"silence {key} not found") from None
    # DynamoDB deletes expired-TTL items only eventually; until then they are gone for us.
    if item.expires_at <= now:
        raise SilenceNotFound(f"silence {key} not found")
    return item


def get(silence_id: str, now: datetime) -> Silence:
    return _load(silence_id, now).silence()


def list_silences(now: datetime) -> list[Silence]:
    items = SilenceItem.query(SILENCE_PK, filter_condition=SilenceItem.expires_at > now, consistent_read=True)
    return [item.silence() for item in items]


def active(now: datetime) -> list[Silence]:
    return [silence for silence in list_silences(now) if silence.status(now) == ACTIVE]


def audit_log() -> list[dict[str, Any]]:
    """Every recorded create/update/expire, oldest first."""
    return [item.record() for item in SilenceAuditItem.query(AUDIT_PK, consistent_read=True)]


def _can_update(previous: Silence, wanted: Silence, now: datetime) -> bool:
    """Alertmanager's rule: an update may not rewrite what the silence already did."""
    if not previous.same_matchers(wanted):
        return False
    status = previous.status(now)
    if status == ACTIVE:
        # Compared to the second, as Alertmanager does (clients round-trip the timestamp).
        return int(wanted.starts_at.timestamp()) == int(previous.starts_at.timestamp())
    if status == PENDING:
        return wanted.starts_at >= now
    return False


def _expired(silence: Silence, now: datetime) -> Silence:
    """Ends now; a pending silence also starts now so it never was active."""
    starts_at = min(silence.starts_at, now)
    return dataclasses.replace(silence, starts_at=starts_at, ends_at=now, updated_at=now)


def _commit(items: list[SilenceItem], audits: list[SilenceAuditItem]) -> None:
    meta = SilenceItem.Meta
    try:
        with TransactWrite(connection=Connection(region=meta.region, host=meta.host)) as transaction:
            for item in items:
                transaction.save(item)
            for audit in audits:
                transaction.save(audit, condition=SilenceAuditItem.pk.does_not_exist())
    except TransactWriteError as err:
        reasons = [reason.code for reason in err.cancellation_reasons or [] if reason is not None]
        if "ConditionalCheckFailed" in reasons:
            raise SilenceConflict("the silence was changed by another request; try again") from None
        raise


def _create(wanted: Silence, who: str, now: datetime) -> tuple[SilenceItem, SilenceAuditItem]:
    created = dataclasses.replace(wanted, id=str(uuid.uuid4()), starts_at=max(wanted.starts_at, now))
    return SilenceItem.of(created, RETENTION), SilenceAuditItem.of(
        "create", who, now, None, created, RETENTION
    )


def upsert(postable: dict[str, Any] | PostableSilence, principal: str | None, now: datetime) -> str:
    """Create a silence, or update the one named by `id`; returns the id now in effect.

    An update keeps its id only when Alertmanager would allow it in place (same matchers;
    an active silence keeps its start; a pending one does not start in the past). Otherwise
    the old silence is expired and a new one with a new id is created.
    """
    from trunkwatch.silences.postable import parse_postable  # pydantic: the API's path only

    body = parse_postable(postable)
    created_by = body.created_by or principal
    if not created_by:
        raise SilenceError("createdBy is required")
    who = principal or created_by
    if body.id is None:
        wanted = Silence.from_postable(body, "", created_by, now)
        item, audit = _create(wanted, who, now)
        _commit([item], [audit])
        return item.sk

    previous_item = _load(body.id, now)
    previous = previous_item.silence()
    wanted = Silence.from_postable(body, previous.id, created_by, now)
    if _can_update(previous, wanted, now):
        previous_item.refresh_from(wanted, RETENTION)
        _commit([previous_item], [SilenceAuditItem.of("update", who, now, previous, wanted, RETENTION)])
        return previous.id

    item, audit = _create(wanted, who, now)
    items, audits = [item], [audit]
    if previous.status(now) != EXPIRED:
        ended = _expired(previous, now)
        previous_item.refresh_from(ended, RETENTION)
        items.append(previous_item)
        audits.append(SilenceAuditItem.of("expire", who, now, previous, ended, RETENTION))
    _commit(items, audits)
    return item.sk


def expire(silence_id: str, principal: str | None, now: datetime) -> None:
    item = _load(silence_id, now)
    previous = item.silence()
    if previous.status(now) == EXPIRED:
        raise SilenceError(f"silence {previous.id} has already expired")
    ended = _expired(previous, now)
    item.refresh_from(ended, RETENTION)
    who = principal or previous.created_by
    _commit([item], [SilenceAuditItem.of("expire", who, now, previous, ended, RETENTION)])
