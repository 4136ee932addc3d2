"""Silences (design.md §5): what a silence is and its rules (the postable shape the API accepts
is in `postable`, which only the API's path imports: it is built on pydantic).

Mirrors Alertmanager: status comes from the clock (pending before `startsAt`, expired from
`endsAt` on, active in between), at least one matcher must not match the empty string, and
`startsAt < endsAt` with `endsAt` in the future.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Final, Literal

from trunkwatch.domain.clock import format_time
from trunkwatch.silences.matchers import Matcher, SilenceError

if TYPE_CHECKING:
    from trunkwatch.silences.postable import PostableSilence

MAX_MATCHERS = 32
MAX_COMMENT_LENGTH = 4096
MAX_CREATED_BY_LENGTH = 256
# Longer than any maintenance window; also keeps `endsAt + retention` a valid datetime.
MAX_DURATION = timedelta(days=3650)

PENDING: Final = "pending"
ACTIVE: Final = "active"
EXPIRED: Final = "expired"
Status = Literal["pending", "active", "expired"]


class SilenceNotFound(LookupError):
    """No silence with that id (or only one whose retention has passed)."""


class SilenceConflict(Exception):
    """The silence changed while this request was being applied; retrying is safe."""


def check_id(silence_id: str) -> str:
    """Silence ids are UUIDs; anything else cannot name one."""
    try:
        return str(uuid.UUID(silence_id))
    except (ValueError, TypeError, AttributeError):
        raise SilenceError(f"{silence_id!r} is not a silence id (a UUID)") from None


def check_matchers(matchers: tuple[Matcher, ...]) -> None:
    if not matchers:
        raise SilenceError("at least one matcher is required")
    if len(matchers) > MAX_MATCHERS:
        raise SilenceError(f"too many matchers (at most {MAX_MATCHERS})")
    if all(matcher.matches_empty() for matcher in matchers):
        raise SilenceError("at least one matcher must not match the empty string")
    if all(matcher.matches_any_value() for matcher in matchers):
        raise SilenceError("these matchers would silence every alert; match something specific")


def check_times(starts_at: datetime, ends_at: datetime, now: datetime) -> None:
    if starts_at >= ends_at:
        raise SilenceError("startsAt must be before endsAt")
    if ends_at <= now:
        raise SilenceError("endsAt is in the past")
    if ends_at - now > MAX_DURATION:
        raise SilenceError(f"endsAt is more than {MAX_DURATION.days} days away")


@dataclass(frozen=True)
class Silence:
    id: str
    matchers: tuple[Matcher, ...]
    starts_at: datetime
    ends_at: datetime
    created_by: str
    comment: str
    updated_at: datetime

    def status(self, now: datetime) -> Status:
        if now < self.starts_at:
            return PENDING
        # Expiring sets endsAt to now, so a silence is over from its endsAt on.
        if now >= self.ends_at:
            return EXPIRED
        return ACTIVE

    def matches(self, labels: dict[str, str]) -> bool:
        return all(matcher.matches(labels) for matcher in self.matchers)

    def same_matchers(self, other: Silence) -> bool:
        """Order (and repetition) does not change what a silence matches."""
        return set(self.matchers) == set(other.matchers)

    def to_api(self, now: datetime) -> dict[str, Any]:
        """Alertmanager's gettableSilence."""
        return {
            "id": self.id,
            "status": {"state": self.status(now)},
            "updatedAt": format_time(self.updated_at),
            "matchers": [matcher.to_api() for matcher in self.matchers],
            "startsAt": format_time(self.starts_at),
            "endsAt": format_time(self.ends_at),
            "createdBy": self.created_by,
            "comment": self.comment,
        }

    @classmethod
    def from_postable(cls, body: PostableSilence, silence_id: str, created_by: str, now: datetime) -> Silence:
        """Validated silence from a postable body; `startsAt` defaults to now."""
        matchers = tuple(
            Matcher(name=m.name, value=m.value, is_regex=m.is_regex, is_equal=m.is_equal)
            for m in body.matchers
        )
        check_matchers(matchers)
        starts_at = body.starts_at or now
        check_times(starts_at, body.ends_at, now)
        return cls(
            id=silence_id,
            matchers=matchers,
            starts_at=starts_at,
            ends_at=body.ends_at,
            created_by=created_by,
            comment=body.comment,
            updated_at=now,
        )


def sort_for_listing(silences: list[Silence], now: datetime) -> list[Silence]:
    """Alertmanager's order: active by soonest end, pending by soonest start, expired newest first."""
    rank = {ACTIVE: 0, PENDING: 1, EXPIRED: 2}

    def key(silence: Silence) -> tuple[int, float]:
        status = silence.status(now)
        if status == ACTIVE:
            return rank[status], silence.ends_at.timestamp()
        if status == PENDING:
            return rank[status], silence.starts_at.timestamp()
        return rank[status], -silence.ends_at.timestamp()

    return sorted(silences, key=key)


def __getattr__(name: str) -> Any:
    """The postable shape's names, as they were importable from here, loaded on first use."""
    if name in ("MatcherBody", "PostableSilence", "describe_errors", "parse_postable"):
        from trunkwatch.silences import postable

        return getattr(postable, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
