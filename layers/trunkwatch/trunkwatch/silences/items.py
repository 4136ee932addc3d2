"""Silence items and their audit records (pk `SILENCE` / `SILENCE#AUDIT`, see the key design).

A silence item carries a version attribute, so two concurrent changes of one silence cannot
both win; its TTL (`expires_at`) is `endsAt` plus the retention, so an expired silence stays
listable for a while and DynamoDB removes it later.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from pynamodb.attributes import (
    BooleanAttribute,
    JSONAttribute,
    ListAttribute,
    MapAttribute,
    TTLAttribute,
    UnicodeAttribute,
    UTCDateTimeAttribute,
    VersionAttribute,
)

from trunkwatch.domain.clock import format_time
from trunkwatch.silences.matchers import Matcher
from trunkwatch.silences.model import Silence
from trunkwatch.storage.table import BaseItem

SILENCE_PK = "SILENCE"
AUDIT_PK = "SILENCE#AUDIT"


class MatcherMap(MapAttribute[str, Any]):
    label = UnicodeAttribute(attr_name="name")
    pattern = UnicodeAttribute(attr_name="value")
    is_regex = BooleanAttribute()
    is_equal = BooleanAttribute()


class SilenceItem(BaseItem, discriminator="silence"):
    matchers = ListAttribute(of=MatcherMap)
    starts_at = UTCDateTimeAttribute()
    ends_at = UTCDateTimeAttribute()
    updated_at = UTCDateTimeAttribute()
    created_by = UnicodeAttribute()
    comment = UnicodeAttribute()
    expires_at = TTLAttribute()
    version = VersionAttribute()

    @classmethod
    def of(cls, silence: Silence, retention: timedelta) -> SilenceItem:
        return cls(
            SILENCE_PK,
            silence.id,
            matchers=[
                MatcherMap(label=m.name, pattern=m.value, is_regex=m.is_regex, is_equal=m.is_equal)
                for m in silence.matchers
            ],
            starts_at=silence.starts_at,
            ends_at=silence.ends_at,
            updated_at=silence.updated_at,
            created_by=silence.created_by,
            comment=silence.comment,
            expires_at=silence.ends_at + retention,
        )

    def refresh_from(self, silence: Silence, retention: timedelta) -> None:
        """Take the fields of a changed `silence`, keeping this item's version for the write check."""
        fresh = self.of(silence, retention)
        for name in ("matchers", "starts_at", "ends_at", "updated_at", "created_by", "comment", "expires_at"):
            setattr(self, name, getattr(fresh, name))

    def silence(self) -> Silence:
        return Silence(
            id=self.sk,
            matchers=tuple(
                Matcher(name=m.label, value=m.pattern, is_regex=m.is_regex, is_equal=m.is_equal)
                for m in self.matchers
            ),
            starts_at=self.starts_at,
            ends_at=self.ends_at,
            created_by=self.created_by,
            comment=self.comment,
            updated_at=self.updated_at,
        )


class SilenceAuditItem(BaseItem, discriminator="audit"):
    silence_id = UnicodeAttribute()
    action = UnicodeAttribute()
    who = UnicodeAttribute()
    at = UTCDateTimeAttribute()
    before = JSONAttribute(null=True)
    after = JSONAttribute(null=True)
    expires_at = TTLAttribute()

    @classmethod
    def of(
        cls,
        action: str,
        who: str,
        at: datetime,
        before: Silence | None,
        after: Silence,
        retention: timedelta,
    ) -> SilenceAuditItem:
        # A record lives as long as the silence version it describes stays listable.
        return cls(
            AUDIT_PK,
            f"{format_time(at)}#{after.id}#{action}",
            silence_id=after.id,
            action=action,
            who=who,
            at=at,
            before=before.to_api(at) if before else None,
            after=after.to_api(at),
            expires_at=after.ends_at + retention,
        )

    def record(self) -> dict[str, Any]:
        return {
            "at": format_time(self.at),
            "silenceID": self.silence_id,
            "action": self.action,
            "who": self.who,
            "before": self.before,
            "after": self.after,
        }
