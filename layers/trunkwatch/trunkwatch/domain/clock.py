"""The one clock every component reads, so replays and tests can set the time."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from datetime import UTC, datetime

_frozen: datetime | None = None


def now() -> datetime:
    return _frozen if _frozen is not None else datetime.now(UTC)


@contextlib.contextmanager
def frozen(at: datetime) -> Iterator[None]:
    """Pin now() to `at` (local runtime and replays run the handlers on a simulated clock)."""
    global _frozen
    previous, _frozen = _frozen, at
    try:
        yield
    finally:
        _frozen = previous


def parse_time(value: str) -> datetime:
    """RFC 3339 (with `Z` or an offset) to an aware UTC datetime."""
    parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    if parsed.tzinfo is None:
        raise ValueError(f"timestamp {value!r} has no timezone")
    return parsed.astimezone(UTC)


def format_time(value: datetime) -> str:
    """RFC 3339 in UTC with a `Z`, the form Alertmanager and GitHub print."""
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
