"""The one interface every receiver implements, and what it is handed.

A channel only delivers: deciding what is due (dedup), holding suppressed alerts (mute) and
retrying a failed delivery at the next tick (retry) happen before and around it, in the
notifier, once for every channel and with each channel's own notification log.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from trunkwatch.domain.alerts import Alert
from trunkwatch.domain.config import TokenRef
from trunkwatch.domain.digest import Digest


class ChannelError(Exception):
    """A delivery that did not happen; the notification log is not advanced, so the next
    tick tries again."""


class ChannelRejected(ChannelError):
    """The receiver refused this message for good (it answered that the message itself is
    wrong): sending it again cannot help, so the notifier records the transition as failed,
    with this reason, and goes on with the receiver's next message."""


@dataclass(frozen=True)
class Notification:
    """One transition of one alert, as a receiver gets it."""

    alert: Alert
    status: str  # firing | resolved (the transition, not necessarily the alert's own status)
    reason: str  # Alertmanager's notification_reason: firing, resolved, reminder, update; ...
    external_url: str  # where the API and status page are
    receiver: str
    # time.monotonic() by which the delivery must be done: the notifier tick's time budget.
    deadline: float = math.inf


@dataclass(frozen=True)
class DigestNotification:
    """One day's digest of one trunk (design.md §4.4), as a receiver gets it: never a page."""

    digest: Digest
    receiver: str
    external_url: str  # where the API and status page are
    deadline: float = math.inf  # as a Notification's

    @property
    def body(self) -> dict[str, object]:
        return self.digest.body(self.receiver, self.external_url)


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


@runtime_checkable
class DigestChannel(Protocol):
    """A receiver that can carry the daily digest (the SNS topics, Slack, webhooks)."""

    @property
    def name(self) -> str: ...

    def send_digest(self, notification: DigestNotification) -> None:
        """Deliver, or raise ChannelError (ChannelRejected: refused for good)."""
        ...


@runtime_checkable
class Acknowledging(Protocol):
    """A channel that is told when an alert is acknowledged (PagerDuty, Slack), not only
    shown it in the alert's later messages. The notification's reason is `acknowledged`."""

    def acknowledge(self, notification: Notification) -> None:
        """Tell of the acknowledgement (the alert's `acknowledged_*` annotations), or raise
        ChannelError."""
        ...


Route = Callable[[dict[str, str]], bool]  # a receiver's matchers, as the silences' engine reads them
Resolve = Callable[[TokenRef | None], str | None]  # reads a secret where a TokenRef says it is


@runtime_checkable
class Receiver(Protocol):
    """What a receiver type's configuration (channels/<type>.py) does besides validating."""

    def log_name(self) -> str:
        """The receiver's name from what it is, not from its place in the list: it keys the
        notification log, so reordering receivers or rotating a secret keeps the log."""
        ...

    def channel(self, name: str, route: Route, resolve: Resolve) -> Channel:
        """Its channel; secrets are resolved (with `resolve`) only when a message is due."""
        ...
