"""Clocks: what every component that needs the time is handed, so replays and tests can set it.

A `Clock` answers `now()` and runs an action at a later time (`call_at`). Deployed functions
run on `SystemClock` (real time; `call_at` sleeps until then). The local runtime and the
tests run the handlers on a `SimulatedClock`, which moves only when it is told (`set`,
`advance`) and keeps what `call_at` asked for until `run_due` runs it. The handler edge
(`app/settings.Edge`) carries its function's clock; nothing reads the time from a global.
`parse_time` and `format_time` are pure helpers.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Protocol


class Clock(Protocol):
    def now(self) -> datetime:
        """The current time, timezone-aware UTC."""
        ...

    def call_at(self, when: datetime, action: Callable[[], object]) -> None:
        """Run `action` at `when` (at once if that has passed)."""
        ...


class SystemClock:
    """Real time: what a deployed function runs on."""

    def now(self) -> datetime:
        return datetime.now(UTC)

    def call_at(self, when: datetime, action: Callable[[], object]) -> None:
        """Sleep until `when`, then run `action` (the caller waits: a webhook delivery that
        opened its group settles it before it answers)."""
        time.sleep(max(0.0, (when - self.now()).total_seconds()))
        action()


class SimulatedClock:
    """A clock that moves only when told: the local runtime's and the tests'. Actions
    `call_at` defers wait for `run_due` once the clock has reached them."""

    def __init__(self, at: datetime | None = None) -> None:
        self._now = _aware(at) if at is not None else datetime.now(UTC)
        self._deferred: list[tuple[datetime, Callable[[], object]]] = []

    def now(self) -> datetime:
        return self._now

    def set(self, at: datetime) -> None:
        """Move the clock to `at` (forwards or back: a replay may start before the last one)."""
        self._now = _aware(at)

    def advance(self, by: timedelta) -> None:
        self._now += by

    def call_at(self, when: datetime, action: Callable[[], object]) -> None:
        self._deferred.append((when, action))

    def next_due(self) -> datetime | None:
        """When the earliest deferred action is due; None if none waits."""
        return min((when for when, _ in self._deferred), default=None)

    def run_due(self) -> int:
        """Run the deferred actions whose time has come, in time order; how many ran."""
        due = sorted((entry for entry in self._deferred if entry[0] <= self._now), key=lambda e: e[0])
        for entry in due:
            self._deferred.remove(entry)
            entry[1]()
        return len(due)


def _aware(at: datetime) -> datetime:
    if at.tzinfo is None:
        raise ValueError(f"{at!r} has no timezone")
    return at.astimezone(UTC)


def parse_time(value: str) -> datetime:
    """RFC 3339 (with `Z` or an offset) to an aware UTC datetime."""
    parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    if parsed.tzinfo is None:
        raise ValueError(f"timestamp {value!r} has no timezone")
    return parsed.astimezone(UTC)


def format_time(value: datetime) -> str:
    """RFC 3339 in UTC with a `Z`, the form Alertmanager and GitHub print."""
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
