"""The one interface every receiver implements, and what it is handed.

A channel only delivers: deciding what is due (dedup), holding suppressed alerts (mute) and
retrying a failed delivery at the next tick (retry) happen before and around it, in the
notifier, once for every channel and with each channel's own notification log.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from trunkwatch.domain.alerts import Alert


class ChannelError(Exception):
    """A delivery that did not happen; the notification log is not advanced, so the next
    tick tries again."""


@dataclass(frozen=True)
class Notification:
    """One transition of one alert, as a receiver gets it."""

    alert: Alert
    status: str  # firing | resolved (the transition, not necessarily the alert's own status)
    reason: str  # Alertmanager's notification_reason: firing, resolved, reminder, update; ...
    external_url: str  # where the API and status page are
    receiver: str


class Channel(Protocol):
    """A receiver: a unique name (its notification log's key) and a way to deliver."""

    @property
    def name(self) -> str: ...

    def accepts(self, labels: dict[str, str]) -> bool:
        """Whether this receiver wants alerts with these labels (its matchers)."""
        ...

    def send(self, notification: Notification) -> None:
        """Deliver, or raise ChannelError."""
        ...
