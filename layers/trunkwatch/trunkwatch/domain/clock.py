"""The one clock every component reads, so replays and tests can set the time."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime

_frozen: datetime | None = None
_deferred: list[tuple[datetime, Callable[[], object]]] = []


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


def call_at(when: datetime, action: Callable[[], object]) -> None:
    """Run `action` at `when`, sleeping until then. A frozen clock never gets there by
    itself: the action waits for whoever moves the clock to call `run_due` (the local
    runtime, which simulates time)."""
    if _frozen is None:
        time.sleep(max(0.0, (when - now()).total_seconds()))
        action()
    else:
        _deferred.append((when, action))


def run_due() -> int:
    """Run the actions `call_at` deferred on a frozen clock whose time has come; how many."""
    due = [entry for entry in _deferred if entry[0] <= now()]
    for entry in due:
        _deferred.remove(entry)
        entry[1]()
    return len(due)


def parse_time(value: str) -> datetime:
    """RFC 3339 (with `Z` or an offset) to an aware UTC datetime."""
    parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    if parsed.tzinfo is None:
        raise ValueError(f"timestamp {value!r} has no timezone")
    return parsed.astimezone(UTC)


def format_time(value: datetime) -> str:
    """RFC 3339 in UTC with a `Z`, the form Alertmanager and GitHub print."""
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
