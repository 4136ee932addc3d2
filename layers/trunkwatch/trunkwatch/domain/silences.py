"""Silences as the silence store keeps them, with their audit records (silences/ has
the model and its rules)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any


@dataclass(frozen=True)
class StoredMatcher:
    name: str
    value: str
    is_regex: bool
    is_equal: bool


@dataclass(frozen=True)
class SilenceRecord:
    """A silence as stored; `version` as in JobAlert. It is gone once `expires_at` passed."""

    id: str
    matchers: tuple[StoredMatcher, ...]
    starts_at: datetime
    ends_at: datetime
    updated_at: datetime
    created_by: str
    comment: str
    expires_at: datetime
    version: int | None = None


@dataclass(frozen=True)
class SilenceAudit:
    """One create/update/expire of a silence, with the silence before and after (API form)."""

    silence_id: str
    action: str
    who: str
    at: datetime
    before: dict[str, Any] | None
    after: dict[str, Any]
    expires_at: datetime
