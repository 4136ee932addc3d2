"""Creating, updating, expiring and reading silences, on the storage's silence store.

Every change is one all-or-nothing write of the silence(s) and their audit records, so a
failure leaves nothing half-written. Nothing is hard-deleted: expiring sets `endsAt` to now
and the store forgets the silence once the retention has passed (DynamoDB's TTL).
"""

from __future__ import annotations

import dataclasses
import uuid
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from trunkwatch.domain.clock import format_time
from trunkwatch.domain.silences import SilenceAudit, SilenceRecord, StoredMatcher
from trunkwatch.silences.matchers import Matcher, SilenceError
from trunkwatch.silences.model import (
    ACTIVE,
    EXPIRED,
    PENDING,
    Silence,
    SilenceConflict,
    SilenceNotFound,
    check_id,
)
from trunkwatch.storage.errors import Conflict
from trunkwatch.storage.port import Silences

if TYPE_CHECKING:
    from trunkwatch.silences.postable import PostableSilence

RETENTION = timedelta(hours=120)


def silence_record(silence: Silence, version: int | None) -> SilenceRecord:
    """What is stored of `silence`: it stays listable RETENTION after its end."""
    return SilenceRecord(
        id=silence.id,
        matchers=tuple(StoredMatcher(m.name, m.value, m.is_regex, m.is_equal) for m in silence.matchers),
        starts_at=silence.starts_at,
        ends_at=silence.ends_at,
        updated_at=silence.updated_at,
        created_by=silence.created_by,
        comment=silence.comment,
        expires_at=silence.ends_at + RETENTION,
        version=version,
    )


def _silence(record: SilenceRecord) -> Silence:
    return Silence(
        id=record.id,
        matchers=tuple(Matcher(m.name, m.value, m.is_regex, m.is_equal) for m in record.matchers),
        starts_at=record.starts_at,
        ends_at=record.ends_at,
        created_by=record.created_by,
        comment=record.comment,
        updated_at=record.updated_at,
    )


def audit_record(action: str, who: str, at: datetime, before: Silence | None, after: Silence) -> SilenceAudit:
    # A record lives as long as the silence version it describes stays listable.
    return SilenceAudit(
        silence_id=after.id,
        action=action,
        who=who,
        at=at,
        before=before.to_api(at) if before else None,
        after=after.to_api(at),
        expires_at=after.ends_at + RETENTION,
    )


def _load(silences: Silences, silence_id: str, now: datetime) -> SilenceRecord:
    key = check_id(silence_id)
    record = silences.get(key)
    # DynamoDB deletes expired-TTL items only eventually; until then they are gone for us.
    if record is None or record.expires_at <= now:
        raise SilenceNotFound(f"silence {key} not found")
    return record


def get(silences: Silences, silence_id: str, now: datetime) -> Silence:
    return _silence(_load(silences, silence_id, now))


def list_silences(silences: Silences, now: datetime) -> list[Silence]:
    return [_silence(record) for record in silences.listable(now)]


def active(silences: Silences, now: datetime) -> list[Silence]:
    return [silence for silence in list_silences(silences, now) if silence.status(now) == ACTIVE]


def audit_log(silences: Silences) -> list[dict[str, Any]]:
    """Every recorded create/update/expire, oldest first."""
    return [
        {
            "at": format_time(audit.at),
            "silenceID": audit.silence_id,
            "action": audit.action,
            "who": audit.who,
            "before": audit.before,
            "after": audit.after,
        }
        for audit in silences.audit()
    ]


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


def _commit(silences: Silences, records: list[SilenceRecord], audits: list[SilenceAudit]) -> None:
    try:
        silences.commit(records, audits)
    except Conflict:
        raise SilenceConflict("the silence was changed by another request; try again") from None


def _create(wanted: Silence, who: str, now: datetime) -> tuple[SilenceRecord, SilenceAudit]:
    created = dataclasses.replace(wanted, id=str(uuid.uuid4()), starts_at=max(wanted.starts_at, now))
    return silence_record(created, None), audit_record("create", who, now, None, created)


def upsert(
    silences: Silences, postable: dict[str, Any] | PostableSilence, principal: str | None, now: datetime
) -> str:
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
        record, audit = _create(wanted, who, now)
        _commit(silences, [record], [audit])
        return record.id

    stored = _load(silences, body.id, now)
    previous = _silence(stored)
    wanted = Silence.from_postable(body, previous.id, created_by, now)
    if _can_update(previous, wanted, now):
        # At the version read: a concurrent change of the same silence makes this one fail.
        updated = silence_record(wanted, stored.version)
        _commit(silences, [updated], [audit_record("update", who, now, previous, wanted)])
        return previous.id

    record, audit = _create(wanted, who, now)
    records, audits = [record], [audit]
    if previous.status(now) != EXPIRED:
        ended = _expired(previous, now)
        records.append(silence_record(ended, stored.version))
        audits.append(audit_record("expire", who, now, previous, ended))
    _commit(silences, records, audits)
    return record.id


def expire(silences: Silences, silence_id: str, principal: str | None, now: datetime) -> None:
    stored = _load(silences, silence_id, now)
    previous = _silence(stored)
    if previous.status(now) == EXPIRED:
        raise SilenceError(f"silence {previous.id} has already expired")
    ended = _expired(previous, now)
    who = principal or previous.created_by
    audit = audit_record("expire", who, now, previous, ended)
    _commit(silences, [silence_record(ended, stored.version)], [audit])
